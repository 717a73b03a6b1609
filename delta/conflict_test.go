package delta_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// txKind builds one kind of transaction on a snapshot.
type txKind func(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction

func blindAppend(part string) txKind {
	return func(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction {
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
		tx.AddFiles(addFile("part="+part+"/"+name+".parquet", part, 1))
		return tx
	}
}

func overwrite(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction {
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE", OperationParameters: map[string]any{"mode": "Overwrite"}})
	tx.ReadWholeTable()
	tx.RemoveAdds(snap.Files()...)
	tx.AddFiles(addFile("part=a/"+name+".parquet", "a", 1))
	return tx
}

// deletePartition rewrites partition part: reads it, removes its files.
func deletePartition(part string) txKind {
	return func(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction {
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "DELETE"})
		pred := delta.PartitionEquals(map[string]*string{"part": strp(part)})
		tx.ReadPartitions(pred)
		for _, a := range snap.Files() {
			if pred(a.PartitionValues) {
				tx.RemoveAdds(a)
			}
		}
		return tx
	}
}

// readAndAppend reads one file (as a MERGE matching no rows would) and appends.
func readAndAppend(path string) txKind {
	return func(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction {
		tx := blindAppend("c")(tbl, snap, name)
		tx.ReadFiles(path)
		return tx
	}
}

func withTxn(appID string) txKind {
	return func(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction {
		tx := blindAppend("a")(tbl, snap, name)
		tx.SetTxn(appID, 1)
		return tx
	}
}

func setProperty(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction {
	md := *snap.Metadata()
	md.Configuration = map[string]string{"owner": name}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "SET TBLPROPERTIES"})
	tx.UpdateMetadata(&md)
	return tx
}

func compaction(tbl *delta.Table, snap *delta.Snapshot, name string) *delta.Transaction {
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "OPTIMIZE"})
	var rs []*delta.Remove
	for _, a := range snap.Files() {
		if a.PartitionValues["part"] != nil && *a.PartitionValues["part"] == "b" {
			sz := a.Size
			rs = append(rs, &delta.Remove{Path: a.Path, DataChange: false, Size: &sz})
		}
	}
	tx.RemoveFiles(rs...)
	c := addFile("part=b/"+name+".parquet", "b", 2)
	c.DataChange = false
	tx.AddFiles(c)
	return tx
}

// Two transactions start from the same snapshot; the winner commits first. The loser
// either commits at the next version or fails with the expected conflict kind.
func TestConflictRules(t *testing.T) {
	tests := []struct {
		name           string
		winner, loser  txKind
		want           delta.ConflictKind // "" = the loser commits
		wantLoserFiles int                // live files after both, when the loser commits
	}{
		{"append vs append", blindAppend("a"), blindAppend("a"), "", 4},
		{"append then overwrite", blindAppend("a"), overwrite, delta.ConflictConcurrentAppend, 0},
		{"overwrite then append", overwrite, blindAppend("a"), "", 2},
		{"overwrite vs overwrite", overwrite, overwrite, delta.ConflictConcurrentDeleteDelete, 0},
		{"delete partition vs append to other partition", blindAppend("b"), deletePartition("a"), "", 2},
		{"delete partition vs append to same partition", blindAppend("a"), deletePartition("a"), delta.ConflictConcurrentAppend, 0},
		{"delete vs delete same partition", deletePartition("a"), deletePartition("a"), delta.ConflictConcurrentDeleteDelete, 0},
		{"delete vs delete other partitions", deletePartition("b"), deletePartition("a"), "", 0},
		{"delete of a file read by a merge", deletePartition("a"), readAndAppend("part=a/seed-a.parquet"), delta.ConflictConcurrentDeleteRead, 0},
		{"delete of a file the merge did not read", deletePartition("b"), readAndAppend("part=a/seed-a.parquet"), "", 2},
		{"same txn appId", withTxn("job"), withTxn("job"), delta.ConflictConcurrentTransaction, 0},
		{"different txn appIds", withTxn("job1"), withTxn("job2"), "", 4},
		{"metadata change then append", setProperty, blindAppend("a"), delta.ConflictMetadataChanged, 0},
		{"compaction then append", compaction, blindAppend("b"), "", 3},
		{"compaction then delete of compacted partition", compaction, deletePartition("b"), delta.ConflictConcurrentDeleteDelete, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl, _, _ := newTestTable(t, nil)
			ctx := context.Background()
			appendFiles(t, tbl, addFile("part=a/seed-a.parquet", "a", 1), addFile("part=b/seed-b.parquet", "b", 1))
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w := tc.winner(tbl, snap, "winner")
			l := tc.loser(tbl, snap, "loser")
			if v, err := w.Commit(ctx); err != nil || v != 2 {
				t.Fatalf("winner commit = %d, %v", v, err)
			}
			v, err := l.Commit(ctx)
			if tc.want == "" {
				if err != nil || v != 3 {
					t.Fatalf("loser commit = %d, %v; want version 3", v, err)
				}
				final, _ := tbl.Snapshot(ctx)
				if len(final.Files()) != tc.wantLoserFiles {
					t.Errorf("live files = %v, want %d", fileNames(final.Files()), tc.wantLoserFiles)
				}
				return
			}
			var ce *delta.ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("loser commit = %d, %v; want a *ConflictError %s", v, err, tc.want)
			}
			if ce.Kind != tc.want || ce.WinningVersion != 2 || ce.ReadVersion != 1 {
				t.Errorf("conflict = %+v, want kind %s with winning version 2, read version 1", ce, tc.want)
			}
			if final, _ := tbl.Snapshot(ctx); final.Version() != 2 {
				t.Errorf("a conflicting loser committed: latest version %d", final.Version())
			}
		})
	}
}

