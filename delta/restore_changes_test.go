package delta_test

import (
	"context"
	"slices"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
)

// A RESTORE's change feed holds the net difference of the rows, not every row of every
// file it removes or brings back: undoing a rewrite of a file that changed one of its
// rows and an append shows the delete of the appended row and the change back of the
// changed one (a pre/post image pair with keys, a delete and an insert without), and
// nothing for the rows the rewrite copied unchanged. A restore that changes no row has
// an empty feed, and its files carry dataChange=false.
func TestRestoreChangeDataIsTheNetDifference(t *testing.T) {
	ctx := context.Background()
	for _, keyed := range []bool{true, false} {
		name := "without keys"
		if keyed {
			name = "with keys"
		}
		t.Run(name, func(t *testing.T) {
			tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableChangeDataFeed: "true"})
			v1 := commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "x"}, {2, "b", "x"}, {3, "c", "x"}, {4, "d", "y"}}, nil, nil)
			// v2: the bad run: rewrites the x file with row 2 changed, appends row 5.
			v2 := commitChange(t, tbl, "MERGE", filesWith(t, tbl, 1), []row{{1, "a", "x"}, {2, "BAD", "x"}, {3, "c", "x"}, {5, "e", "y"}}, nil, nil)
			_ = v2
			opts := delta.RestoreOptions{Version: ptr(v1)}
			if keyed {
				opts.Keys = []string{"id"}
			}
			v, m, err := tbl.Restore(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(v)})
			if err != nil {
				t.Fatal(err)
			}
			got := ownChangeRows(t, r)
			var want []string
			if keyed {
				want = []string{change(row{2, "BAD", "x"}, "update_preimage", v), change(row{2, "b", "x"}, "update_postimage", v), change(row{5, "e", "y"}, "delete", v)}
				if m.RowsDeleted != 1 || m.RowsInserted != 0 || m.RowsUpdated != 1 {
					t.Errorf("metrics deleted %d inserted %d updated %d, want 1 0 1", m.RowsDeleted, m.RowsInserted, m.RowsUpdated)
				}
			} else {
				want = []string{change(row{2, "BAD", "x"}, "delete", v), change(row{2, "b", "x"}, "insert", v), change(row{5, "e", "y"}, "delete", v)}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("change feed of the restore\n got %v\nwant %v", got, want)
			}
			latest, _ := tbl.Snapshot(ctx)
			before, _ := tbl.SnapshotAt(ctx, v1)
			if g, w := tableRows(t, latest), tableRows(t, before); !slices.Equal(g, w) {
				t.Errorf("rows after the restore %v, want v%d's %v", g, v1, w)
			}
		})
	}

	t.Run("no row changes", func(t *testing.T) {
		tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableChangeDataFeed: "true"})
		v1 := commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "x"}, {2, "b", "x"}}, nil, nil)
		commitChange(t, tbl, "WRITE", nil, []row{{3, "c", "x"}}, nil, nil)
		snap, _ := tbl.Snapshot(ctx)
		// v3 rewrites every file into one, the same rows, as a data change.
		commitChange(t, tbl, "WRITE", fileNames(snap.Files()), []row{{1, "a", "x"}, {2, "b", "x"}, {3, "c", "x"}}, nil, nil)
		v3, _ := tbl.Snapshot(ctx)
		// Back to v2's files: the rows are v3's.
		v, m, err := tbl.Restore(ctx, delta.RestoreOptions{Version: ptr(v1 + 1)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(v)})
		if err != nil {
			t.Fatal(err)
		}
		if got := ownChangeRows(t, r); len(got) != 0 {
			t.Errorf("change feed of a restore that changes no row: %v", got)
		}
		if m.RowsDeleted+m.RowsInserted+m.RowsUpdated != 0 || m.NumRestoredFiles != 2 || m.NumRemovedFiles != 1 {
			t.Errorf("metrics %+v", m)
		}
		latest, _ := tbl.Snapshot(ctx)
		if g, w := tableRows(t, latest), tableRows(t, v3); !slices.Equal(g, w) {
			t.Errorf("rows %v, want %v", g, w)
		}
	})

	t.Run("txns", func(t *testing.T) {
		tbl, _, _ := newTestTable(t, nil)
		v1 := commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "x"}}, nil, nil)
		commitChange(t, tbl, "WRITE", nil, []row{{2, "b", "x"}}, nil, nil)
		if _, _, err := tbl.Restore(ctx, delta.RestoreOptions{Version: ptr(v1), Txns: map[string]int64{"consumer": 7}}); err != nil {
			t.Fatal(err)
		}
		latest, _ := tbl.Snapshot(ctx)
		if v, ok := latest.TxnVersion("consumer"); !ok || v != 7 {
			t.Errorf("txn of consumer after the restore: %d %v, want 7", v, ok)
		}
	})
}

// ResetTxns sets each idempotent writer's progress back to the restored version's;
// Txns override it; an appId the restored version never had keeps its version.
func TestRestoreResetTxns(t *testing.T) {
	ctx := context.Background()
	tbl, _, _ := newTestTable(t, nil)
	txn := func(rows []row, txns map[string]int64) int64 {
		snap, _ := tbl.Snapshot(ctx)
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
		tx.AddFiles(writeRows(t, tbl, rows)...)
		for a, v := range txns {
			tx.SetTxn(a, v)
		}
		v, err := tx.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v1 := txn([]row{{1, "a", "x"}}, map[string]int64{"merge": 3, "watermark": 100, "same": 1})
	txn([]row{{2, "b", "x"}}, map[string]int64{"merge": 5, "watermark": 200, "new": 9})
	_, m, err := tbl.Restore(ctx, delta.RestoreOptions{Version: ptr(v1), ResetTxns: true, Txns: map[string]int64{"merge": 8}})
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := tbl.Snapshot(ctx)
	for app, want := range map[string]int64{"merge": 8, "watermark": 100, "same": 1, "new": 9} {
		if v, ok := latest.TxnVersion(app); !ok || v != want {
			t.Errorf("txn %s after the restore = %d (%v), want %d", app, v, ok, want)
		}
	}
	if !slices.Equal(m.TxnsKept, []string{"new"}) || len(m.TxnsReset) != 2 || m.TxnsReset["watermark"] != 100 {
		t.Errorf("TxnsReset %v TxnsKept %v", m.TxnsReset, m.TxnsKept)
	}
}
