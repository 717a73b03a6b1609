package delta_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// Random upserts (with and without a not-matched-by-source delete), DELETEs and UPDATEs
// (of ids, of a partition, moving rows between partitions) against a plain map: after
// every one the table holds the model's rows and the version's change feed is the
// model's difference; on a table with deletion vectors, row tracking, both or neither,
// column mapping by name, id or none, checkpointed and opened again at random, read as
// of earlier versions,
// its rows in one file or several, the source in one record or several.
func TestDMLMatchesModel(t *testing.T) {
	ctx := context.Background()
	parts := []string{"a", "b", "c"}
	for seed := testenv.PropertySeed(1); seed <= testenv.PropertySeed(25); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			props := map[string]string{delta.PropEnableChangeDataFeed: "true"}
			if rng.IntN(2) == 0 {
				props[delta.PropEnableDeletionVectors] = "true"
			}
			if rng.IntN(2) == 0 {
				props[delta.PropEnableRowTracking] = "true"
			}
			if m := []string{"none", "name", "id"}[rng.IntN(3)]; m != "none" {
				props[delta.PropColumnMappingMode] = m
			}
			tbl, st, clock := newTestTable(t, props)
			cur := model{}
			var initial []row
			for id := int64(0); id < 30; id++ {
				if rng.IntN(2) == 0 {
					r := row{id, fmt.Sprintf("v0-%d", id), parts[rng.IntN(3)]}
					initial = append(initial, r)
					cur[id] = r
				}
			}
			for len(initial) > 0 { // in one commit or several (more files a partition)
				n := len(initial)
				if rng.IntN(2) == 0 {
					n = rng.IntN(n) + 1
				}
				commitChange(t, tbl, "WRITE", nil, initial[:n], nil, nil)
				initial = initial[n:]
			}
			head, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			byVersion := map[int64]model{head.Version(): maps.Clone(cur)} // the rows of each version
			var feed []string                                             // the rounds' changes
			// With row tracking, each row's id and commit version are checked too: an
			// updated row keeps its id at the round's version, an untouched one keeps
			// both, an inserted one gets an id never given before.
			tracked := props[delta.PropEnableRowTracking] == "true"
			var ids map[int64]delta.RowTracking
			given := map[int64]bool{}
			if tracked {
				ids = rowTracking(t, tbl)
				for _, r := range ids {
					given[r.RowID] = true
				}
			}
			for round := 1; round <= 6; round++ {
				var rows []row
				var ops []string
				next := maps.Clone(cur)
				updated := map[int64]bool{} // rows of cur that the round changes in place
				var version int64
				var committed bool
				kind := []string{"merge", "merge", "merge", "delete", "update"}[rng.IntN(5)]
				switch kind {
				case "merge":
					for _, id := range rng.Perm(40)[:rng.IntN(15)+1] {
						r := row{int64(id), fmt.Sprintf("v%d-%d", round, id), parts[rng.IntN(3)]}
						op := []string{"U", "D", "I"}[rng.IntN(3)]
						rows, ops = append(rows, r), append(ops, op)
						_, exists := cur[r.id]
						switch {
						case exists && op == "D":
							delete(next, r.id)
						case op != "D":
							next[r.id] = r
							updated[r.id] = exists
						}
					}
					src := sourceRecord(rows, ops)
					opts := upsertOptions(src)
					if cut := rng.IntN(len(rows) + 1); cut > 0 && cut < len(rows) && rng.IntN(2) == 0 {
						a, b := src.NewSlice(0, int64(cut)), src.NewSlice(int64(cut), int64(len(rows)))
						defer a.Release()
						defer b.Release()
						opts.Source = []arrow.RecordBatch{a, b}
					}
					if rng.IntN(2) == 0 { // and a not-matched-by-source delete
						opts.WhenNotMatchedBySource = []delta.MergeClause{{Cond: expr.Eq("part", "b"), Action: delta.MergeDelete}}
						kind += " by source"
						keys := map[int64]bool{}
						for _, r := range rows {
							keys[r.id] = true
						}
						for id, r := range cur {
							if !keys[id] && r.part == "b" {
								delete(next, id)
							}
						}
					}
					res, err := tbl.Merge(ctx, opts)
					src.Release()
					if err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					version, committed = res.Version, res.Committed
				default:
					// A DELETE or an UPDATE of some ids, or of a partition, or both.
					in := rng.Perm(40)[:rng.IntN(10)+1]
					part := parts[rng.IntN(3)]
					byIDs, byPart := true, false
					switch rng.IntN(3) {
					case 1:
						byIDs, byPart = false, true
					case 2:
						byPart = true
					}
					var terms []string
					if byIDs {
						terms = append(terms, fmt.Sprintf("id IN (%s)", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(in)), ", "), "[]")))
					}
					if byPart {
						terms = append(terms, "part = '"+part+"'")
					}
					text := strings.Join(terms, " OR ")
					where, err := expr.Parse(text)
					if err != nil {
						t.Fatal(err)
					}
					del := kind == "delete"
					kind += " where " + text
					name, to := fmt.Sprintf("u%d", round), parts[rng.IntN(3)]
					for id, r := range cur {
						switch {
						case !(byIDs && slices.Contains(in, int(id)) || byPart && r.part == part):
						case del:
							delete(next, id)
						default:
							next[id], updated[id] = row{id, name, to}, true
						}
					}
					var res *delta.DMLResult
					if del {
						res, err = tbl.Delete(ctx, delta.DeleteOptions{Where: where})
					} else {
						res, err = tbl.Update(ctx, delta.UpdateOptions{Where: where, Set: map[string]any{"name": name, "part": to}})
					}
					if err != nil {
						t.Fatalf("round %d (%s): %v", round, kind, err)
					}
					version, committed = res.Version, res.Committed
				}
				if got := latestRows(t, tbl); !slices.Equal(got, next.rows()) {
					t.Fatalf("round %d (%s, table %v): rows\ngot  %v\nwant %v\nsource %v %v", round, kind, props, got, next.rows(), rows, ops)
				}
				if committed {
					want := cur.diff(next, version)
					slices.Sort(want)
					if got := versionChanges(t, tbl, version); !slices.Equal(got, want) {
						t.Fatalf("round %d (%s): feed\ngot  %v\nwant %v", round, kind, got, want)
					}
					feed = append(feed, want...)
				} else if !maps.Equal(cur, next) {
					t.Fatalf("round %d: nothing committed but the model changed", round)
				}
				if tracked {
					got := rowTracking(t, tbl)
					unique := map[int64]int64{}
					for id, r := range got {
						if other, dup := unique[r.RowID]; dup {
							t.Fatalf("round %d: rows %d and %d have one row id %d", round, id, other, r.RowID)
						}
						unique[r.RowID] = id
						before, had := ids[id]
						switch {
						case !had && (given[r.RowID] || r.RowCommitVersion != version):
							t.Fatalf("round %d: inserted row %d: %+v, want a new row id at version %d", round, id, r, version)
						case had && updated[id] && (r.RowID != before.RowID || r.RowCommitVersion != version):
							t.Fatalf("round %d: updated row %d: %+v, want row id %d at version %d", round, id, r, before.RowID, version)
						case had && !updated[id] && r != before:
							t.Fatalf("round %d: untouched row %d: %+v, was %+v", round, id, r, before)
						}
					}
					for _, r := range got {
						given[r.RowID] = true
					}
					ids = got
				}
				cur = next
				if committed {
					byVersion[version] = maps.Clone(cur)
				}
				if rng.IntN(4) == 0 {
					// A checkpoint of the latest version, and the table opened again: what
					// follows reads its state from the checkpoint.
					snap, err := tbl.Snapshot(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if err := tbl.Checkpoint(ctx, snap); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					if tbl, err = delta.Open(ctx, st, tbl.Root(), testOptions(clock)); err != nil {
						t.Fatal(err)
					}
					if got := latestRows(t, tbl); !slices.Equal(got, cur.rows()) {
						t.Fatalf("round %d: rows after a checkpoint\ngot  %v\nwant %v", round, got, cur.rows())
					}
				}
				checkPickedScan(t, tbl, rng)
				// Time travel to a version of an earlier round.
				vs := slices.Sorted(maps.Keys(byVersion))
				v := vs[rng.IntN(len(vs))]
				old, err := tbl.SnapshotAt(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := tableRows(t, old), byVersion[v].rows(); !slices.Equal(got, want) {
					t.Fatalf("round %d: rows as of version %d\ngot  %v\nwant %v", round, v, got, want)
				}
			}
			// The feed of all the rounds' versions in one read is each version's.
			r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(head.Version() + 1)})
			if err != nil {
				t.Fatal(err)
			}
			got := ownChangeRows(t, r)
			slices.Sort(feed)
			if !slices.Equal(got, feed) {
				t.Fatalf("the feed from version %d\ngot  %v\nwant %v", head.Version()+1, got, feed)
			}
		})
	}
}

