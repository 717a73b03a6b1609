package delta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

const benchCommits = 10000

var (
	benchLogOnce sync.Once
	benchLog     *mem.Store
	benchLogErr  error
)

// buildBenchLog writes, into a mem store, a table of benchCommits commits after the
// CREATE, each appending one file, with a classic checkpoint every 10 versions (the
// default interval) and _last_checkpoint, as our commits would leave it. It builds the
// log directly, keeping the state incrementally, because committing 10,000 times
// through transactions would dominate the benchmark's setup.
func buildBenchLog() (*mem.Store, error) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := mem.New(mem.Config{})
	t, err := newTable(st, "", Options{Now: func() time.Time { return base }, UserName: "bench"})
	if err != nil {
		return nil, err
	}
	state := newTableState()
	schema := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`
	created := base.UnixMilli()
	for v := int64(0); v <= benchCommits; v++ {
		ts := base.Add(time.Duration(v) * time.Second).UnixMilli()
		blind := true
		acts := []Action{{CommitInfo: &CommitInfo{Timestamp: ts, Operation: "WRITE", IsBlindAppend: &blind,
			OperationParameters: map[string]any{"mode": "Append"}, EngineInfo: "orchestrator/bench"}}}
		if v == 0 {
			acts = append(acts,
				Action{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
				Action{MetaData: &Metadata{ID: "bench", Format: Format{Provider: "parquet", Options: map[string]string{}},
					SchemaString: schema, PartitionColumns: []string{}, Configuration: map[string]string{}, CreatedTime: &created}})
		} else {
			acts = append(acts, Action{Add: &Add{Path: fmt.Sprintf("part-%05d-0b6a1c9e.snappy.parquet", v),
				PartitionValues: map[string]*string{}, Size: 512, ModificationTime: ts, DataChange: true,
				Stats: fmt.Sprintf(`{"numRecords":10,"minValues":{"id":%d},"maxValues":{"id":%d},"nullCount":{"id":0}}`, v*10, v*10+9)}})
		}
		body, err := EncodeActions(acts)
		if err != nil {
			return nil, err
		}
		if err := st.PutIfAbsent(ctx, t.commitKey(v), bytes.NewReader(body), int64(len(body))); err != nil {
			return nil, err
		}
		for i := range acts {
			state.apply(&acts[i])
		}
		if v > 0 && v%DefaultCheckpointInterval == 0 {
			snap := &Snapshot{table: t, version: v, state: state}
			if err := t.writeCheckpoint(ctx, snap); err != nil {
				return nil, err
			}
		}
	}
	return st, nil
}

// copyToDir writes every object of src as a file under dir (plain writes: the fs store's
// fsyncs would make the setup slow) and opens dir as an fs store.
func copyToDir(b *testing.B, src objectstore.Store, dir string) *fs.Store {
	ctx := context.Background()
	infos, err := src.List(ctx, "", "")
	if err != nil {
		b.Fatal(err)
	}
	for _, info := range infos {
		rc, err := src.Get(ctx, info.Key)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			b.Fatal(err)
		}
		name := filepath.Join(dir, filepath.FromSlash(info.Key))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	dst, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	return dst
}

// BenchmarkSnapshotLoad10000Commits opens a table of 10,000 commits with checkpoints
// every 10 on local disk and loads its latest snapshot (Open does the load): read
// _last_checkpoint, list the log from the checkpoint, read the checkpoint (10,000 adds)
// and the commits after it.
func BenchmarkSnapshotLoad10000Commits(b *testing.B) {
	benchLogOnce.Do(func() { benchLog, benchLogErr = buildBenchLog() })
	if benchLogErr != nil {
		b.Fatal(benchLogErr)
	}
	st := copyToDir(b, benchLog, b.TempDir())
	defer st.Close()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tbl, err := Open(ctx, st, "", Options{})
		if err != nil {
			b.Fatal(err)
		}
		snap, _ := tbl.Snapshot(ctx)
		if snap.Version() != benchCommits || len(snap.Files()) != benchCommits {
			b.Fatalf("snapshot v%d with %d files", snap.Version(), len(snap.Files()))
		}
	}
}

// BenchmarkSnapshotLoadFullListing is the same load without the _last_checkpoint hint:
// the whole log is listed.
func BenchmarkSnapshotLoadFullListing(b *testing.B) {
	benchLogOnce.Do(func() { benchLog, benchLogErr = buildBenchLog() })
	if benchLogErr != nil {
		b.Fatal(benchLogErr)
	}
	st := copyToDir(b, benchLog, b.TempDir())
	defer st.Close()
	ctx := context.Background()
	if err := st.Delete(ctx, "_delta_log/_last_checkpoint"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Open(ctx, st, "", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

const benchV2Files = 100_000

// buildWideLog writes, into a mem store, a table whose version 1 adds benchV2Files files
// (with stats) and a checkpoint of version 1 in the given layout: "classic" (V1 spec, a
// table without the v2Checkpoint feature), "v2-inline" (a classic-named V2 spec
// checkpoint), or "v2-sidecars-N" (UUID-named, N file actions per sidecar).
func buildWideLog(layout string) (*mem.Store, error) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := mem.New(mem.Config{})
	t, err := newTable(st, "", Options{Now: func() time.Time { return base }, UserName: "bench"})
	if err != nil {
		return nil, err
	}
	proto := &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	config := map[string]string{}
	if layout != "classic" {
		proto = &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{FeatureV2Checkpoint},
			WriterFeatures: []string{FeatureAppendOnly, FeatureInvariants, FeatureV2Checkpoint}}
		config[PropCheckpointPolicy] = CheckpointPolicyV2
	}
	created := base.UnixMilli()
	schema := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"day","type":"date","nullable":true,"metadata":{}}]}`
	commits := [][]Action{
		{{CommitInfo: &CommitInfo{Timestamp: created, Operation: "CREATE TABLE"}}, {Protocol: proto},
			{MetaData: &Metadata{ID: "bench", Format: Format{Provider: "parquet", Options: map[string]string{}},
				SchemaString: schema, PartitionColumns: []string{"day"}, Configuration: config, CreatedTime: &created}}},
		{{CommitInfo: &CommitInfo{Timestamp: created + 1000, Operation: "WRITE"}}},
	}
	for i := 0; i < benchV2Files; i++ {
		day := base.AddDate(0, 0, i/1000).Format("2006-01-02")
		commits[1] = append(commits[1], Action{Add: &Add{
			Path:            fmt.Sprintf("day=%s/part-%05d-8f0c5a1e-6f8d-4b7e-9a51-3d2f1c0b9e7a.c000.snappy.parquet", day, i),
			PartitionValues: map[string]*string{"day": &day}, Size: 4096 + int64(i%997), ModificationTime: created + int64(i), DataChange: true,
			Stats: fmt.Sprintf(`{"numRecords":1000,"minValues":{"id":%d},"maxValues":{"id":%d},"nullCount":{"id":0}}`, i*1000, i*1000+999)}})
	}
	state := newTableState()
	for v, acts := range commits {
		body, err := EncodeActions(acts)
		if err != nil {
			return nil, err
		}
		if err := st.PutIfAbsent(ctx, t.commitKey(int64(v)), bytes.NewReader(body), int64(len(body))); err != nil {
			return nil, err
		}
		for i := range acts {
			state.apply(&acts[i])
		}
	}
	snap := &Snapshot{table: t, version: 1, state: state}
	var per int
	switch {
	case layout == "classic":
		return st, t.writeCheckpoint(ctx, snap)
	case layout == "v2-inline":
		per = 0
	default:
		if _, err := fmt.Sscanf(layout, "v2-sidecars-%d", &per); err != nil {
			return nil, fmt.Errorf("layout %q: %w", layout, err)
		}
	}
	return st, t.writeV2Checkpoint(ctx, snap, per)
}

// BenchmarkSnapshotLoadV2Checkpoint loads, from local disk, the latest snapshot of a
// table of 100,000 files from its checkpoint in each layout a table may have: the
// layout V2 tables get is chosen by it (v2SidecarActions).
func BenchmarkSnapshotLoadV2Checkpoint(b *testing.B) {
	for _, layout := range []string{"classic", "v2-inline", "v2-sidecars-10000", "v2-sidecars-25000", "v2-sidecars-50000"} {
		b.Run(layout, func(b *testing.B) {
			src, err := buildWideLog(layout)
			if err != nil {
				b.Fatal(err)
			}
			st := copyToDir(b, src, b.TempDir())
			defer st.Close()
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tbl, err := Open(ctx, st, "", Options{})
				if err != nil {
					b.Fatal(err)
				}
				snap, _ := tbl.Snapshot(ctx)
				if snap.CheckpointVersion() != 1 || len(snap.Files()) != benchV2Files {
					b.Fatalf("snapshot from checkpoint %d with %d files", snap.CheckpointVersion(), len(snap.Files()))
				}
			}
		})
	}
}
