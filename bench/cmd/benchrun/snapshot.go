package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// The snapshot case: a daily full extract of N rows (CSV) loaded with the ingest stage in
// snapshot mode into the N-row table the previous extract made. Against the previous
// extract the new one has, by row index i:
//
//	i%10 == 3      a changed city (10%)
//	i%200 == 7     missing: the key was deleted (0.5%)
//	N .. N+N/100   new keys (1%)
//	otherwise      the same values
//
// DuckDB does the same diff in SQL (a FULL OUTER JOIN of the previous table's Parquet and
// the new CSV on the key, IS DISTINCT FROM on every column) and writes the new table with
// each row's change to Parquet.

// snapshotTable is the extracts' table.
func snapshotTable() (*jobs.Table, error) {
	sch, err := delta.ParseSchema(`{"type":"struct","fields":[
 {"name":"account_id","type":"string","nullable":false,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"city","type":"string","nullable":true,"metadata":{}},
 {"name":"score","type":"long","nullable":true,"metadata":{}},
 {"name":"balance","type":"decimal(12,2)","nullable":true,"metadata":{}},
 {"name":"source_file","type":"string","nullable":true,"metadata":{}},
 {"name":"load_timestamp","type":"timestamp","nullable":true,"metadata":{}}]}`)
	if err != nil {
		return nil, err
	}
	return &jobs.Table{Name: "staging.accounts", Path: "staging/accounts", Schema: sch,
		Properties: delta.ChangeDataFeedProperties()}, nil
}

func snapshotStage(source string, budget int64) *jobs.Ingest {
	cfg := &jobs.IngestConfig{Source: source, Target: "staging.accounts", Mode: "snapshot", Keys: []string{"account_id"}}
	setIngestBudget(cfg, budget)
	return jobs.NewIngest("load_extract", cfg)
}

// genExtract writes extract day (1 or 2) of n keys as one CSV file.
func genExtract(path string, n, day int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("account_id,name,city,score,balance\n")
	total := n
	if day == 2 {
		total = n + n/100
	}
	var b []byte
	for i := range total {
		if day == 2 && i < n && i%200 == 7 {
			continue
		}
		city := i % 1000
		if day == 2 && i%10 == 3 {
			city++
		}
		b = append(b[:0], 'A')
		b = appendPadded(b, int64(i), 9)
		b = append(b, ",account "...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ",city-"...)
		b = strconv.AppendInt(b, int64(city), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(i%977), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(i%100_000), 10)
		b = append(b, ".25\n"...)
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// snapshotSetup writes both extracts and loads the first (not timed): args dir n.
func snapshotSetup(ctx context.Context, args []string) (measurement, error) {
	dir := args[0]
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return measurement{}, err
	}
	for day := 1; day <= 2; day++ {
		if err := genExtract(filepath.Join(dir, fmt.Sprintf("day%d", day), "accounts.csv"), n, day); err != nil {
			return measurement{}, err
		}
	}
	decl, err := snapshotTable()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(dir, "wh")})
	if err != nil {
		return measurement{}, err
	}
	res, err := snapshotStage(filepath.Join(dir, "day1")+"/*.csv", 0).Run(ctx, newEnv(wh, decl))
	if err != nil {
		return measurement{}, fmt.Errorf("first extract: %w", err)
	}
	return measurement{Seconds: res.Duration.Seconds(), Rows: res.RowsWritten, Note: "first extract loaded"}, nil
}

// snapshotOurs loads the second extract in snapshot mode: args dir, and "dv" to turn the
// table's deletion vectors on first (not timed), so that the changed rows' files are
// kept and their old rows marked deleted instead of rewritten, or "budget=<size>" for
// the stage's memory budget.
func snapshotOurs(ctx context.Context, args []string) (measurement, error) {
	dir := args[0]
	var budget int64
	if len(args) > 1 && strings.HasPrefix(args[1], "budget=") {
		var err error
		if budget, err = parseBudget(strings.TrimPrefix(args[1], "budget=")); err != nil {
			return measurement{}, err
		}
	}
	decl, err := snapshotTable()
	if err != nil {
		return measurement{}, err
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(dir, "wh")})
	if err != nil {
		return measurement{}, err
	}
	if len(args) > 1 && args[1] == "dv" {
		if err := enableDeletionVectors(ctx, wh, decl.Path); err != nil {
			return measurement{}, err
		}
	}
	st := startStep()
	res, err := snapshotStage(filepath.Join(dir, "day2")+"/*.csv", budget).Run(ctx, newEnv(wh, decl))
	if err != nil {
		return measurement{}, err
	}
	secs, cpu := st.since()
	note := ""
	if len(res.Notes) > 0 {
		note = res.Notes[len(res.Notes)-1]
	}
	return measurement{Seconds: secs, CPUSeconds: cpu, Rows: res.RowsRead, BytesOut: res.BytesWritten, Note: note}, nil
}

func (d *driver) snapshot(ctx context.Context) error {
	dir := filepath.Join(d.work, "snapshot")
	n := d.cfg.snapshotRows
	if err := d.setup(ctx, "snapshot-setup", dir, strconv.Itoa(n)); err != nil {
		return err
	}
	c := fmt.Sprintf("snapshot ingest of a %s-row extract into a %s-row table", commas(n-n/200+n/100), commas(n))
	wh, setup := filepath.Join(dir, "wh"), filepath.Join(dir, "wh.setup")
	if err := copyDir(wh, setup); err != nil {
		return err
	}
	restore := func() error {
		if err := os.RemoveAll(wh); err != nil {
			return err
		}
		return copyDir(setup, wh)
	}
	// DuckDB reads the previous table as plain Parquet: the table's data files. The
	// engines' runs are taken in turn (each from the table as set up), so that the host
	// slowing down or speeding up during the case weighs on each alike.
	var runs []engineRun
	if !d.cfg.oursOnly {
		runs = append(runs, engineRun{engine: "DuckDB FULL OUTER JOIN → Parquet", argv: d.peerArgv("snapshot-duckdb", dir)})
	}
	runs = append(runs, d.oursRuns("ours: ingest stage, mode snapshot", "snapshot-ours", dir)...)
	runs = append(runs, d.oursRuns("ours: ingest stage, mode snapshot, deletion vectors", "snapshot-ours", dir, "dv")...)
	if b := d.cfg.snapshotBudget; b != "" {
		// Over a budget too small for its keys: in passes over spill files (and the
		// baseline build's, which must know budgets).
		runs = append(runs, d.oursRuns("ours: ingest stage, mode snapshot, memory budget "+b, "snapshot-ours", dir, "budget="+b)...)
	}
	rows := d.alternate(ctx, c, restore, runs)
	if !d.cfg.oursOnly {
		relate(rows[0], rows...)
	}
	return os.RemoveAll(dir)
}