// stores returns the object stores the concurrency tests run on.
func stores(t *testing.T) map[string]objectstore.Store {
	fsStore, err := fs.New(fs.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsStore.Close() })
	out := map[string]objectstore.Store{"mem": mem.New(mem.Config{}), "fs": fsStore}
	if s3 := s3Store(t); s3 != nil {
		out["s3"] = s3
	}
	return out
}

// 8 writers × 50 blind appends each: every commit lands, versions are contiguous, no
// file is lost or doubled, and checkpoints written along the way agree.
func TestConcurrentAppends(t *testing.T) {
	const writers, commits = 8, 50
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			root := "concurrent-appends/" + t.Name()
			_, err := delta.Create(ctx, st, root, delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}}, delta.Options{UserName: "test"})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					// Each writer has its own Table value, as separate processes would.
					mine, err := delta.Open(ctx, st, root, delta.Options{UserName: fmt.Sprintf("w%d", w)})
					if err != nil {
						errs <- err
						return
					}
					for i := 0; i < commits; i++ {
						snap, err := mine.Snapshot(ctx)
						if err != nil {
							errs <- err
							return
						}
						tx := mine.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
						tx.AddFiles(addFile(fmt.Sprintf("part=w%d/f%03d.parquet", w, i), fmt.Sprintf("w%d", w), 1))
						if _, err := tx.Commit(ctx); err != nil {
							errs <- fmt.Errorf("writer %d commit %d: %w", w, i, err)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			fresh, err := delta.Open(ctx, st, root, delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := fresh.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version() != writers*commits {
				t.Errorf("latest version = %d, want %d", snap.Version(), writers*commits)
			}
			if n, _ := snap.NumRecords(); len(snap.Files()) != writers*commits || n != writers*commits {
				t.Errorf("live files = %d, records = %d; want %d each", len(snap.Files()), n, writers*commits)
			}
			seen := map[string]bool{}
			for _, a := range snap.Files() {
				if seen[a.Path] {
					t.Errorf("file %s is live twice", a.Path)
				}
				seen[a.Path] = true
			}
			hist, err := fresh.History(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(hist) != writers*commits+1 {
				t.Errorf("history has %d versions, want %d", len(hist), writers*commits+1)
			}
			// Replaying from scratch agrees with the checkpointed snapshot.
			if snap.CheckpointVersion() < 0 {
				t.Errorf("no checkpoint was written")
			}
		})
	}
}

