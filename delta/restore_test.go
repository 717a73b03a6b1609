package delta_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

// RESTORE brings back an old version's rows in one new commit that history shows, with
// Spark's parameters and metrics; the change feed shows it as deletes and inserts.
func TestRestore(t *testing.T) {
	for _, kind := range []string{"mem", "fs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := &manualClock{t: time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)}
			cs := newClockedStore(t, kind, c)
			if cs == nil {
				return
			}
			tbl, err := delta.Create(ctx, cs.Store, "wh/t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
				Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, delta.Options{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "x"}, {2, "b", "y"}}, nil, nil) // v1
			commitChange(t, tbl, "WRITE", nil, []row{{3, "c", "x"}}, nil, nil)                // v2
			snap, _ := tbl.Snapshot(ctx)
			commitChange(t, tbl, "WRITE", fileNames(snap.Files()), []row{{10, "t", "z"}}, nil, nil) // v3
			rowsAt := func(v int64) []string {
				s, err := tbl.SnapshotAt(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				return tableRows(t, s)
			}
			v1Rows := rowsAt(1)

			v, m, err := tbl.Restore(ctx, delta.RestoreOptions{Version: ptr(int64(1))})
			if err != nil {
				t.Fatal(err)
			}
			if v != 4 {
				t.Errorf("restore committed v%d, want v4", v)
			}
			latest, _ := tbl.Snapshot(ctx)
			if got := tableRows(t, latest); !slices.Equal(got, v1Rows) {
				t.Errorf("rows after restore %v, want v1's %v", got, v1Rows)
			}
			if m.NumRestoredFiles != 2 || m.NumRemovedFiles != 1 || m.NumOfFilesAfterRestore != 2 || m.RestoredFilesSize != m.TableSizeAfterRestore || m.RemovedFilesSize <= 0 {
				t.Errorf("metrics %+v", m)
			}
			h, err := tbl.History(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if h[0].Operation != "RESTORE" || fmt.Sprint(h[0].OperationParameters["version"]) != "1" ||
				h[0].OperationParameters["timestamp"] != nil || h[0].OperationMetrics["numRestoredFiles"] != "2" ||
				h[0].OperationMetrics["numOfFilesAfterRestore"] != "2" {
				t.Errorf("history entry %+v", h[0])
			}
			r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(v)})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{change(row{1, "a", "x"}, "insert", v), change(row{10, "t", "z"}, "delete", v), change(row{2, "b", "y"}, "insert", v)}
			if got := ownChangeRows(t, r); !slices.Equal(got, want) {
				t.Errorf("feed of the restore %v, want %v", got, want)
			}

			// By timestamp: the version committed at or before it.
			hist, _ := tbl.History(ctx, 0)
			var ts2 time.Time
			for _, e := range hist {
				if e.Version == 2 {
					ts2 = e.Timestamp
				}
			}
			if _, _, err := tbl.Restore(ctx, delta.RestoreOptions{Timestamp: ts2}); err != nil {
				t.Fatal(err)
			}
			latest, _ = tbl.Snapshot(ctx)
			if got, want := tableRows(t, latest), rowsAt(2); !slices.Equal(got, want) {
				t.Errorf("rows after restore to v2's time %v, want %v", got, want)
			}

			if _, _, err := tbl.Restore(ctx, delta.RestoreOptions{Version: ptr(int64(99))}); err == nil ||
				!strings.Contains(err.Error(), "cannot restore to version 99: the latest version is 5") {
				t.Errorf("restore to v99: %v", err)
			}
			// After a forced vacuum the overwritten v3 file is gone: restoring v3 fails.
			c.Advance(time.Hour)
			zero := time.Duration(0)
			if _, err := tbl.Vacuum(ctx, delta.VacuumOptions{Retain: &zero, Force: true}); err != nil {
				t.Fatal(err)
			}
			before, _ := tbl.Snapshot(ctx)
			if _, _, err := tbl.Restore(ctx, delta.RestoreOptions{Version: ptr(int64(3))}); err == nil || !errors.Is(err, delta.ErrVersionCleaned) ||
				!strings.Contains(err.Error(), "cannot restore to version 3: 1 of its data files were deleted (by VACUUM)") {
				t.Errorf("restore of a vacuumed version: %v", err)
			}
			if after, _ := tbl.Snapshot(ctx); after.Version() != before.Version() {
				t.Errorf("a failed restore committed v%d", after.Version())
			}
		})
	}
}

// Restoring a Spark-written table: the file set of the target version comes back.
func TestRestoreGoldenTable(t *testing.T) {
	dir, tables := loadGolden(t)
	g := tables["delta-golden/basic-with-inserts-overwrite-restore"]
	tbl, err := openDir(t, copyDir(t, filepath.Join(dir, filepath.FromSlash(g.TableRoot))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, _, err := tbl.Restore(ctx, delta.RestoreOptions{Version: ptr(int64(2))})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tbl.SnapshotAt(ctx, v)
	want, _ := tbl.SnapshotAt(ctx, 2)
	if !slices.Equal(fileNames(got.Files()), fileNames(want.Files())) {
		t.Errorf("files after restore %v, want v2's %v", fileNames(got.Files()), fileNames(want.Files()))
	}
	if n, ok := got.NumRecords(); !ok || n != 500 {
		t.Errorf("rows after restore = %d (%v), want 500", n, ok)
	}
	if gr, wr := tableRows2(t, got), tableRows2(t, want); gr != wr {
		t.Errorf("restored rows differ from v2's")
	}
}

// tableRows2 counts a snapshot's rows by scanning (golden schemas differ from ours).
func tableRows2(t testing.TB, s *delta.Snapshot) int64 {
	t.Helper()
	sc, err := s.Scan(context.Background(), delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var n int64
	for sc.Next() {
		n += sc.RecordBatch().NumRows()
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	return n
}
