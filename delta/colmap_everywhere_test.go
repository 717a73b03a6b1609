package delta_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// feedJSON reads the change feed from..to (to < 0: the latest) as sorted JSON rows
// without _commit_timestamp.
func feedJSON(t testing.TB, tbl *delta.Table, from, to int64) []string {
	t.Helper()
	opts := delta.ChangesOptions{StartVersion: &from}
	if to >= 0 {
		opts.EndVersion = &to
	}
	rd, err := tbl.Changes(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var recs []arrow.RecordBatch
	for rd.Next() {
		rec := rd.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	out := jsonRows(t, recs...)
	for _, r := range recs {
		r.Release()
	}
	for i := range out {
		out[i] = commitTimestamp.ReplaceAllString(out[i], "")
	}
	slices.Sort(out)
	return out
}

// evolveTo plans and commits the evolution of tbl's latest schema into decl.
func evolveTo(t testing.TB, tbl *delta.Table, decl string, opts delta.EvolutionOptions) int64 {
	t.Helper()
	ctx := context.Background()
	d, err := delta.ParseSchema(decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev, problems := delta.PlanEvolution(snap, d, opts)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	v, err := tbl.Evolve(ctx, ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func latest(t testing.TB, tbl *delta.Table) *delta.Snapshot {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func fieldJSON(name, typ string) string {
	return `{"name":"` + name + `","type":"` + typ + `","nullable":true,"metadata":{}}`
}

func wantRows(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The change feed of a column-mapped table across a rename, a drop and a column added
// again under the dropped one's name reads every version in the newest schema, columns
// matched by their ids (the renamed column keeps its values, the dropped one is gone,
// the new one of the same name is NULL in older rows); a range that ends before the
// changes reads in the schema of its end. Deletion vectors, UPDATE (change data files
// written in the newer schema) and MERGE take part.
func TestColumnMappingChangeFeedAcrossRenameAndDrop(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(map[bool]string{false: "rewrite", true: "deletion vectors"}[dv], func(t *testing.T) {
			ctx := context.Background()
			store := mem.New(mem.Config{})
			sch, _ := delta.ParseSchema(structOf(fieldJSON("id", "long"), fieldJSON("a", "string"), fieldJSON("c", "string"), fieldJSON("part", "string")))
			props := map[string]string{"delta.columnMapping.mode": "id", "delta.enableChangeDataFeed": "true"}
			if dv {
				props["delta.enableDeletionVectors"] = "true"
			}
			tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch, PartitionColumns: []string{"part"}, Properties: props}, delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			appendJSON(t, tbl, latest(t, tbl), `[{"id":1,"a":"x1","c":"c1","part":"p"},{"id":2,"a":"x2","c":"c2","part":"p"},{"id":3,"a":"x3","c":"c3","part":"q"},{"id":5,"a":"x5","c":"c5","part":"p"},{"id":6,"a":"x6","c":"c6","part":"q"}]`) // v1
			evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("b", "string"), fieldJSON("c", "string"), fieldJSON("part", "string")),
				delta.EvolutionOptions{RenamedFrom: map[string]string{"b": "a"}}) // v2 a → b
			if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", 1), Set: map[string]any{"b": "y1"}}); err != nil { // v3
				t.Fatal(err)
			}
			if _, err := tbl.DropColumns(ctx, latest(t, tbl), []string{"c"}, nil); err != nil { // v4
				t.Fatal(err)
			}
			if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", 2)}); err != nil { // v5
				t.Fatal(err)
			}
			evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("b", "string"), fieldJSON("part", "string"), fieldJSON("c", "string")), delta.EvolutionOptions{}) // v6: another c
			appendJSON(t, tbl, latest(t, tbl), `[{"id":4,"b":"x4","c":"new","part":"q"}]`)                                                                                 // v7
			src := recordJSON(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}, nil), `[{"id":3,"b":"m3"}]`)
			defer src.Release()
			if _, err := tbl.Merge(ctx, delta.MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"}, // v8
				WhenMatched: []delta.MergeClause{{Action: delta.MergeUpdate, Set: map[string]any{"b": expr.Col("source.b")}}}}); err != nil {
				t.Fatal(err)
			}
			wantRows(t, "the whole feed in the newest schema", feedJSON(t, tbl, 0, -1), []string{
				`{"_change_type":"delete","_commit_version":5,"b":"x2","c":null,"id":2,"part":"p"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x1","c":null,"id":1,"part":"p"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x2","c":null,"id":2,"part":"p"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x3","c":null,"id":3,"part":"q"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x5","c":null,"id":5,"part":"p"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x6","c":null,"id":6,"part":"q"}`,
				`{"_change_type":"insert","_commit_version":7,"b":"x4","c":"new","id":4,"part":"q"}`,
				`{"_change_type":"update_postimage","_commit_version":3,"b":"y1","c":null,"id":1,"part":"p"}`,
				`{"_change_type":"update_postimage","_commit_version":8,"b":"m3","c":null,"id":3,"part":"q"}`,
				`{"_change_type":"update_preimage","_commit_version":3,"b":"x1","c":null,"id":1,"part":"p"}`,
				`{"_change_type":"update_preimage","_commit_version":8,"b":"x3","c":null,"id":3,"part":"q"}`,
			})
			wantRows(t, "versions 1..3 in the schema of version 3", feedJSON(t, tbl, 1, 3), []string{
				`{"_change_type":"insert","_commit_version":1,"b":"x1","c":"c1","id":1,"part":"p"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x2","c":"c2","id":2,"part":"p"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x3","c":"c3","id":3,"part":"q"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x5","c":"c5","id":5,"part":"p"}`,
				`{"_change_type":"insert","_commit_version":1,"b":"x6","c":"c6","id":6,"part":"q"}`,
				`{"_change_type":"update_postimage","_commit_version":3,"b":"y1","c":"c1","id":1,"part":"p"}`,
				`{"_change_type":"update_preimage","_commit_version":3,"b":"x1","c":"c1","id":1,"part":"p"}`,
			})
			wantRows(t, "version 1 in its own schema", feedJSON(t, tbl, 1, 1)[:1], []string{
				`{"_change_type":"insert","_commit_version":1,"a":"x1","c":"c1","id":1,"part":"p"}`,
			})
			// Every version reads in its own schema.
			for v, want := range map[int64]string{
				1: `{"a":"x1","c":"c1","id":1,"part":"p"}`,
				3: `{"b":"y1","c":"c1","id":1,"part":"p"}`,
				5: `{"b":"y1","id":1,"part":"p"}`,
				8: `{"b":"y1","c":null,"id":1,"part":"p"}`,
			} {
				snap, err := tbl.SnapshotAt(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				if got := scanRows(t, snap, delta.ScanOptions{Filter: expr.Eq("id", 1)}); len(got) != 1 || got[0] != want {
					t.Fatalf("version %d: %v, want %s", v, got, want)
				}
			}
			if dv && !slices.ContainsFunc(latest(t, tbl).Files(), func(a *delta.Add) bool { return a.DeletionVector != nil }) {
				t.Fatal("no file has a deletion vector")
			}
		})
	}
}

