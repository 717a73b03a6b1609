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
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
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
	for _, cm := range []string{"none", "name", "id"} {
		for _, dv := range []bool{false, true} {
			t.Run(fmt.Sprintf("mapping=%s/dv=%v", cm, dv), func(t *testing.T) {
				ctx := context.Background()
				tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true", delta.PropEnableDeletionVectors: fmt.Sprint(dv), delta.PropColumnMappingMode: cm})
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
}

// withRows gives each file of pos the target rows it names (FileMatches.Rows), as the
// keyed stages give them.
func withRows(t *testing.T, snap *delta.Snapshot, pos *delta.MergePositions) {
	t.Helper()
	ctx := context.Background()
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	for sc.Next() {
		file, first, _ := sc.Position()
		fm := pos.Files[file.Path]
		if fm == nil {
			continue
		}
		var idx []int32
		for _, r := range fm.Target {
			if r >= first && r < first+sc.RecordBatch().NumRows() {
				idx = append(idx, int32(r-first))
			}
		}
		if len(idx) > 0 {
			rows, err := arrowx.GatherRows(ctx, sc.RecordBatch(), idx)
			if err != nil {
				t.Fatal(err)
			}
			fm.Rows = append(fm.Rows, rows)
		}
	}
}

// A MERGE on a row-tracking table, by key or in parts from given matches (as the keyed
// stages merge), keeps the row ids of the target rows it copies or updates, keeps the
// commit version of those it copies, gives the updated ones the commit's version and
// the inserted ones fresh ids; with deletion vectors on and off.
func TestRowTrackingCarriedOnMerge(t *testing.T) {
	for _, cm := range []string{"none", "name", "id"} {
		for _, mode := range []string{"merge", "parts"} {
			for _, dv := range []bool{false, true} {
				t.Run(fmt.Sprintf("mapping=%s/%s/dv=%v", cm, mode, dv), func(t *testing.T) {
					ctx := context.Background()
					tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true", delta.PropEnableDeletionVectors: fmt.Sprint(dv), delta.PropColumnMappingMode: cm})
					commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "p"}, {2, "b", "p"}, {3, "c", "p"}}, nil, nil)
					commitChange(t, tbl, "WRITE", nil, []row{{4, "d", "q"}, {5, "e", "q"}}, nil, nil)
					want := rowTracking(t, tbl)
					merge := func(rows []row, ops []string) int64 {
						t.Helper()
						src := sourceRecord(rows, ops)
						defer src.Release()
						if mode == "merge" {
							res, err := tbl.Merge(ctx, upsertOptions(src))
							if err != nil {
								t.Fatal(err)
							}
							return res.Version
						}
						snap, err := tbl.Snapshot(ctx)
						if err != nil {
							t.Fatal(err)
						}
						pos := positionsOf(t, snap, src)
						withRows(t, snap, pos)
						opts := upsertOptions(nil)
						opts.Source = nil
						opts.Tx = tbl.NewTransaction(snap, delta.TxOptions{})
						mp, err := tbl.NewMergeInParts(opts)
						if err != nil {
							t.Fatal(err)
						}
						if err := mp.Merge(ctx, []arrow.RecordBatch{src}, pos); err != nil {
							t.Fatal(err)
						}
						res, err := mp.Commit(ctx)
						if err != nil {
							t.Fatal(err)
						}
						return res.Version
					}
					check := func(step string, v int64, inserted ...int64) {
						t.Helper()
						if tags := commitInfoTags(t, tbl, v); tags["delta.rowTracking.preserved"] != "true" {
							t.Errorf("%s: commit tags %v; want delta.rowTracking.preserved=true", step, tags)
						}
						got := rowTracking(t, tbl)
						for _, id := range inserted {
							r, ok := got[id]
							for k, w := range want {
								if w.RowID == r.RowID {
									t.Errorf("%s: inserted row %d has row id %d, as row %d", step, id, r.RowID, k)
								}
							}
							if !ok || r.RowCommitVersion != v {
								t.Errorf("%s: inserted row %d: %+v, want a fresh id @%d", step, id, r, v)
							}
							want[id] = r
						}
						if !maps.Equal(got, want) {
							t.Errorf("%s: row ids and versions by id\ngot  %v\nwant %v", step, got, want)
						}
					}

					v := merge([]row{{2, "B", "p"}, {4, "", "q"}, {6, "f", "p"}}, []string{"U", "D", "I"})
					want[2] = delta.RowTracking{RowID: want[2].RowID, RowCommitVersion: v}
					delete(want, 4)
					check("update 2, delete 4, insert 6", v, 6)

					v = merge([]row{{1, "A", "p"}, {6, "F", "p"}, {7, "g", "q"}}, []string{"U", "U", "I"})
					want[1] = delta.RowTracking{RowID: want[1].RowID, RowCommitVersion: v}
					want[6] = delta.RowTracking{RowID: want[6].RowID, RowCommitVersion: v}
					check("update 1 and 6, insert 7", v, 7)

					// Row 2 now has its id in a materialized column, in a file that (with
					// deletion vectors) lost row 6 to the last MERGE; row 3 has none, in a
					// file whose vector deletes rows before it (its id is its physical place).
					v = merge([]row{{2, "BB", "p"}, {3, "C", "p"}, {7, "G", "q"}}, []string{"U", "U", "U"})
					for _, k := range []int64{2, 3, 7} {
						want[k] = delta.RowTracking{RowID: want[k].RowID, RowCommitVersion: v}
					}
					check("update 2, 3 and 7", v)
				})
			}
		}
	}
}

// A rewrite that does not carry the row ids (a transaction that removes a file and
// writes its rows anew itself, as the scd2 stage's event log merges its files) gives the
// rows it copies fresh ids and says delta.rowTracking.preserved=false; with and without
// column mapping.
func TestRowTrackingNotCarriedSaysSo(t *testing.T) {
	for _, cm := range []string{"none", "name"} {
		t.Run("mapping="+cm, func(t *testing.T) {
			ctx := context.Background()
			tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true", delta.PropColumnMappingMode: cm})
			commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "p"}, {2, "b", "p"}}, nil, nil)
			before := rowTracking(t, tbl)
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v := commitChange(t, tbl, "OPTIMIZE", []string{snap.Files()[0].Path}, []row{{1, "a", "p"}, {2, "b", "p"}}, nil, nil)
			if tags := commitInfoTags(t, tbl, v); tags["delta.rowTracking.preserved"] != "false" {
				t.Errorf("rewrite without carrying: tags %v; want delta.rowTracking.preserved=false", tags)
			}
			after := rowTracking(t, tbl)
			for id, r := range after {
				if r.RowID == before[id].RowID || r.RowCommitVersion != v {
					t.Errorf("row %d: %+v after, %+v before; want a fresh id @%d", id, r, before[id], v)
				}
			}
		})
	}
}
