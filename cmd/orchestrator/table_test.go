package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// fixtureTimes are the commit times of the fixture table's versions 0..3.
var fixtureTimes = []time.Time{
	time.Date(2026, 1, 14, 10, 0, 0, 0, time.UTC),
	time.Date(2026, 1, 14, 11, 0, 0, 0, time.UTC),
	time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC),
	time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC),
}

// makeOrdersTable writes a small Delta table with the delta package, as a pipeline would,
// and returns its directory:
//
//	v0 CREATE TABLE (change data feed on)
//	v1 WRITE append, 3 rows, by pipeline orders / stage ingest / run run-1
//	v2 WRITE overwrite, 4 rows: one amount corrected, one row of nulls added
//	v3 SET TBLPROPERTIES delta.logRetentionDuration
//
// Each version holds one data file, so scans return rows in a fixed order. Commit
// timestamps are pinned (fixtureTimes), also in the commit files' modification times,
// from which history and time travel read them.
func makeOrdersTable(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orders")
	store, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	writeOrdersTable(t, store, "")
	for v, ts := range fixtureTimes {
		name := filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", v))
		if err := os.Chtimes(name, ts, ts); err != nil {
			t.Fatal(err)
		}
	}
	// Data files get the time of the commit that added them (vacuum ages them by it).
	files, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Chtimes(f, fixtureTimes[1], fixtureTimes[1]); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeOrdersTable writes the versions of the fixture table at root in store.
func writeOrdersTable(t *testing.T, store objectstore.Store, root string) {
	t.Helper()
	ctx := context.Background()
	commit := 0
	opts := delta.Options{
		Now:        func() time.Time { return fixtureTimes[commit] },
		UserName:   "tester",
		EngineInfo: "orchestrator/test",
	}
	str := func(name string, nullable bool) *delta.StructField {
		return &delta.StructField{Name: name, Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: nullable}
	}
	schema := &delta.StructType{Fields: []*delta.StructField{
		str("order_id", false),
		str("customer", true),
		{Name: "quantity", Type: &delta.PrimitiveType{Name: delta.TypeInteger}, Nullable: true},
		{Name: "amount", Type: &delta.DecimalType{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "ordered_at", Type: &delta.PrimitiveType{Name: delta.TypeTimestamp}, Nullable: true},
	}}
	tbl, err := delta.Create(ctx, store, root, delta.CreateOptions{
		Schema:     schema,
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
		Name:       "bronze.orders",
	}, opts)
	if err != nil {
		t.Fatal(err)
	}

	write := func(mode string, replace bool, rowsJSON string, lineage *delta.Lineage) {
		t.Helper()
		commit++
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		arrowSchema, err := delta.ArrowSchema(snap.Schema())
		if err != nil {
			t.Fatal(err)
		}
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, arrowSchema, strings.NewReader(rowsJSON))
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		w, err := snap.NewDataWriter(delta.WriteOptions{Now: opts.Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		adds, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{
			Operation:           "WRITE",
			OperationParameters: map[string]any{"mode": mode, "partitionBy": "[]"},
			OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": rec.NumRows()},
			Lineage:             lineage,
		})
		if replace {
			tx.RemoveAdds(snap.Files()...)
		}
		tx.AddFiles(adds...)
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write("Append", false, `[
		{"order_id": "o-1", "customer": "c-1", "quantity": 2, "amount": "19.90", "ordered_at": "2026-01-14T09:15:00Z"},
		{"order_id": "o-2", "customer": "c-2", "quantity": 1, "amount": "5.00", "ordered_at": "2026-01-14T09:20:30.5Z"},
		{"order_id": "o-3", "customer": "c-1", "quantity": 10, "amount": "1200.10", "ordered_at": "2026-01-14T09:45:00Z"}
	]`, &delta.Lineage{Pipeline: "orders", Stage: "ingest", RunID: "run-1", Attempt: 1, SourceFiles: []string{"landing/2026-01-14.csv"}})
	write("Overwrite", true, `[
		{"order_id": "o-1", "customer": "c-1", "quantity": 2, "amount": "19.90", "ordered_at": "2026-01-14T09:15:00Z"},
		{"order_id": "o-2", "customer": "c-2", "quantity": 1, "amount": "4.50", "ordered_at": "2026-01-14T09:20:30.5Z"},
		{"order_id": "o-3", "customer": "c-1", "quantity": 10, "amount": "1200.10", "ordered_at": "2026-01-14T09:45:00Z"},
		{"order_id": "o-4", "customer": null, "quantity": null, "amount": null, "ordered_at": null}
	]`, &delta.Lineage{Pipeline: "orders", Stage: "ingest", RunID: "run-2", Attempt: 2})
	commit++
	if _, err := tbl.SetProperties(ctx, map[string]string{"delta.logRetentionDuration": "interval 90 days"}, nil); err != nil {
		t.Fatal(err)
	}
}

// scrubDir replaces a temporary directory in a transcript with a fixed name.
func scrubDir(dir, name string) func(string) string {
	return func(s string) string { return strings.ReplaceAll(s, dir, name) }
}

func TestTableCommands(t *testing.T) {
	dir := makeOrdersTable(t)
	emptyDir := filepath.Join(filepath.Dir(dir), "empty")
	if err := os.Mkdir(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []cliCase{
		{"history", []string{"table", "history", dir}, 0},
		{"history_limit_csv", []string{"table", "history", dir, "--limit", "2", "--format", "csv"}, 0},
		{"history_json", []string{"table", "history", "--format=json", dir}, 0},
		{"show", []string{"table", "show", dir}, 0},
		{"show_csv", []string{"table", "show", dir, "--format", "csv"}, 0},
		{"show_json", []string{"table", "show", dir, "--format", "json"}, 0},
		{"show_version", []string{"table", "show", dir, "--version", "1", "--columns", "order_id,amount"}, 0},
		{"show_timestamp", []string{"table", "show", dir, "--timestamp", "2026-01-14T11:30:00Z", "--limit", "2"}, 0},
		{"show_where", []string{"table", "show", dir, "--where", "customer = 'c-1' AND amount > 100", "--format", "csv"}, 0},
		{"show_where_null", []string{"table", "show", dir, "--where", "customer IS NULL OR ordered_at < TIMESTAMP '2026-01-14 09:16:00'", "--columns", "order_id"}, 0},
		{"show_where_unknown_column", []string{"table", "show", dir, "--where", "colour = 'red'"}, 1},
		{"usage_show_where_syntax", []string{"table", "show", dir, "--where", "amount >"}, 2},
		{"show_version_missing", []string{"table", "show", dir, "--version", "9"}, 1},
		{"show_unknown_column", []string{"table", "show", dir, "--columns", "nope"}, 1},
		{"properties", []string{"table", "properties", dir}, 0},
		{"changes", []string{"table", "changes", dir, "--from", "1"}, 0},
		{"changes_range_json", []string{"table", "changes", dir, "--from", "2", "--to", "2", "--types", "delete", "--columns", "order_id,amount", "--format", "json"}, 0},
		{"changes_timestamps_csv", []string{"table", "changes", dir, "--from", "2026-01-14T10:30:00Z", "--to", "2026-01-15", "--format", "csv"}, 0},
		{"changes_after_latest", []string{"table", "changes", dir, "--from", "7"}, 1},
		{"usage_changes_no_from", []string{"table", "changes", dir}, 2},
		{"usage_changes_bad_type", []string{"table", "changes", dir, "--from", "0", "--types", "upsert"}, 2},
		{"usage_table_version_and_timestamp", []string{"table", "show", dir, "--version", "1", "--timestamp", "2026-01-14"}, 2},
		{"usage_table_bad_format", []string{"table", "history", dir, "--format", "xml"}, 2},
		{"usage_table_bad_timestamp", []string{"table", "show", dir, "--timestamp", "yesterday"}, 2},
		{"usage_table_missing", []string{"table", "history"}, 2},
		{"usage_table_name_without_pipeline", []string{"table", "history", "bronze.orders"}, 2},
		{"table_not_found", []string{"table", "history", filepath.Join(dir, "nope")}, 1},
		{"table_not_delta", []string{"table", "history", emptyDir}, 1},
	}
	runCases(t, cases, scrubDir(filepath.Dir(dir), "$TMP"))
}

func TestTableProperties(t *testing.T) {
	dir := makeOrdersTable(t)
	runCases(t, []cliCase{
		{"properties_set", []string{"table", "properties", dir, "--set", "delta.appendOnly=false", "--set", "owner=sales team", "--unset", "delta.logRetentionDuration"}, 0},
		{"properties_unset_only", []string{"table", "properties", dir, "--unset", "owner", "--format", "json"}, 0},
		{"usage_properties_bad_set", []string{"table", "properties", dir, "--set", "novalue"}, 2},
	}, scrubDir(filepath.Dir(dir), "$TMP"))
	r := runCLI(t, "table", "history", dir, "--limit", "2", "--format", "csv")
	if !strings.Contains(r.stdout, "\n5,") || !strings.Contains(r.stdout, "UNSET TBLPROPERTIES") || !strings.Contains(r.stdout, "\n4,") || !strings.Contains(r.stdout, "SET TBLPROPERTIES") {
		t.Errorf("history after two property changes:\n%s\nwant versions 4 (SET TBLPROPERTIES) and 5 (UNSET TBLPROPERTIES)", r.stdout)
	}
}

// inWarehouse moves the fixture table to bronze/orders under its temporary directory,
// which becomes the warehouse of a copy of testdata/pipelines/<file>; it returns the
// copy's path and the warehouse.
func inWarehouse(t *testing.T, dir, file string) (pipeline, warehouse string) {
	t.Helper()
	warehouse = filepath.Dir(dir)
	if err := os.MkdirAll(filepath.Join(warehouse, "bronze"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, filepath.Join(warehouse, "bronze", "orders")); err != nil {
		t.Fatal(err)
	}
	pipeline = filepath.Join(warehouse, file)
	src, err := os.ReadFile(filepath.Join("testdata", "pipelines", file))
	if err != nil {
		t.Fatal(err)
	}
	src = []byte(strings.Replace(string(src), "/tmp/orchestrator-cli-test-warehouse", warehouse, 1))
	if err := os.WriteFile(pipeline, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return pipeline, warehouse
}

// TestTableFromPipeline resolves a declared table name through a pipeline's warehouse.
func TestTableFromPipeline(t *testing.T) {
	pipeline, warehouse := inWarehouse(t, makeOrdersTable(t), "valid.yaml")
	runCases(t, []cliCase{
		{"pipeline_show", []string{"table", "show", "bronze.orders", "--pipeline", pipeline, "--columns", "order_id,quantity", "--version", "2"}, 0},
		{"pipeline_undeclared", []string{"table", "history", "bronze.nothing", "--pipeline", pipeline}, 2},
	}, scrubDir(warehouse, "$TMP"))
}
