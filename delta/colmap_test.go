package delta_test

import (
	"context"
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// cmSchema is a table with a nested struct and a partition column.
const cmSchema = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
 {"name":"part","type":"string","nullable":true,"metadata":{}}]}`

// jsonRows renders records as sorted JSON rows.
func jsonRows(t testing.TB, recs ...arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, rec := range recs {
		b, err := rec.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var rows []json.RawMessage
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, string(r))
		}
	}
	slices.Sort(out)
	return out
}

// scanRows reads a snapshot (with a filter, when given) as sorted JSON rows.
func scanRows(t testing.TB, snap *delta.Snapshot, opts delta.ScanOptions) []string {
	t.Helper()
	sc, err := snap.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var recs []arrow.RecordBatch
	for sc.Next() {
		rec := sc.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return jsonRows(t, recs...)
}

func appendJSON(t testing.TB, tbl *delta.Table, snap *delta.Snapshot, rows string) {
	t.Helper()
	as, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if _, err := tbl.Append(context.Background(), delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err != nil {
		t.Fatal(err)
	}
}

// fileColumns lists a data file's top-level column names and field ids.
func fileColumns(t testing.TB, store objectstore.Store, key string) []string {
	t.Helper()
	rc, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var buf strings.Builder
	if _, err := io.Copy(&buf, rc); err != nil {
		t.Fatal(err)
	}
	pr, err := file.NewParquetReader(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range sc.Fields() {
		id, _ := f.Metadata.GetValue("PARQUET:field_id")
		out = append(out, f.Name+"#"+id)
	}
	return out
}

// A table with column mapping (mode name) is written as Spark writes one: files name
// their columns (nested ones too) by physical name with Parquet field ids, partitionValues
// and stats name columns physically; it reads back by logical names, prunes by stats and
// partitions, takes a MERGE (spliced), a DELETE and a checkpoint, and its change feed
// reads exactly.
func TestColumnMappingWriteRead(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, err := delta.ParseSchema(cmSchema)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch, PartitionColumns: []string{"part"},
		Properties: map[string]string{"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := snap.Protocol(); p.MinReaderVersion < 2 || !slices.Contains(p.WriterFeatures, "columnMapping") {
		t.Fatalf("protocol %+v, want column mapping", p)
	}
	if got := snap.Metadata().Configuration["delta.columnMapping.maxColumnId"]; got != "6" {
		t.Fatalf("maxColumnId %q, want 6 (four columns and two nested fields)", got)
	}
	if sch.Fields[0].Metadata["delta.columnMapping.id"] != nil {
		t.Fatal("Create changed the caller's schema")
	}
	appendJSON(t, tbl, snap, `[{"id":1,"name":"a","st":{"a":1,"b":"x"},"part":"p1"},{"id":2,"name":"b","st":null,"part":"p2"},{"id":3,"name":null,"st":{"a":3,"b":null},"part":"p1"}]`)
	snap, err = tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	phys := map[string]string{}
	for _, f := range snap.Schema().Fields {
		p, _ := f.Metadata["delta.columnMapping.physicalName"].(string)
		if !strings.HasPrefix(p, "col-") {
			t.Fatalf("column %s has physical name %q", f.Name, p)
		}
		phys[f.Name] = p
	}
	for _, a := range snap.Files() {
		if _, ok := a.PartitionValues[phys["part"]]; !ok || len(a.PartitionValues) != 1 {
			t.Fatalf("partitionValues %v, want them under %s", a.PartitionValues, phys["part"])
		}
		if !strings.Contains(a.Stats, phys["id"]) || strings.Contains(a.Stats, `"id"`) {
			t.Fatalf("stats %s, want them under the physical names", a.Stats)
		}
		cols := fileColumns(t, store, tbl.Key(a.Path))
		if len(cols) != 3 || cols[0] != phys["id"]+"#1" || !strings.HasPrefix(cols[2], phys["st"]+"#") {
			t.Fatalf("file columns %v, want the physical names with field ids", cols)
		}
	}
	want := []string{
		`{"id":1,"name":"a","part":"p1","st":{"a":1,"b":"x"}}`,
		`{"id":2,"name":"b","part":"p2","st":null}`,
		`{"id":3,"name":null,"part":"p1","st":{"a":3,"b":null}}`,
	}
	if got := scanRows(t, snap, delta.ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := scanRows(t, snap, delta.ScanOptions{Filter: expr.And(expr.Eq("part", "p1"), expr.Ge("id", 3))}); !slices.Equal(got, want[2:]) {
		t.Fatalf("filtered rows %v, want %v", got, want[2:])
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Filter: expr.Gt("id", 5)})
	if err != nil {
		t.Fatal(err)
	}
	for sc.Next() {
	}
	if st := sc.Stats(); st.FilesPruned != st.FilesTotal {
		t.Fatalf("id > 5 pruned %d of %d files by their stats", st.FilesPruned, st.FilesTotal)
	}
	sc.Release()

	// A MERGE that changes one column (the file is spliced) and a DELETE.
	src := recordJSON(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil),
		`[{"id":1,"name":"A"}]`)
	defer src.Release()
	if _, err := tbl.Merge(ctx, delta.MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"},
		WhenMatched: []delta.MergeClause{{Action: delta.MergeUpdate, Set: map[string]any{"name": expr.Col("source.name")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", 2)}); err != nil {
		t.Fatal(err)
	}
	snap, err = tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Checkpoint(ctx, snap); err != nil {
		t.Fatal(err)
	}
	reopened, err := delta.Open(ctx, store, "t", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err = reopened.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	want = []string{`{"id":1,"name":"A","part":"p1","st":{"a":1,"b":"x"}}`, `{"id":3,"name":null,"part":"p1","st":{"a":3,"b":null}}`}
	if got := scanRows(t, snap, delta.ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("after MERGE and DELETE:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	from := int64(1)
	rd, err := reopened.Changes(ctx, delta.ChangesOptions{StartVersion: &from, Columns: []string{"id", "name", "part"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var changes []arrow.RecordBatch
	for rd.Next() {
		rec := rd.RecordBatch()
		rec.Retain()
		changes = append(changes, rec)
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	got := jsonRows(t, changes...)
	for i := range got {
		got[i] = commitTimestamp.ReplaceAllString(got[i], "")
	}
	for _, r := range changes {
		r.Release()
	}
	for _, w := range []string{`"_change_type":"update_preimage","_commit_version":2,"id":1,"name":"a","part":"p1"`,
		`"_change_type":"update_postimage","_commit_version":2,"id":1,"name":"A","part":"p1"`,
		`"_change_type":"delete","_commit_version":3,"id":2,"name":"b","part":"p2"`} {
		if !slices.ContainsFunc(got, func(r string) bool { return strings.Contains(r, w) }) {
			t.Fatalf("change feed %v lacks %s", got, w)
		}
	}
}

var commitTimestamp = regexp.MustCompile(`"_commit_timestamp":"[^"]*",`)

