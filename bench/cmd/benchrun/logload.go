package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// logload is the snapshot load case: a table whose log lists N files (one commit of N
// adds, then a checkpoint), loaded by each engine from local disk: the latest snapshot
// with its file list. Two layouts: delta.checkpointPolicy=v2 (our writer's V2
// checkpoint, its file actions in sidecars) and a classic checkpoint.
func (d *driver) logload(ctx context.Context) error {
	dir := filepath.Join(d.work, "logload")
	n := d.cfg.logloadFiles
	var cr caseRuns
	type pair struct{ ours, drs int }
	var idx []pair
	layouts := []struct{ name, policy string }{{"v2 checkpoint with sidecars", delta.CheckpointPolicyV2}, {"classic checkpoint", "classic"}}
	for _, l := range layouts {
		tdir := filepath.Join(dir, l.policy)
		d.logf("logload: generating a table of %d files (%s)", n, l.name)
		// In a child: a driver grown by the generation would pass its size on to every
		// child's peak RSS (a forked child's starts at its parent's).
		if err := d.setup(ctx, "logload-setup", tdir, strconv.Itoa(n), l.policy); err != nil {
			return err
		}
		idx = append(idx, pair{
			cr.add(d.oursRuns("ours: Open (latest snapshot), "+l.name, "logload-ours", tdir)),
			cr.add(d.peerRuns("delta-rs DeltaTable + file_uris, "+l.name, "logload-deltars", tdir)),
		})
	}
	c := fmt.Sprintf("snapshot load of a %s-file table", commas(n))
	all := d.alternate(ctx, c, noPrep, cr.runs)
	for _, p := range idx {
		ours, drs := rowOf(all, p.ours), rowOf(all, p.drs)
		relate(ours, ours, drs)
	}
	return os.RemoveAll(dir)
}

// genWideLog writes a table with checkpoint policy policy whose version 1 adds n files
// (no data: only the log is read) with stats, and a checkpoint of version 1.
func genWideLog(ctx context.Context, dir string, n int, policy string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		return err
	}
	defer st.Close()
	sch, err := delta.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"day","type":"date","nullable":true,"metadata":{}}]}`)
	if err != nil {
		return err
	}
	props := map[string]string{delta.PropCheckpointPolicy: policy, delta.PropCheckpointInterval: "1000"}
	tbl, err := delta.Create(ctx, st, "", delta.CreateOptions{Schema: sch, PartitionColumns: []string{"day"}, Properties: props}, delta.Options{UserName: "bench"})
	if err != nil {
		return err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	adds := make([]*delta.Add, n)
	for i := range adds {
		day := base.AddDate(0, 0, i/1000).Format("2006-01-02")
		adds[i] = &delta.Add{
			Path:            fmt.Sprintf("day=%s/part-%06d-8f0c5a1e-6f8d-4b7e-9a51-3d2f1c0b9e7a.c000.snappy.parquet", day, i),
			PartitionValues: map[string]*string{"day": &day}, Size: 4096 + int64(i%997), ModificationTime: base.UnixMilli() + int64(i), DataChange: true,
			Stats: fmt.Sprintf(`{"numRecords":1000,"minValues":{"id":%d},"maxValues":{"id":%d},"nullCount":{"id":0}}`, i*1000, i*1000+999),
		}
	}
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		return err
	}
	snap, err = tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	return tbl.Checkpoint(ctx, snap)
}

// logloadSetup writes the case's table: args dir files policy.
func logloadSetup(ctx context.Context, args []string) (measurement, error) {
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return measurement{}, err
	}
	return measurement{Rows: int64(n)}, genWideLog(ctx, args[0], n, args[2])
}

// logloadOurs opens the table in args[0] and lists its live files.
func logloadOurs(ctx context.Context, args []string) (measurement, error) {
	s := startStep()
	tbl, _, err := openTableDir(ctx, args[0])
	if err != nil {
		return measurement{}, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return measurement{}, err
	}
	files := len(snap.Files())
	secs, cpu := s.since()
	if snap.CheckpointVersion() != 1 {
		return measurement{}, fmt.Errorf("the snapshot came from checkpoint %d, not 1", snap.CheckpointVersion())
	}
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: int64(files), Note: "files listed: " + strconv.Itoa(files)}, nil
}
