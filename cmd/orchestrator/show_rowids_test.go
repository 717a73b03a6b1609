package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// makeRowTrackingTable writes a row-tracking table (column mapping by name too):
// v1 appends a, b, c (row ids 0-2), v2 appends d (3), v3 deletes b and v4 updates c,
// which keep the ids of the rows they copy; it returns the table's directory.
func makeRowTrackingTable(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tracked")
	store, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	schema := &delta.StructType{Fields: []*delta.StructField{
		{Name: "k", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: false},
		{Name: "n", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: true},
	}}
	tbl, err := delta.Create(ctx, store, "", delta.CreateOptions{Schema: schema, Name: "tracked",
		Properties: map[string]string{delta.PropEnableRowTracking: "true", delta.PropColumnMappingMode: "name"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range []string{`[{"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "c", "n": 3}]`, `[{"k": "d", "n": 4}]`} {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		as, err := delta.ArrowSchema(snap.Schema())
		if err != nil {
			t.Fatal(err)
		}
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(rows))
		if err != nil {
			t.Fatal(err)
		}
		w, err := snap.NewDataWriter(delta.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		adds, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
		tx.AddFiles(adds...)
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	where, _ := expr.Parse("k = 'b'")
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: where}); err != nil {
		t.Fatal(err)
	}
	where, _ = expr.Parse("k = 'c'")
	if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: where, Set: map[string]any{"n": int64(30)}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// table show --row-ids adds each row's stable row id and row commit version as Spark
// names them: kept through the DELETE and UPDATE, the updated row at the UPDATE's
// version; with --columns, --where and --order-by (also by the row id); the
// materialized columns are never shown. A table without row tracking is an error.
func TestShowRowIDs(t *testing.T) {
	dir := makeRowTrackingTable(t)
	check := func(want string, args ...string) {
		t.Helper()
		r := runCLI(t, append([]string{"table", "show", dir, "--format", "csv"}, args...)...)
		if r.code != 0 || r.stdout != want {
			t.Errorf("table show %v: exit %d, stderr %q\ngot\n%s\nwant\n%s", args, r.code, r.stderr, r.stdout, want)
		}
	}
	check("k,n,_metadata.row_id,_metadata.row_commit_version\na,1,0,1\nc,30,2,4\nd,4,3,2\n", "--row-ids", "--order-by", "k")
	check("k,_metadata.row_id,_metadata.row_commit_version\nd,3,2\nc,2,4\n", "--row-ids", "--columns", "k", "--where", "n > 2", "--order-by", "_metadata.row_id", "--desc")
	check("k,_metadata.row_id,_metadata.row_commit_version\na,0,1\n", "--row-ids", "--columns", "k", "--order-by", "n", "--limit", "1")
	check("k,n,_metadata.row_id,_metadata.row_commit_version\na,1,0,1\nb,2,1,1\nc,3,2,1\n", "--row-ids", "--version", "1", "--order-by", "k")
	check("k,n\na,1\nc,30\nd,4\n", "--order-by", "k")
	if r := runCLI(t, "table", "show", makeOrdersTable(t), "--row-ids"); r.code != 1 || !strings.Contains(r.stderr, "does not track row ids") {
		t.Errorf("--row-ids on a table without row tracking: exit %d, stderr %q", r.code, r.stderr)
	}
}