// Two overwrites of one table race: one wins, the other gets a conflict; a retry after
// re-reading replaces the winner's data. Never a lost or doubled file.
func TestConcurrentOverwrites(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for round := 0; round < 5; round++ {
				root := fmt.Sprintf("concurrent-overwrites/%s/r%d", t.Name(), round)
				tbl, err := delta.Create(ctx, st, root, delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}}, delta.Options{})
				if err != nil {
					t.Fatal(err)
				}
				appendFiles(t, tbl, addFile("part=a/seed.parquet", "a", 1))
				snap, _ := tbl.Snapshot(ctx)
				results := make([]error, 2)
				var wg sync.WaitGroup
				for i := 0; i < 2; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						_, results[i] = overwrite(tbl, snap, fmt.Sprintf("writer%d", i)).Commit(ctx)
					}(i)
				}
				wg.Wait()
				var winners, conflicts []int
				for i, err := range results {
					var ce *delta.ConflictError
					switch {
					case err == nil:
						winners = append(winners, i)
					case errors.As(err, &ce):
						conflicts = append(conflicts, i)
					default:
						t.Fatalf("writer %d: %v", i, err)
					}
				}
				if len(winners) != 1 || len(conflicts) != 1 {
					t.Fatalf("winners %v, conflicts %v; want exactly one of each", winners, conflicts)
				}
				latest, _ := tbl.Snapshot(ctx)
				if got := fileNames(latest.Files()); len(got) != 1 || got[0] != fmt.Sprintf("part=a/writer%d.parquet", winners[0]) {
					t.Fatalf("files after race = %v", got)
				}
				// The loser re-reads and retries: its data replaces the winner's.
				if _, err := overwrite(tbl, latest, fmt.Sprintf("writer%d", conflicts[0])).Commit(ctx); err != nil {
					t.Fatal(err)
				}
				final, _ := tbl.Snapshot(ctx)
				got := fileNames(final.Files())
				sort.Strings(got)
				if len(got) != 1 || got[0] != fmt.Sprintf("part=a/writer%d.parquet", conflicts[0]) || final.Version() != 3 {
					t.Fatalf("after retry: v%d files %v", final.Version(), got)
				}
			}
		})
	}
}

// Overwrites retried through CommitWithRetry all land, one after the other, and the table
// ends with exactly the last one's file.
func TestCommitWithRetryOverwrites(t *testing.T) {
	const writers = 4
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			root := "retry-overwrites/" + t.Name()
			tbl, err := delta.Create(ctx, st, root, delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}}, delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			appendFiles(t, tbl, addFile("part=a/seed.parquet", "a", 1))
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					mine, err := delta.Open(ctx, st, root, delta.Options{})
					if err != nil {
						errs[w] = err
						return
					}
					_, errs[w] = mine.CommitWithRetry(ctx, 20, func(snap *delta.Snapshot) (*delta.Transaction, error) {
						tx := overwrite(mine, snap, fmt.Sprintf("w%d", w))
						return tx, nil
					})
				}(w)
			}
			wg.Wait()
			for w, err := range errs {
				if err != nil {
					t.Fatalf("writer %d: %v", w, err)
				}
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version() != 1+writers {
				t.Errorf("latest version = %d, want %d", snap.Version(), 1+writers)
			}
			files := snap.Files()
			if len(files) != 1 {
				t.Fatalf("live files = %v, want exactly one", fileNames(files))
			}
			// The surviving file is the one the last commit added.
			last, err := tbl.SnapshotAt(ctx, snap.Version()-1)
			if err != nil {
				t.Fatal(err)
			}
			if len(last.Files()) != 1 || last.Files()[0].Path == files[0].Path {
				t.Errorf("v%d files %v, v%d files %v: each overwrite must replace the previous one", last.Version(), fileNames(last.Files()), snap.Version(), fileNames(files))
			}
		})
	}
}

// Under WriteSerializable (delta.isolationLevel) a blind append that commits first does
// not fail a concurrent rewrite of the same partition; under Serializable it does.
func TestWriteSerializableIgnoresBlindAppends(t *testing.T) {
	for _, level := range []string{"Serializable", "WriteSerializable"} {
		t.Run(level, func(t *testing.T) {
			tbl, st, _ := newTestTable(t, map[string]string{"delta.isolationLevel": level})
			ctx := context.Background()
			appendFiles(t, tbl, addFile("part=a/seed.parquet", "a", 1))
			snap, _ := tbl.Snapshot(ctx)
			del := deletePartition("a")(tbl, snap, "loser")
			appendFiles(t, tbl, addFile("part=a/new.parquet", "a", 1))
			_, err := del.Commit(ctx)
			var ce *delta.ConflictError
			if level == "Serializable" && (!errors.As(err, &ce) || ce.Kind != delta.ConflictConcurrentAppend) {
				t.Errorf("err = %v, want ConcurrentAppend", err)
			}
			if level == "WriteSerializable" && err != nil {
				t.Errorf("err = %v, want the delete to commit", err)
			}
			if level == "WriteSerializable" {
				lines := commitLines(t, st, "warehouse/t/_delta_log/00000000000000000003.json")
				if lines[0]["commitInfo"]["isolationLevel"] != "WriteSerializable" {
					t.Errorf("commitInfo = %v", lines[0]["commitInfo"])
				}
			}
		})
	}
}