// Under Serializable isolation, an append that commits while a merge runs conflicts with
// it when it lands in a partition the merge read, and not otherwise.
func TestMergeConflictsWithConcurrentAppend(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		part     string
		conflict bool
	}{{"a", true}, {"b", false}} {
		t.Run(tc.part, func(t *testing.T) {
			tbl := cdfTable(t, []row{{1, "ann", "a"}}, []row{{2, "bob", "b"}})
			snap, _ := tbl.Snapshot(ctx)
			tx := tbl.NewTransaction(snap, delta.TxOptions{})
			appendRows(t, tbl, row{3, "cy", tc.part}) // commits after the merge read its snapshot
			src := sourceRecord([]row{{1, "ANN", "a"}}, []string{"U"})
			defer src.Release()
			opts := upsertOptions(src)
			opts.On = []string{"id", "part"}
			opts.Tx = tx
			_, err := tbl.Merge(ctx, opts)
			var ce *delta.ConflictError
			if got := errors.As(err, &ce); got != tc.conflict {
				t.Fatalf("append into %s: err = %v, want conflict %v", tc.part, err, tc.conflict)
			}
		})
	}
}

// A merge that loses to a concurrent append is rerun from the new snapshot with Retries,
// and returns the *ConflictError without.
func TestMergeRetriesAfterConflict(t *testing.T) {
	ctx := context.Background()
	for _, retries := range []int{0, 2} {
		t.Run(fmt.Sprint(retries), func(t *testing.T) {
			tbl := cdfTable(t, []row{{1, "ann", "a"}})
			src := sourceRecord([]row{{1, "ANN", "a"}}, []string{"U"})
			defer src.Release()
			calls := 0
			opts := upsertOptions(src)
			opts.Retries = retries
			// The clause condition commits an append while the merge runs (first time only).
			opts.WhenMatched = []delta.MergeClause{{Action: delta.MergeUpdate, CondFunc: func(rows arrow.RecordBatch) ([]bool, error) {
				if calls++; calls == 1 {
					appendRows(t, tbl, row{9, "zed", "a"})
				}
				return []bool{true}, nil
			}}}
			_, err := tbl.Merge(ctx, opts)
			var ce *delta.ConflictError
			if retries == 0 {
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a conflict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := latestRows(t, tbl), sortedStrings(row{1, "ANN", "a"}.String(), row{9, "zed", "a"}.String()); !slices.Equal(got, want) || calls != 2 {
				t.Errorf("rows %v after %d runs, want %v", got, calls, want)
			}
		})
	}
}