// A column-mapped table read and vacuumed after renames and drops: VACUUM keeps every
// live file (their directories and columns are named physically) and deletes only the
// removed ones; the table reads the same before and after.
func TestColumnMappingVacuum(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, _ := delta.ParseSchema(structOf(fieldJSON("id", "long"), fieldJSON("a", "string"), fieldJSON("part", "string")))
	clock := time.Now()
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch, PartitionColumns: []string{"part"},
		Properties: map[string]string{"delta.columnMapping.mode": "name"}}, delta.Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	appendJSON(t, tbl, latest(t, tbl), `[{"id":1,"a":"x","part":"p"},{"id":2,"a":"y","part":"q"}]`)
	evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("b", "string"), fieldJSON("part", "string")), delta.EvolutionOptions{RenamedFrom: map[string]string{"b": "a"}})
	evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("b", "string"), fieldJSON("part", "string"), fieldJSON("z", "integer")), delta.EvolutionOptions{})
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", 2)}); err != nil {
		t.Fatal(err)
	}
	appendJSON(t, tbl, latest(t, tbl), `[{"id":3,"b":"w","part":"q","z":7}]`)
	before := scanRows(t, latest(t, tbl), delta.ScanOptions{})
	wantRows(t, "before VACUUM", before, []string{`{"b":"w","id":3,"part":"q","z":7}`, `{"b":"x","id":1,"part":"p","z":null}`})
	clock = time.Now().Add(time.Hour) // the removed file is an hour old
	zero := time.Duration(0)
	res, err := tbl.Vacuum(ctx, delta.VacuumOptions{Retain: &zero, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.FilesDeleted) != 1 {
		t.Fatalf("VACUUM deleted %v, want the one removed file", res.FilesDeleted)
	}
	for _, a := range latest(t, tbl).Files() {
		if slices.Contains(res.FilesDeleted, a.Path) {
			t.Fatalf("VACUUM deleted live file %s", a.Path)
		}
		if strings.HasPrefix(a.Path, "part=") {
			t.Fatalf("file %s: its partition directory names the column by its logical name", a.Path)
		}
	}
	wantRows(t, "after VACUUM", scanRows(t, latest(t, tbl), delta.ScanOptions{}), before)
}

