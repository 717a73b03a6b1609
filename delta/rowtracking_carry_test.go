package delta_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// rowTracking maps each live row's id column to its row id and row commit version, and
// checks that a plain scan shows the table's columns only.
func rowTracking(t *testing.T, tbl *delta.Table) map[int64]delta.RowTracking {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]delta.RowTracking{}
	err = snap.ScanRowTracking(ctx, func(rec arrow.RecordBatch, rt []delta.RowTracking) error {
		if int(rec.NumCols()) != len(snap.Schema().Fields) {
			return fmt.Errorf("record has %d columns, the table %d", rec.NumCols(), len(snap.Schema().Fields))
		}
		ids := rec.Column(snap.Schema().FieldIndex("id")).(*array.Int64)
		for i, r := range rt {
			out[ids.Value(i)] = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := delta.Scan(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(), snap.Files(), delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	for sc.Next() {
		if got := sc.RecordBatch().NumCols(); int(got) != len(snap.Schema().Fields) {
			t.Fatalf("a scan shows %d columns, the table has %d: the materialized columns leaked", got, len(snap.Schema().Fields))
		}
	}
	return out
}

// A DELETE or UPDATE on a row-tracking table keeps every surviving row's row id (the
// rows it copies into new files carry it in the materialized column), keeps the row
// commit version of the rows it did not change and gives the updated rows the commit's
// version; the commit says delta.rowTracking.preserved=true. With deletion vectors on
// and off; a second rewrite reads the ids back from the materialized columns.
func TestRowTrackingCarriedOnRewrites(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(fmt.Sprintf("dv=%v", dv), func(t *testing.T) {
			ctx := context.Background()
			tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true", delta.PropEnableDeletionVectors: fmt.Sprint(dv)})
			commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "p"}, {2, "b", "p"}, {3, "c", "p"}}, nil, nil) // v1
			commitChange(t, tbl, "WRITE", nil, []row{{4, "d", "p"}, {5, "e", "q"}}, nil, nil)                // v2
			want := rowTracking(t, tbl)
			ids := map[int64]bool{}
			for _, r := range want {
				ids[r.RowID] = true
			}
			if len(ids) != 5 {
				t.Fatalf("appended rows' row ids %v are not distinct", want)
			}
			check := func(step string, v int64) {
				t.Helper()
				if tags := commitInfoTags(t, tbl, v); tags["delta.rowTracking.preserved"] != "true" {
					t.Errorf("%s: commit tags %v; want delta.rowTracking.preserved=true", step, tags)
				}
				if got := rowTracking(t, tbl); !maps.Equal(got, want) {
					t.Errorf("%s: row ids and versions by id\ngot  %v\nwant %v", step, got, want)
				}
			}
			del := func(where string) int64 {
				p, _ := expr.Parse(where)
				res, err := tbl.Delete(ctx, delta.DeleteOptions{Where: p})
				if err != nil {
					t.Fatal(err)
				}
				return res.Version
			}
			upd := func(where string, set map[string]any) int64 {
				p, _ := expr.Parse(where)
				res, err := tbl.Update(ctx, delta.UpdateOptions{Where: p, Set: set})
				if err != nil {
					t.Fatal(err)
				}
				return res.Version
			}

			v := del("id = 2")
			delete(want, 2)
			check("DELETE id = 2", v)

			v = upd("id = 3", map[string]any{"name": "C"})
			want[3] = delta.RowTracking{RowID: want[3].RowID, RowCommitVersion: v}
			check("UPDATE id = 3", v)

			// The rows now in the UPDATE's file (with deletion vectors: row 3 alone)
			// carry materialized values; rewriting them again keeps them.
			v = upd("id = 1 OR id = 4", map[string]any{"name": "X"})
			want[1] = delta.RowTracking{RowID: want[1].RowID, RowCommitVersion: v}
			want[4] = delta.RowTracking{RowID: want[4].RowID, RowCommitVersion: v}
			check("UPDATE id = 1 OR id = 4", v)

			v = del("id = 4")
			delete(want, 4)
			check("DELETE id = 4", v)

			v = upd("name = 'C'", map[string]any{"part": "q"})
			want[3] = delta.RowTracking{RowID: want[3].RowID, RowCommitVersion: v}
			check("UPDATE moving row 3 to another partition", v)

			// New rows still get fresh ids past every one kept.
			commitChange(t, tbl, "WRITE", nil, []row{{6, "f", "p"}}, nil, nil)
			got := rowTracking(t, tbl)
			kept := slices.Collect(maps.Values(want))
			for _, r := range kept {
				if got[6].RowID <= r.RowID {
					t.Errorf("appended row's id %d not past kept row id %d", got[6].RowID, r.RowID)
				}
			}
		})
	}
}
