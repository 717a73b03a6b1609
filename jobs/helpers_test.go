package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
)

// testClock is a settable clock for commit timestamps.
type testClock struct{ t time.Time }

func (c *testClock) Now() time.Time { return c.t }

func (c *testClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestEnv(store objectstore.Store, clock *testClock, tables ...*Table) *Env {
	m := map[string]*Table{}
	for _, t := range tables {
		m[t.Name] = t
	}
	return &Env{
		Warehouse: store,
		Tables:    m,
		Lineage:   delta.Lineage{Pipeline: "test", Stage: "stage", RunID: "run-1", Attempt: 1},
		Delta:     delta.Options{Now: clock.Now, UserName: "tester"},
	}
}

// schemaOf builds a schema from "name type" pairs.
func schemaOf(t testing.TB, cols ...string) *delta.StructType {
	t.Helper()
	st := &delta.StructType{}
	for _, c := range cols {
		name, typ, _ := strings.Cut(c, " ")
		dt, err := delta.ParsePrimitive(typ)
		if err != nil {
			t.Fatal(err)
		}
		st.Fields = append(st.Fields, &delta.StructField{Name: name, Type: dt, Nullable: true, Metadata: map[string]any{}})
	}
	return st
}

// record builds one Arrow record of the schema from rows of Go values (nil is null;
// time.Time for timestamps; string, int, int64, float64, bool otherwise).
func record(t *testing.T, st *delta.StructType, rows ...[]any) arrow.RecordBatch {
	t.Helper()
	as, err := delta.ArrowSchema(st)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	for _, row := range rows {
		for i, v := range row {
			fb := b.Field(i)
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.StringBuilder:
				fb.Append(v.(string))
			case *array.Int64Builder:
				fb.Append(int64(toInt(v)))
			case *array.Int32Builder:
				fb.Append(int32(toInt(v)))
			case *array.Float64Builder:
				fb.Append(v.(float64))
			case *array.BooleanBuilder:
				fb.Append(v.(bool))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(v.(time.Time).UnixMicro()))
			default:
				t.Fatalf("record: unsupported builder %T", fb)
			}
		}
	}
	return b.NewRecordBatch()
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case int32:
		return int64(x)
	}
	panic(fmt.Sprintf("not an int: %T", v))
}

// latest opens a declared table and its latest snapshot.
func latest(t *testing.T, env *Env, decl *Table) (*delta.Table, *delta.Snapshot) {
	t.Helper()
	tbl, err := env.openTable(t.Context(), decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return tbl, snap
}

// appendRows commits rows to a declared table (creating it), as a plain append.
func appendRows(t *testing.T, env *Env, decl *Table, rows ...[]any) int64 {
	t.Helper()
	return writeRows(t, env, decl, false, rows...)
}

// writeRows appends or overwrites rows in a declared table and returns the version.
func writeRows(t *testing.T, env *Env, decl *Table, overwrite bool, rows ...[]any) int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := env.openOrCreate(ctx, decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, snap.Schema(), rows...)
	defer rec.Release()
	adds, err := delta.WriteRecords(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(), []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mode := "Append"
	if overwrite {
		mode = "Overwrite"
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE", OperationParameters: map[string]any{"mode": mode}})
	if overwrite {
		tx.ReadWholeTable()
		tx.RemoveAdds(snap.Files()...)
	}
	tx.AddFiles(adds...)
	v, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tableRows reads a declared table's latest rows, rendered one string per row
// ("a|b|NULL"), sorted, with the named columns (all when none).
func tableRows(t *testing.T, env *Env, decl *Table, cols ...string) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := env.openTable(ctx, decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		out = appendRendered(out, sc.RecordBatch())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// appendRendered appends the rows of rec to out, one string per row ("a|b|NULL").
func appendRendered(out []string, rec arrow.RecordBatch) []string {
	for r := range int(rec.NumRows()) {
		parts := make([]string, rec.NumCols())
		for c := range parts {
			col := rec.Column(c)
			if col.IsNull(r) {
				parts[c] = "NULL"
			} else {
				parts[c] = col.ValueStr(r)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	return out
}

// tableVersion is a declared table's latest version, -1 when it does not exist (a
// failed first run leaves none).
func tableVersion(t *testing.T, env *Env, decl *Table) int64 {
	t.Helper()
	if ok, err := delta.Exists(context.Background(), env.Warehouse, decl.Path); err != nil {
		t.Fatal(err)
	} else if !ok {
		return -1
	}
	tbl, err := env.openTable(context.Background(), decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version()
}

func diff(got, want []string) string {
	return fmt.Sprintf("got %d rows:\n  %s\nwant %d rows:\n  %s", len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
}

// crashAtEveryOperation is the exactly-once check of a stage: it runs the stage once on a
// fresh setup without failures and counts its store operations; then, for each operation
// n, it runs the stage on a fresh setup whose store fails from operation n on (the
// process "dies" there), heals the store and reruns the stage twice. What observe sees
// of the table setup returns (its rows, say) must then be exactly what the uninterrupted run
// left: no lost, doubled or extra rows. It returns that.
func crashAtEveryOperation(t *testing.T, stage Stage, setup func() (*faultstore.Store, *Env, *Table), observe func(*Env, *Table) []string) []string {
	t.Helper()
	fs, env, table := setup()
	fs.FailNth(0, false, false) // count only
	runStage(t, stage, env)
	ops := fs.Count()
	want := observe(env, table)
	for n := 1; n <= ops; n++ {
		fs, env, table := setup()
		fs.FailNth(n, true, false)
		_, err := stage.Run(context.Background(), env)
		switch {
		case err == nil && fs.Injected():
			t.Fatalf("crash at op %d: run reported success", n)
		case err != nil && !errors.Is(err, faultstore.ErrInjected):
			t.Fatalf("crash at op %d: %v, want the injected failure", n, err)
		}
		fs.Heal()
		runStage(t, stage, env)
		runStage(t, stage, env)
		if got := observe(env, table); !slices.Equal(got, want) {
			t.Fatalf("crash at op %d then reruns:\n%s", n, diff(got, want))
		}
	}
	return want
}

// rowsOf observes a table's rows (the named columns, all when none), for
// crashAtEveryOperation.
func rowsOf(t *testing.T, cols ...string) func(*Env, *Table) []string {
	return func(env *Env, table *Table) []string { return tableRows(t, env, table, cols...) }
}

// noted reports whether one of a run's notes says part.
func noted(res Result, part string) bool {
	return slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, part) })
}
