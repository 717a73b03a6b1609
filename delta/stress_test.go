package delta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Writers race with a mix of blind appends, partition overwrites and compactions (the
// last two through CommitWithRetry). Afterwards every version must be a valid step from
// the one before: each removed file was live, each added file new, compactions keep the
// partition's rows. That is what "never a lost or doubled file" means.
func TestConcurrentMixedWorkload(t *testing.T) {
	const writers, ops = 6, 25
	parts := []string{"a", "b", "c"}
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			root := "mixed/" + t.Name()
			if _, err := delta.Create(ctx, st, root, delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}}, delta.Options{}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					rng := rand.New(rand.NewSource(int64(w)))
					tbl, err := delta.Open(ctx, st, root, delta.Options{})
					if err != nil {
						errs <- err
						return
					}
					for i := 0; i < ops; i++ {
						part := parts[rng.Intn(len(parts))]
						name := fmt.Sprintf("part=%s/w%d-%03d.parquet", part, w, i)
						pred := delta.PartitionEquals(map[string]*string{"part": strp(part)})
						var build func(snap *delta.Snapshot) (*delta.Transaction, error)
						switch rng.Intn(3) {
						case 0: // blind append of 1..3 rows
							rows := 1 + rng.Intn(3)
							build = func(snap *delta.Snapshot) (*delta.Transaction, error) {
								tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
								tx.AddFiles(addFile(name, part, rows))
								return tx, nil
							}
						case 1: // replace the partition with one file
							build = func(snap *delta.Snapshot) (*delta.Transaction, error) {
								tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE", OperationParameters: map[string]any{"mode": "Overwrite"}})
								tx.ReadPartitions(pred)
								for _, a := range snap.Files() {
									if pred(a.PartitionValues) {
										tx.RemoveAdds(a)
									}
								}
								tx.AddFiles(addFile(name, part, 5))
								return tx, nil
							}
						default: // compact the partition (dataChange=false, same rows)
							build = func(snap *delta.Snapshot) (*delta.Transaction, error) {
								tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "OPTIMIZE"})
								tx.ReadPartitions(pred)
								total := 0
								for _, a := range snap.Files() {
									if pred(a.PartitionValues) {
										total += recordsOf(a.Stats)
										sz := a.Size
										tx.RemoveFiles(&delta.Remove{Path: a.Path, DataChange: false, Size: &sz})
									}
								}
								c := addFile(name, part, total)
								c.DataChange = false
								tx.AddFiles(c)
								return tx, nil
							}
						}
						if _, err := tbl.CommitWithRetry(ctx, 50, build); err != nil {
							errs <- fmt.Errorf("writer %d op %d: %w", w, i, err)
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
			verifySteps(t, st, root)
		})
	}
}

func recordsOf(stats string) int {
	var v struct{ NumRecords int }
	_ = json.Unmarshal([]byte(stats), &v)
	return v.NumRecords
}

// verifySteps replays the log commit by commit and checks every step: removed files were
// live, added files are new, OPTIMIZE keeps the partition's rows; the result equals the
// latest snapshot.
func verifySteps(t *testing.T, st objectstore.Store, root string) {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.Open(ctx, st, root, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]int{} // path -> rows
	for v := int64(1); v <= latest.Version(); v++ {
		b := readObject(t, st, fmt.Sprintf("%s/_delta_log/%020d.json", root, v))
		acts, err := delta.DecodeActions(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		op, removedRows, addedRows := "", 0, 0
		for _, a := range acts {
			switch {
			case a.CommitInfo != nil:
				op = a.CommitInfo.Operation
			case a.Remove != nil:
				rows, ok := live[a.Remove.Path]
				if !ok {
					t.Errorf("v%d removes %s, which is not live: a lost update", v, a.Remove.Path)
				}
				removedRows += rows
				delete(live, a.Remove.Path)
			case a.Add != nil:
				if _, ok := live[a.Add.Path]; ok {
					t.Errorf("v%d adds %s, which is already live: a doubled file", v, a.Add.Path)
				}
				live[a.Add.Path] = recordsOf(a.Add.Stats)
				addedRows += live[a.Add.Path]
			}
		}
		if op == "OPTIMIZE" && removedRows != addedRows {
			t.Errorf("v%d: compaction removed %d rows and added %d", v, removedRows, addedRows)
		}
	}
	if len(live) != len(latest.Files()) {
		t.Errorf("replay has %d live files, the snapshot %d", len(live), len(latest.Files()))
	}
	for _, a := range latest.Files() {
		if _, ok := live[a.Path]; !ok {
			t.Errorf("snapshot file %s is not live in the replay", a.Path)
		}
	}
	t.Logf("%d versions, %d live files", latest.Version(), len(live))
}
