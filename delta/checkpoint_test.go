package delta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// copyStore copies every object under prefix whose key keep accepts into a new mem store.
func copyStore(t testing.TB, src objectstore.Store, prefix string, keep func(key string) bool) *mem.Store {
	t.Helper()
	ctx := context.Background()
	dst := mem.New(mem.Config{})
	infos, err := src.List(ctx, prefix, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if !keep(info.Key) {
			continue
		}
		b := readObject(t, src, info.Key)
		if err := dst.Put(ctx, info.Key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// snapshotFacts is what must agree between two loads of one version.
type snapshotFacts struct {
	Version    int64
	Protocol   delta.Protocol
	Metadata   delta.Metadata
	Files      []delta.Add
	Tombstones []string
	Txn        int64
}

func factsOf(t testing.TB, s *delta.Snapshot) snapshotFacts {
	t.Helper()
	f := snapshotFacts{Version: s.Version(), Protocol: *s.Protocol(), Metadata: *s.Metadata()}
	for _, a := range s.Files() {
		f.Files = append(f.Files, *a)
	}
	for _, r := range s.Tombstones() {
		f.Tombstones = append(f.Tombstones, r.Path)
	}
	f.Txn, _ = s.TxnVersion("app")
	return f
}

func TestCheckpointEveryIntervalMatchesReplay(t *testing.T) {
	tbl, st, _ := newTestTable(t, map[string]string{"delta.checkpointInterval": "3"})
	ctx := context.Background()
	for i := 1; i <= 7; i++ {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
		a := addFile(fmt.Sprintf("part=p%d/f%d.parquet", i%2, i), fmt.Sprintf("p%d", i%2), i)
		a.Tags = map[string]string{"INSERTION_TIME": "1"}
		tx.AddFiles(a)
		tx.SetTxn("app", int64(i))
		if i == 5 { // one delete, so the checkpoint at 6 carries a tombstone
			tx.RemoveAdds(snap.Files()[0])
		}
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tx.CheckpointError(); err != nil {
			t.Fatalf("checkpoint after v%d: %v", i, err)
		}
	}
	for _, v := range []int{3, 6} {
		if _, err := st.Stat(ctx, fmt.Sprintf("warehouse/t/_delta_log/%020d.checkpoint.parquet", v)); err != nil {
			t.Errorf("checkpoint %d: %v", v, err)
		}
	}
	var lc map[string]any
	if err := json.Unmarshal(readObject(t, st, "warehouse/t/_delta_log/_last_checkpoint"), &lc); err != nil {
		t.Fatal(err)
	}
	// Rows: protocol, metaData, txn, 5 live adds, 1 tombstone.
	if lc["version"] != float64(6) || lc["numOfAddFiles"] != float64(5) || lc["size"] != float64(9) || lc["sizeInBytes"] == nil {
		t.Errorf("_last_checkpoint = %v", lc)
	}

	fromCheckpoint, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	noCheckpoints := copyStore(t, st, "warehouse/t/", func(k string) bool { return !strings.Contains(k, "checkpoint") })
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
		if b.CheckpointVersion() != -1 {
			t.Errorf("v%d replay used checkpoint %d", v, b.CheckpointVersion())
		}
		fa, fb := factsOf(t, a), factsOf(t, b)
		if !reflect.DeepEqual(fa, fb) {
			t.Errorf("v%d from checkpoint differs from replay:\n%+v\n%+v", v, fa, fb)
		}
	}
}

func TestLastCheckpointIsOnlyAHint(t *testing.T) {
	build := func(t *testing.T) (*mem.Store, int64) {
		tbl, st, _ := newTestTable(t, map[string]string{"delta.checkpointInterval": "2"})
		for i := 1; i <= 5; i++ {
			appendFiles(t, tbl, addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
		}
		return st, 5
	}
	ctx := context.Background()
	put := func(t *testing.T, st objectstore.Store, key, body string) {
		if err := st.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	const lc = "warehouse/t/_delta_log/_last_checkpoint"
	tests := []struct {
		name   string
		damage func(t *testing.T, st objectstore.Store)
		wantCP int64
	}{
		{"intact", func(*testing.T, objectstore.Store) {}, 4},
		{"corrupt", func(t *testing.T, st objectstore.Store) { put(t, st, lc, "{not json") }, 4},
		{"stale", func(t *testing.T, st objectstore.Store) { put(t, st, lc, `{"version":2,"size":4}`) }, 4},
		{"points past the log", func(t *testing.T, st objectstore.Store) { put(t, st, lc, `{"version":40,"size":4}`) }, 4},
		{"missing", func(t *testing.T, st objectstore.Store) { st.Delete(ctx, lc) }, 4},
		{"checkpoint deleted", func(t *testing.T, st objectstore.Store) {
			st.Delete(ctx, "warehouse/t/_delta_log/00000000000000000004.checkpoint.parquet")
		}, 2},
		{"checkpoint corrupt", func(t *testing.T, st objectstore.Store) {
			put(t, st, "warehouse/t/_delta_log/00000000000000000004.checkpoint.parquet", "PAR1garbage")
		}, 2},
		// A data page whose header says dictionary page: arrow-go's page reader panics.
		{"checkpoint page header corrupt", func(t *testing.T, st objectstore.Store) {
			const key = "warehouse/t/_delta_log/00000000000000000004.checkpoint.parquet"
			rc, err := st.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			pf, err := file.NewParquetReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			cc, err := pf.RowGroup(0).MetaData().ColumnChunk(0)
			pf.Close()
			if err != nil {
				t.Fatal(err)
			}
			at := cc.DataPageOffset()
			if b[at] != 0x15 || b[at+1] != 0x00 {
				t.Fatalf("no data page header at %d: % x", at, b[at:at+2])
			}
			b[at+1] = 0x04 // DATA_PAGE → DICTIONARY_PAGE (thrift compact, zigzag)
			put(t, st, key, string(b))
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, latest := build(t)
			tc.damage(t, st)
			tbl, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version() != latest || len(snap.Files()) != 5 {
				t.Errorf("snapshot v%d with %d files, want v%d with 5", snap.Version(), len(snap.Files()), latest)
			}
			if snap.CheckpointVersion() != tc.wantCP {
				t.Errorf("loaded from checkpoint %d, want %d", snap.CheckpointVersion(), tc.wantCP)
			}
		})
	}
}

// A table whose log was cleaned up to a checkpoint loads from it and names the earliest
// version when asked for an older one.
func TestCleanedLogNamesEarliestVersion(t *testing.T) {
	tbl, st, _ := newTestTable(t, map[string]string{"delta.checkpointInterval": "3"})
	for i := 1; i <= 4; i++ {
		appendFiles(t, tbl, addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
	}
	ctx := context.Background()
	for v := 0; v < 3; v++ {
		st.Delete(ctx, fmt.Sprintf("warehouse/t/_delta_log/%020d.json", v))
	}
	re, err := delta.Open(ctx, st, "warehouse/t", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := re.Snapshot(ctx); s.Version() != 4 || len(s.Files()) != 4 {
		t.Errorf("latest = v%d with %d files", s.Version(), len(s.Files()))
	}
	_, err = re.SnapshotAt(ctx, 1)
	if !errors.Is(err, delta.ErrVersionCleaned) || !strings.Contains(err.Error(), "earliest available version is 3") {
		t.Fatalf("SnapshotAt(1) error = %v, want ErrVersionCleaned naming version 3", err)
	}
}

// A checkpoint that cannot be written does not fail the commit that triggered it; the
// table stays readable and the next interval writes one.
func TestCheckpointFailureKeepsCommit(t *testing.T) {
	c := newTestClock()
	fst := faultstore.New(mem.New(mem.Config{Now: c.Now}))
	ctx := context.Background()
	tbl, err := delta.Create(ctx, fst, "t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
		Properties: map[string]string{"delta.checkpointInterval": "5"}}, testOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		appendFiles(t, tbl, addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
	}
	fst.FailWritesUnder("t/_delta_log/00000000000000000005.checkpoint")
	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	tx.AddFiles(addFile("part=a/f5.parquet", "a", 1))
	v, err := tx.Commit(ctx)
	if err != nil || v != 5 {
		t.Fatalf("commit = %d, %v; want version 5 committed", v, err)
	}
	if !errors.Is(tx.CheckpointError(), faultstore.ErrInjected) {
		t.Errorf("CheckpointError = %v, want the injected failure", tx.CheckpointError())
	}
	fst.Heal()
	re, err := delta.Open(ctx, fst, "t", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := re.Snapshot(ctx)
	if s.Version() != 5 || len(s.Files()) != 5 || s.CheckpointVersion() != -1 {
		t.Errorf("after failed checkpoint: v%d, %d files, checkpoint %d", s.Version(), len(s.Files()), s.CheckpointVersion())
	}
	for i := 6; i <= 10; i++ {
		appendFiles(t, tbl, addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
	}
	s, _ = re.Snapshot(ctx)
	if s.Version() != 10 || len(s.Files()) != 10 {
		t.Errorf("v%d with %d files, want v10 with 10", s.Version(), len(s.Files()))
	}
	if _, err := fst.Stat(ctx, "t/_delta_log/00000000000000000010.checkpoint.parquet"); err != nil {
		t.Errorf("checkpoint 10: %v", err)
	}
}

// A writer that fails at any write (a crash) leaves a table that loads, at the last
// version whose commit file was written, with exactly that version's files.
func TestFailureAtEveryWriteLeavesConsistentTable(t *testing.T) {
	run := func(fst *faultstore.Store) int {
		c := newTestClock()
		ctx := context.Background()
		tbl, err := delta.Create(ctx, fst, "t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
			Properties: map[string]string{"delta.checkpointInterval": "2"}}, testOptions(c))
		if err != nil {
			return 0
		}
		committed := 0
		for i := 1; i <= 5; i++ {
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				break
			}
			tx := tbl.NewTransaction(snap, delta.TxOptions{})
			if i == 4 {
				tx.ReadWholeTable()
				tx.RemoveAdds(snap.Files()...)
			}
			tx.AddFiles(addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
			if _, err := tx.Commit(ctx); err != nil {
				break
			}
			committed = i
		}
		return committed
	}
	probe := faultstore.New(mem.New(mem.Config{}))
	probe.FailNth(1<<30, false, true)
	run(probe)
	writes := probe.Count()
	wantFiles := []int{0, 1, 2, 3, 1, 2}
	for n := 1; n <= writes; n++ {
		inner := mem.New(mem.Config{})
		fst := faultstore.New(inner)
		fst.FailNth(n, true, true)
		committed := run(fst)
		tbl, err := delta.Open(context.Background(), inner, "t", delta.Options{})
		if n == 1 {
			if err == nil {
				t.Errorf("failing the first write left a table")
			}
			continue
		}
		if err != nil {
			t.Fatalf("failure at write %d: Open: %v", n, err)
		}
		s, _ := tbl.Snapshot(context.Background())
		if s.Version() != int64(committed) || len(s.Files()) != wantFiles[committed] {
			t.Errorf("failure at write %d: v%d with %d files; the writer saw %d commits (want %d files)", n, s.Version(), len(s.Files()), committed, wantFiles[committed])
		}
	}
}