// RESTORE across schema changes brings the restored version's schema back (the column
// under its old name, a dropped column back with its values) and never hands out a
// column mapping id twice: a column added after the restore is another column than one
// added before it, in every version and in the change feed.
func TestColumnMappingRestore(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, _ := delta.ParseSchema(structOf(fieldJSON("id", "long"), fieldJSON("a", "string"), fieldJSON("c", "string")))
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch,
		Properties: map[string]string{"delta.columnMapping.mode": "id", "delta.enableChangeDataFeed": "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendJSON(t, tbl, latest(t, tbl), `[{"id":1,"a":"x","c":"c1"}]`) // v1
	evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("b", "string"), fieldJSON("c", "string"), fieldJSON("added", "string")),
		delta.EvolutionOptions{RenamedFrom: map[string]string{"b": "a"}}) // v2
	appendJSON(t, tbl, latest(t, tbl), `[{"id":2,"b":"y","c":"c2","added":"first"}]`)   // v3
	if _, err := tbl.DropColumns(ctx, latest(t, tbl), []string{"c"}, nil); err != nil { // v4
		t.Fatal(err)
	}
	one := int64(1)
	if _, _, err := tbl.Restore(ctx, delta.RestoreOptions{Version: &one}); err != nil { // v5
		t.Fatal(err)
	}
	wantRows(t, "restored to version 1", scanRows(t, latest(t, tbl), delta.ScanOptions{}), []string{`{"a":"x","c":"c1","id":1}`})
	evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("a", "string"), fieldJSON("c", "string"), fieldJSON("other", "string")), delta.EvolutionOptions{}) // v6
	snap := latest(t, tbl)
	if got := snap.Properties()["delta.columnMapping.maxColumnId"]; got != "5" {
		t.Fatalf("maxColumnId %s after the restore and an ADD COLUMNS, want 5 (id 4 went to the column added before the restore)", got)
	}
	// Version 3's file holds "added" (id 4); the new column must not read it.
	wantRows(t, "the feed from version 1 in the newest schema", feedJSON(t, tbl, 1, -1), []string{
		`{"_change_type":"delete","_commit_version":5,"a":"y","c":"c2","id":2,"other":null}`,
		`{"_change_type":"insert","_commit_version":1,"a":"x","c":"c1","id":1,"other":null}`,
		`{"_change_type":"insert","_commit_version":3,"a":"y","c":"c2","id":2,"other":null}`,
	})
	for v, want := range map[int64][]string{
		3: {`{"added":"first","b":"y","c":"c2","id":2}`, `{"added":null,"b":"x","c":"c1","id":1}`},
		4: {`{"added":"first","b":"y","id":2}`, `{"added":null,"b":"x","id":1}`},
		6: {`{"a":"x","c":"c1","id":1,"other":null}`},
	} {
		s, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		wantRows(t, "version "+string(rune('0'+v)), scanRows(t, s, delta.ScanOptions{}), want)
	}
}

