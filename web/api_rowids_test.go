package web

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// The rows API with row_ids=1 adds each row's row id and row commit version as the
// columns _metadata.row_id and _metadata.row_commit_version (kept through a DELETE),
// orders by them, and hides an order column not asked for; without row_ids, or on a
// table without row tracking, it shows (or refuses) as before.
func TestAPIRowIDs(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.run("shop") // raw.customers: a table without row tracking
	ctx := context.Background()
	// raw.signals (declared by the slow pipeline, never run here) made with row tracking.
	store, err := fs.New(fs.Config{Dir: filepath.Join(e.dir, "warehouse", "raw", "signals")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	str := &delta.PrimitiveType{Name: delta.TypeString}
	schema := &delta.StructType{Fields: []*delta.StructField{{Name: "id", Type: str, Nullable: true},
		{Name: "source_file", Type: str, Nullable: true}, {Name: "load_timestamp", Type: &delta.PrimitiveType{Name: delta.TypeTimestamp}, Nullable: true}}}
	tbl, err := delta.Create(ctx, store, "", delta.CreateOptions{Schema: schema, Name: "raw.signals",
		Properties: map[string]string{delta.PropEnableRowTracking: "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	as, err := delta.ArrowSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(`[{"id": "a", "source_file": "z"}, {"id": "b", "source_file": "y"}, {"id": "c", "source_file": "x"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	adds, err := delta.WriteRecords(ctx, store, "", schema, nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	where, _ := expr.Parse("id = 'b'")
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: where}); err != nil {
		t.Fatal(err)
	}

	text := func(res rowsResult) string {
		var b strings.Builder
		for _, c := range res.Columns {
			b.WriteString(c.Name + " ")
		}
		for _, r := range res.Rows {
			b.WriteString("|")
			for _, c := range r {
				b.WriteString(" " + c.Text)
			}
		}
		return b.String()
	}
	for q, want := range map[string]string{
		"row_ids=1&columns=id":                                          "id _metadata.row_id _metadata.row_commit_version | a 0 1| c 2 1",
		"row_ids=1&columns=id&order_by=source_file":                     "id _metadata.row_id _metadata.row_commit_version | c 2 1| a 0 1",
		"row_ids=1&columns=id&order_by=_metadata.row_id&desc=1&limit=1": "id _metadata.row_id _metadata.row_commit_version | c 2 1",
		"columns=id&order_by=source_file":                               "id | c| a",
	} {
		var res rowsResult
		e.getJSON("/api/v1/tables/raw.signals/rows?"+q, &res)
		if got := text(res); got != want {
			t.Errorf("rows?%s: %q, want %q", q, got, want)
		}
	}
	for _, bad := range []string{"/api/v1/tables/raw.customers/rows?row_ids=1", "/api/v1/tables/raw.signals/rows?order_by=_metadata.row_id"} {
		if resp, body := e.do(req{path: bad}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", bad, resp.StatusCode, body)
		}
	}
}
