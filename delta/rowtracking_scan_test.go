package delta_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// ScanWithRowIDs gives each row the row id and row commit version ScanRowTracking
// gives it (Spark's _metadata fields), as two trailing columns after the ones asked
// for, with a filter on columns not shown, after a DELETE (a deletion vector when on)
// and an UPDATE; with and without column mapping. The materialized columns are never
// shown nor can be asked for; a table without row tracking is an error.
func TestScanWithRowIDs(t *testing.T) {
	for _, cm := range []string{"none", "name"} {
		for _, dv := range []bool{false, true} {
			t.Run(fmt.Sprintf("mapping=%s/dv=%v", cm, dv), func(t *testing.T) {
				ctx := context.Background()
				tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true", delta.PropEnableDeletionVectors: fmt.Sprint(dv), delta.PropColumnMappingMode: cm})
				commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "p"}, {2, "b", "p"}, {3, "c", "p"}, {4, "d", "p"}}, nil, nil)
				commitChange(t, tbl, "WRITE", nil, []row{{5, "e", "q"}, {6, "f", "q"}}, nil, nil)
				where, _ := expr.Parse("id = 2")
				if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: where}); err != nil {
					t.Fatal(err)
				}
				where, _ = expr.Parse("id = 5")
				if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: where, Set: map[string]any{"name": "E"}}); err != nil {
					t.Fatal(err)
				}
				want := rowTracking(t, tbl)
				snap, err := tbl.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				read := func(opts delta.ScanOptions) (map[int64]delta.RowTracking, []string) {
					t.Helper()
					rdr, err := snap.ScanWithRowIDs(ctx, opts)
					if err != nil {
						t.Fatal(err)
					}
					defer rdr.Release()
					var names []string
					for _, f := range rdr.Schema().Fields() {
						names = append(names, f.Name)
					}
					got := map[int64]delta.RowTracking{}
					for rdr.Next() {
						rec := rdr.RecordBatch()
						nc := int(rec.NumCols())
						ids := rec.Column(int(rec.Schema().FieldIndices("id")[0])).(*array.Int64)
						rid, ver := rec.Column(nc-2).(*array.Int64), rec.Column(nc-1).(*array.Int64)
						for i := 0; i < int(rec.NumRows()); i++ {
							got[ids.Value(i)] = delta.RowTracking{RowID: rid.Value(i), RowCommitVersion: ver.Value(i)}
						}
					}
					if err := rdr.Err(); err != nil {
						t.Fatal(err)
					}
					return got, names
				}
				got, names := read(delta.ScanOptions{BatchSize: 2})
				if !maps.Equal(got, want) {
					t.Errorf("all rows:\ngot  %v\nwant %v", got, want)
				}
				if fmt.Sprint(names) != "[id name part _metadata.row_id _metadata.row_commit_version]" {
					t.Errorf("columns %v", names)
				}
				p, _ := expr.Parse("name >= 'c' AND part = 'p'")
				got, names = read(delta.ScanOptions{Columns: []string{"id"}, Filter: p})
				if w := map[int64]delta.RowTracking{3: want[3], 4: want[4]}; !maps.Equal(got, w) {
					t.Errorf("filtered:\ngot  %v\nwant %v", got, w)
				}
				if fmt.Sprint(names) != "[id _metadata.row_id _metadata.row_commit_version]" {
					t.Errorf("columns %v", names)
				}
				mat := snap.Metadata().Configuration[delta.PropMaterializedRowIDColumn]
				if _, err := snap.ScanWithRowIDs(ctx, delta.ScanOptions{Columns: []string{mat}}); err == nil {
					t.Errorf("asking for the materialized column %s: no error", mat)
				}
			})
		}
	}
	plain, _, _ := newTestTable(t, nil)
	snap, err := plain.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.ScanWithRowIDs(context.Background(), delta.ScanOptions{}); err == nil {
		t.Error("a table without row tracking: no error")
	}
}