// A table without column mapping whose schema still carries column mapping metadata (a
// schema copied from a mapped table, a mapping dropped by another engine) names its
// columns by their names in its files, as every reader of such a table expects.
func TestColumnMappingModeNoneUsesNames(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, _ := delta.ParseSchema(`{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-x1"}},
 {"name":"a","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-x2"}}]}`)
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendJSON(t, tbl, latest(t, tbl), `[{"id":1,"a":"x"}]`)
	snap := latest(t, tbl)
	wantRows(t, "rows", scanRows(t, snap, delta.ScanOptions{}), []string{`{"a":"x","id":1}`})
	for _, a := range snap.Files() {
		if got := fileColumns(t, store, tbl.Key(a.Path)); !slices.Equal(got, []string{"id#-1", "a#-1"}) {
			t.Fatalf("file columns %v, want id and a without field ids", got)
		}
		if strings.Contains(a.Stats, "col-x") {
			t.Fatalf("stats %s name columns physically", a.Stats)
		}
	}
}

var _ objectstore.Store = (*mem.Store)(nil)

// NonAdditiveChanges names the renames, drops and type changes between two versions (what
// Spark's table_changes cannot read across), and nothing for additions.
func TestNonAdditiveChanges(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, _ := delta.ParseSchema(structOf(fieldJSON("id", "long"), fieldJSON("a", "string"), fieldJSON("c", "string")))
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch, Properties: map[string]string{"delta.columnMapping.mode": "name"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendJSON(t, tbl, latest(t, tbl), `[{"id":1,"a":"x","c":"y"}]`)                                                                                             // v1
	evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("a", "string"), fieldJSON("c", "string"), fieldJSON("d", "integer")), delta.EvolutionOptions{}) // v2
	evolveTo(t, tbl, structOf(fieldJSON("id", "long"), fieldJSON("b", "string"), fieldJSON("c", "string"), fieldJSON("d", "long")),
		delta.EvolutionOptions{RenamedFrom: map[string]string{"b": "a"}}) // v3
	if _, err := tbl.DropColumns(ctx, latest(t, tbl), []string{"c"}, nil); err != nil { // v4
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to int64
		want     []string
	}{
		{0, 2, nil},
		{1, 4, []string{"3: renamed a to b", "3: widened d from integer to long", "4: dropped c"}},
		{3, 4, []string{"4: dropped c"}},
	} {
		versions, err := tbl.NonAdditiveChanges(ctx, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sv := range versions {
			for _, c := range sv.Changes {
				got = append(got, fmt.Sprintf("%d: %s", sv.Version, c))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%d..%d: %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

// A table turned to column mapping mode name reads files written before by physical name
// (their names), never by Parquet field ids they may carry from their writer, which
// number the columns otherwise: mode name resolves columns by physical name alone.
func TestColumnMappingNameIgnoresStrayFieldIDs(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, _ := delta.ParseSchema(structOf(fieldJSON("id", "long"), fieldJSON("a", "string"), fieldJSON("b", "string")))
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A file whose writer numbered a as 3 and b as 2 (as another engine may).
	other, _ := delta.ParseSchema(`{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"id"}},
 {"name":"a","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"a"}},
 {"name":"b","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"b"}}]}`)
	as, _ := delta.ArrowSchema(sch)
	rec := recordJSON(t, as, `[{"id":1,"a":"from a","b":"from b"}]`)
	defer rec.Release()
	adds, err := delta.WriteRecords(ctx, store, "t", other, nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fileColumns(t, store, tbl.Key(adds[0].Path)); !slices.Equal(got, []string{"id#1", "a#3", "b#2"}) {
		t.Fatalf("crafted file columns %v", got)
	}
	tx := tbl.NewTransaction(latest(t, tbl), delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.SetProperties(ctx, map[string]string{"delta.columnMapping.mode": "name"}, nil); err != nil {
		t.Fatal(err)
	}
	snap := latest(t, tbl)
	if id, _ := snap.Schema().Field("a").Metadata["delta.columnMapping.id"]; id == nil {
		t.Fatal("column mapping was not turned on")
	}
	wantRows(t, "rows", scanRows(t, snap, delta.ScanOptions{}), []string{`{"a":"from a","b":"from b","id":1}`})
}
