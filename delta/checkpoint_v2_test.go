package delta_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// v2Table makes a table with delta.checkpointPolicy=v2 and a checkpoint every 3
// versions, and commits v1..v7 (a txn each, a delete at v5) with the given sidecar
// layout.
func v2Table(t *testing.T, perSidecar int) (*mem.Store, []string) {
	t.Helper()
	defer delta.SetV2SidecarActions(perSidecar)()
	tbl, st, _ := newTestTable(t, map[string]string{"delta.checkpointInterval": "3", "delta.checkpointPolicy": "v2"})
	ctx := context.Background()
	for i := 1; i <= 7; i++ {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
		tx.AddFiles(addFile(fmt.Sprintf("part=p%d/f%d.parquet", i%2, i), fmt.Sprintf("p%d", i%2), i))
		tx.SetTxn("app", int64(i))
		if i == 5 {
			tx.RemoveAdds(snap.Files()[0])
		}
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tx.CheckpointError(); err != nil {
			t.Fatalf("checkpoint after v%d: %v", i, err)
		}
	}
	infos, err := st.List(ctx, "warehouse/t/_delta_log/", "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, strings.TrimPrefix(in.Key, "warehouse/t/_delta_log/"))
	}
	return st, names
}

// A table with the v2Checkpoint feature gets V2 spec checkpoints: UUID-named with its
// file actions in sidecars, or classic-named with them inline. Either way every version
// loads from the checkpoint exactly as it replays from the JSON commits.
func TestV2CheckpointMatchesReplay(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		perSidecar int
		// wantSidecars is the number of sidecar files of checkpoint 6 (5 adds, 1 tombstone).
		wantSidecars int
	}{
		{"sidecars of two actions", 2, 3},
		{"one sidecar", 100, 1},
		{"inline", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, names := v2Table(t, tc.perSidecar)
			snap0, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := snap0.Snapshot(ctx)
			if p := s.Protocol(); p.MinReaderVersion != 3 || !slices.Contains(p.ReaderFeatures, "v2Checkpoint") || !slices.Contains(p.WriterFeatures, "v2Checkpoint") {
				t.Fatalf("protocol %+v lacks the v2Checkpoint reader-writer feature", p)
			}
			var lc struct {
				Version      int64 `json:"version"`
				Size         int64 `json:"size"`
				NumAdds      int64 `json:"numOfAddFiles"`
				SizeInBytes  int64 `json:"sizeInBytes"`
				V2Checkpoint *struct {
					Path         string          `json:"path"`
					SizeInBytes  int64           `json:"sizeInBytes"`
					SidecarFiles []delta.Sidecar `json:"sidecarFiles"`
				} `json:"v2Checkpoint"`
			}
			if err := json.Unmarshal(readObject(t, st, "warehouse/t/_delta_log/_last_checkpoint"), &lc); err != nil {
				t.Fatal(err)
			}
			// Actions: checkpointMetadata, protocol, metaData, txn, 5 adds, 1 tombstone.
			if lc.Version != 6 || lc.NumAdds != 5 || lc.Size != 10 {
				t.Errorf("_last_checkpoint = %+v", lc)
			}
			var sidecars []string
			for _, n := range names {
				if strings.HasPrefix(n, "_sidecars/") {
					sidecars = append(sidecars, n)
				}
			}
			if tc.perSidecar == 0 {
				for _, v := range []int64{3, 6} {
					if !slices.Contains(names, logName(v, "checkpoint.parquet")) {
						t.Errorf("no classic checkpoint %d: %v", v, names)
					}
				}
				if lc.V2Checkpoint != nil || len(sidecars) != 0 {
					t.Errorf("inline layout wrote sidecars %v / hint %+v", sidecars, lc.V2Checkpoint)
				}
			} else {
				if lc.V2Checkpoint == nil {
					t.Fatalf("_last_checkpoint has no v2Checkpoint: %+v", lc)
				}
				if !slices.Contains(names, lc.V2Checkpoint.Path) || !strings.HasPrefix(lc.V2Checkpoint.Path, logName(6, "checkpoint.")) {
					t.Errorf("v2Checkpoint.path %q is not a listed UUID-named checkpoint 6: %v", lc.V2Checkpoint.Path, names)
				}
				if len(lc.V2Checkpoint.SidecarFiles) != tc.wantSidecars {
					t.Errorf("checkpoint 6 has %d sidecars, want %d", len(lc.V2Checkpoint.SidecarFiles), tc.wantSidecars)
				}
				total := lc.V2Checkpoint.SizeInBytes
				for _, sc := range lc.V2Checkpoint.SidecarFiles {
					if !slices.Contains(sidecars, "_sidecars/"+sc.Path) {
						t.Errorf("sidecar %s is not in _delta_log/_sidecars: %v", sc.Path, sidecars)
					}
					total += sc.SizeInBytes
				}
				if total != lc.SizeInBytes {
					t.Errorf("sizeInBytes %d, want the checkpoint and its sidecars, %d", lc.SizeInBytes, total)
				}
				if slices.Contains(names, logName(6, "checkpoint.parquet")) {
					t.Errorf("a classic checkpoint was written beside the UUID-named one")
				}
			}
			fromCheckpoint, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			noCheckpoints := copyStore(t, st, "warehouse/t/", func(k string) bool { return !strings.Contains(k, "checkpoint") && !strings.Contains(k, "_sidecars") })
			fromReplay, err := delta.Open(ctx, noCheckpoints, "warehouse/t", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []int64{3, 5, 6, 7} {
				a, err := fromCheckpoint.SnapshotAt(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				b, err := fromReplay.SnapshotAt(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				if want := map[int64]int64{3: 3, 5: 3, 6: 6, 7: 6}[v]; a.CheckpointVersion() != want {
					t.Errorf("v%d loaded from checkpoint %d, want %d", v, a.CheckpointVersion(), want)
				}
				if fa, fb := factsOf(t, a), factsOf(t, b); !reflect.DeepEqual(fa, fb) {
					t.Errorf("v%d from checkpoint differs from replay:\n%+v\n%+v", v, fa, fb)
				}
			}
			// Without the JSON commits before it, checkpoint 6 alone gives version 6.
			onlyCheckpoint := copyStore(t, st, "warehouse/t/", func(k string) bool {
				for v := 0; v < 6; v++ {
					if strings.HasSuffix(k, logName(int64(v), "json")) {
						return false
					}
				}
				return true
			})
			tbl, err := delta.Open(ctx, onlyCheckpoint, "warehouse/t", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			a, err := tbl.SnapshotAt(ctx, 6)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := fromReplay.SnapshotAt(ctx, 6)
			if fa, fb := factsOf(t, a), factsOf(t, b); !reflect.DeepEqual(fa, fb) {
				t.Errorf("v6 from the checkpoint alone differs from replay:\n%+v\n%+v", fa, fb)
			}
		})
	}
}

// A sidecar that is missing, truncated or replaced makes its checkpoint unusable: the
// reader falls back to the previous checkpoint and the JSON commits, never returning a
// snapshot with the sidecar's files missing.
func TestV2CheckpointDamagedSidecar(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, st objectstore.Store, key string)
	}{
		{"missing", func(t *testing.T, st objectstore.Store, key string) { st.Delete(ctx, key) }},
		{"truncated", func(t *testing.T, st objectstore.Store, key string) {
			b := readObject(t, st, key)
			if err := st.Put(ctx, key, strings.NewReader(string(b[:len(b)/2])), int64(len(b)/2)); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced by another sidecar", func(t *testing.T, st objectstore.Store, key string) {
			infos, _ := st.List(ctx, "warehouse/t/_delta_log/_sidecars/", "")
			for _, in := range infos {
				if in.Key != key && in.Size == func() int64 { i, _ := st.Stat(ctx, key); return i.Size }() {
					b := readObject(t, st, in.Key)
					st.Put(ctx, key, strings.NewReader(string(b)), int64(len(b)))
					return
				}
			}
			// The fixture writes sidecars of two actions each, with paths of one length:
			// every pair of sidecars of one checkpoint has the same size.
			t.Fatal("the fixture has no other sidecar of the same size to swap in")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := v2Table(t, 2)
			want, err := delta.Open(ctx, copyStore(t, st, "warehouse/t/", func(string) bool { return true }), "warehouse/t", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var lc struct {
				V2Checkpoint struct {
					SidecarFiles []delta.Sidecar `json:"sidecarFiles"`
				} `json:"v2Checkpoint"`
			}
			if err := json.Unmarshal(readObject(t, st, "warehouse/t/_delta_log/_last_checkpoint"), &lc); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, st, "warehouse/t/_delta_log/_sidecars/"+lc.V2Checkpoint.SidecarFiles[1].Path)
			tbl, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tbl.SnapshotAt(ctx, 6)
			if err != nil {
				t.Fatal(err)
			}
			if got.CheckpointVersion() != 3 {
				t.Errorf("loaded from checkpoint %d, want 3 (checkpoint 6 has a damaged sidecar)", got.CheckpointVersion())
			}
			w, _ := want.SnapshotAt(ctx, 6)
			if fa, fb := factsOf(t, got), factsOf(t, w); !reflect.DeepEqual(fa, fb) {
				t.Errorf("v6 differs:\n%+v\n%+v", fa, fb)
			}
		})
	}
}