func recordJSON(t testing.TB, sc *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// Schema evolution without rewriting a file: a column added (older files read NULL), a
// type widened (older files read widened; their stats never skip), a column renamed and
// one dropped (column mapping), then a new column of a dropped one's name (another
// column: it reads NULL, never the dropped data); each version reads in its own schema.
func TestEvolveSchema(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, err := delta.ParseSchema(`{"type":"struct","fields":[
 {"name":"id","type":"integer","nullable":false,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},
 {"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch,
		Properties: map[string]string{"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	appendJSON(t, tbl, snap, `[{"id":1,"name":"a","amount":"1.50","st":{"a":7}},{"id":2,"name":"b","amount":null,"st":null}]`)
	evolve := func(decl string, opts delta.EvolutionOptions, wantSteps ...string) int64 {
		t.Helper()
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
		var got []string
		for _, s := range ev.Steps {
			got = append(got, s.String())
		}
		if !slices.Equal(got, wantSteps) {
			t.Fatalf("steps %q, want %q", got, wantSteps)
		}
		v, err := tbl.Evolve(ctx, ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	field := func(name, typ string, nullable bool) string {
		return `{"name":"` + name + `","type":` + typ + `,"nullable":` + map[bool]string{true: "true", false: "false"}[nullable] + `,"metadata":{}}`
	}
	st2 := `{"type":"struct","fields":[` + field("a", `"integer"`, true) + `,` + field("b", `"string"`, true) + `]}`
	v1 := evolve(`{"type":"struct","fields":[`+field("id", `"long"`, true)+`,`+field("name", `"string"`, true)+`,`+field("amount", `"decimal(14,2)"`, true)+`,`+field("st", st2, true)+`,`+field("channel", `"string"`, true)+`]}`,
		delta.EvolutionOptions{},
		"CHANGE COLUMN id (nullable)", "CHANGE COLUMN id (integer to long)", "CHANGE COLUMN amount (decimal(10,2) to decimal(14,2))",
		"ADD COLUMNS st.b (string)", "ADD COLUMNS channel (string)")
	snap, _ = tbl.Snapshot(ctx)
	if !slices.Contains(snap.Protocol().ReaderFeatures, "typeWidening") {
		t.Fatalf("protocol %+v lacks typeWidening", snap.Protocol())
	}
	appendJSON(t, tbl, snap, `[{"id":3000000000,"name":"c","amount":"12345.67","st":{"a":1,"b":"x"},"channel":"web"}]`)
	snap, _ = tbl.Snapshot(ctx)
	want := []string{
		`{"amount":"1.5","channel":null,"id":1,"name":"a","st":{"a":7,"b":null}}`,
		`{"amount":"12345.67","channel":"web","id":3000000000,"name":"c","st":{"a":1,"b":"x"}}`,
		`{"amount":null,"channel":null,"id":2,"name":"b","st":null}`,
	}
	if got := scanRows(t, snap, delta.ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("after adding and widening:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := scanRows(t, snap, delta.ScanOptions{Filter: expr.Gt("id", int64(2000000000))}); !slices.Equal(got, want[1:2]) {
		t.Fatalf("id > 2e9: %v", got)
	}
	// Rename name → full_name, then drop channel and add a new channel: the new one is
	// another column.
	v2 := evolve(`{"type":"struct","fields":[`+field("id", `"long"`, true)+`,`+field("full_name", `"string"`, true)+`,`+field("amount", `"decimal(14,2)"`, true)+`,`+field("st", st2, true)+`,`+field("channel", `"string"`, true)+`]}`,
		delta.EvolutionOptions{RenamedFrom: map[string]string{"full_name": "name"}}, "RENAME COLUMN full_name (from name)")
	snap, _ = tbl.Snapshot(ctx)
	if _, err := tbl.DropColumns(ctx, snap, []string{"channel"}, nil); err != nil {
		t.Fatal(err)
	}
	evolve(`{"type":"struct","fields":[`+field("id", `"long"`, true)+`,`+field("full_name", `"string"`, true)+`,`+field("amount", `"decimal(14,2)"`, true)+`,`+field("st", st2, true)+`,`+field("channel", `"string"`, true)+`]}`,
		delta.EvolutionOptions{}, "ADD COLUMNS channel (string)")
	snap, _ = tbl.Snapshot(ctx)
	want = []string{
		`{"amount":"1.5","channel":null,"full_name":"a","id":1,"st":{"a":7,"b":null}}`,
		`{"amount":"12345.67","channel":null,"full_name":"c","id":3000000000,"st":{"a":1,"b":"x"}}`,
		`{"amount":null,"channel":null,"full_name":"b","id":2,"st":null}`,
	}
	if got := scanRows(t, snap, delta.ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("after rename, drop and add:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each version in its own schema.
	for v, w := range map[int64]string{
		1:      `{"amount":"1.5","id":1,"name":"a","st":{"a":7}}`,
		v1 + 1: `{"amount":"1.5","channel":null,"id":1,"name":"a","st":{"a":7,"b":null}}`,
		v2:     `{"amount":"1.5","channel":null,"full_name":"a","id":1,"st":{"a":7,"b":null}}`,
	} {
		old, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if got := scanRows(t, old, delta.ScanOptions{Filter: expr.Eq("id", 1)}); len(got) != 1 || got[0] != w {
			t.Fatalf("version %d: %v, want %s", v, got, w)
		}
	}
	// What is not safe is refused, naming the column.
	d, _ := delta.ParseSchema(`{"type":"struct","fields":[` + field("id", `"integer"`, true) + `,` + field("full_name", `"string"`, false) + `,` + field("amount", `"decimal(14,2)"`, true) + `,` + field("st", st2, true) + `]}`)
	_, problems := delta.PlanEvolution(snap, d, delta.EvolutionOptions{})
	var got []string
	for _, p := range problems {
		got = append(got, p.Column+": "+p.What)
	}
	wantProblems := []string{
		"full_name: nullable in the table, NOT NULL declared (its rows may hold NULLs)",
		"id: long in the table, integer declared: not a widening Delta makes without rewriting the table",
		"channel: is in the table but not declared",
	}
	slices.Sort(got)
	slices.Sort(wantProblems)
	if !slices.Equal(got, wantProblems) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantProblems, "\n"))
	}
}

// A column renamed twice reads its values at every version, under the name it had then,
// never as NULL; a file that names a mapped column by its logical name (written without
// column mapping) is refused rather than read as NULLs.
func TestRenamedTwiceNeverNull(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Config{})
	sch, _ := delta.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"a","type":"string","nullable":true,"metadata":{}}]}`)
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: sch, Properties: map[string]string{"delta.columnMapping.mode": "name"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	appendJSON(t, tbl, snap, `[{"id":1,"a":"x"}]`)
	names := []string{"a", "b", "c"}
	for i := 1; i < len(names); i++ {
		snap, _ = tbl.Snapshot(ctx)
		d, _ := delta.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"` + names[i] + `","type":"string","nullable":true,"metadata":{}}]}`)
		ev, problems := delta.PlanEvolution(snap, d, delta.EvolutionOptions{RenamedFrom: map[string]string{names[i]: names[i-1]}})
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		if _, err := tbl.Evolve(ctx, ev, nil); err != nil {
			t.Fatal(err)
		}
		snap, _ = tbl.Snapshot(ctx)
		appendJSON(t, tbl, snap, `[{"id":`+string(rune('1'+i))+`,"`+names[i]+`":"y"}]`)
	}
	latest, _ := tbl.Snapshot(ctx)
	for v := int64(1); v <= latest.Version(); v++ {
		snap, err := tbl.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		name := snap.Schema().Fields[1].Name
		for _, r := range scanRows(t, snap, delta.ScanOptions{}) {
			if strings.Contains(r, `"`+name+`":null`) {
				t.Fatalf("version %d reads %s as NULL: %s", v, name, r)
			}
		}
	}
	if got := scanRows(t, latest, delta.ScanOptions{}); len(got) != 3 || !strings.Contains(got[0], `"c":"x"`) {
		t.Fatalf("latest rows %v", got)
	}
	// A file written without column mapping (its column named "c", not physically).
	as, _ := delta.ArrowSchema(latest.Schema())
	rec := recordJSON(t, as, `[{"id":9,"c":"z"}]`)
	defer rec.Release()
	plain := &delta.StructType{Fields: []*delta.StructField{{Name: "id", Type: &delta.PrimitiveType{Name: "long"}, Nullable: true}, {Name: "c", Type: &delta.PrimitiveType{Name: "string"}, Nullable: true}}}
	adds, err := delta.WriteRecords(ctx, store, "t", plain, nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(latest, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for sc.Next() {
	}
	if err := sc.Err(); err == nil || !strings.Contains(err.Error(), "written without column mapping") {
		t.Fatalf("a file without column mapping: %v, want it refused", err)
	}
	sc.Release()
}