// Log cleanup on a table with V2 checkpoints keeps the sidecars of every checkpoint it
// keeps and deletes those of the checkpoints it deleted once they are old enough; every
// version left still loads.
func TestLogCleanupV2Sidecars(t *testing.T) {
	defer delta.SetV2SidecarActions(1)()
	tbl, st, clock := cleanupTable(t, map[string]string{"delta.checkpointPolicy": "v2"})
	ctx := context.Background()
	names := logNames(t, st)
	// At v10 (day 50) the cutoff is day 20: checkpoint 2 is kept, 0 and 1 go.
	for _, gone := range []string{logName(0, "json"), logName(1, "json")} {
		if slices.Contains(names, gone) {
			t.Errorf("%s still in the log: %v", gone, names)
		}
	}
	used := map[string]bool{}
	checkpoints := 0
	for _, n := range names {
		if strings.Contains(n, ".checkpoint.") && !strings.HasPrefix(n, "_") {
			checkpoints++
		}
	}
	if checkpoints != 5 { // 2, 4, 6, 8, 10
		t.Errorf("%d checkpoints left, want 5: %v", checkpoints, names)
	}
	var lc struct {
		V2Checkpoint struct {
			SidecarFiles []delta.Sidecar `json:"sidecarFiles"`
		} `json:"v2Checkpoint"`
	}
	if err := json.Unmarshal(readObject(t, st, "wh/t/_delta_log/_last_checkpoint"), &lc); err != nil {
		t.Fatal(err)
	}
	for _, sc := range lc.V2Checkpoint.SidecarFiles {
		used["_sidecars/"+sc.Path] = true
	}
	for n := range used {
		if !slices.Contains(names, n) {
			t.Errorf("sidecar %s of the newest checkpoint was deleted", n)
		}
	}
	// Every version from the kept checkpoint on loads, from a fresh reader.
	re, err := delta.Open(ctx, st, "wh/t", delta.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(2); v <= 10; v++ {
		s, err := re.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if len(s.Files()) != int(v) {
			t.Errorf("v%d has %d files, want %d", v, len(s.Files()), v)
		}
	}
	// Checkpoint 0 never existed; the sidecars of checkpoints that were deleted do not
	// survive: 1 sidecar per action means checkpoint 2 has 2 sidecars, and the kept
	// checkpoints 2..10 have 2+4+6+8+10 sidecars.
	sidecars := 0
	for _, n := range names {
		if strings.HasPrefix(n, "_sidecars/") {
			sidecars++
		}
	}
	if sidecars != 30 {
		t.Errorf("%d sidecar files, want 30 (those of checkpoints 2..10)", sidecars)
	}
	// Another 40 days on, a cleanup keeps only the newest checkpoint's sidecars and
	// deletes the orphans it leaves.
	clock.Advance(40 * 24 * time.Hour)
	appendFiles(t, tbl, addFile("part=a/f11.parquet", "a", 1))
	res, err := tbl.CleanupLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var deletedSidecars int
	for _, f := range res.FilesDeleted {
		if strings.HasPrefix(f, "_sidecars/") {
			deletedSidecars++
		}
	}
	if res.CheckpointVersion != 10 || deletedSidecars != 20 {
		t.Errorf("cleanup kept checkpoint %d and deleted %d sidecars (%v); want 10 and 20", res.CheckpointVersion, deletedSidecars, res.FilesDeleted)
	}
	re, err = delta.Open(ctx, st, "wh/t", delta.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := re.SnapshotAt(ctx, 10); err != nil || len(s.Files()) != 10 || s.CheckpointVersion() != 10 {
		t.Errorf("v10 after cleanup: %v, %v", s, err)
	}
}
