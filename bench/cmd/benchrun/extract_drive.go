package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// extract runs the case at each size of -extract-rows: the first load of the dimension
// by ours (and the -baseline build's where it can, -baseline-max-rows), then the day's
// extract merged, its runs taken in turn from the same warehouse: ours, the baseline's,
// and DuckDB doing the same SCD2 in SQL over the dimension's and the extract's Parquet.
func (d *driver) extract(ctx context.Context) error {
	for _, n := range d.cfg.extractRows {
		dir := filepath.Join(d.work, "extract-"+strconv.Itoa(n))
		if err := d.setup(ctx, "extract-setup", dir, strconv.Itoa(n)); err != nil {
			return err
		}
		wh, day1, day2 := filepath.Join(dir, "wh"), filepath.Join(dir, "wh.day1"), filepath.Join(dir, "wh.day2")
		if err := os.Rename(wh, day1); err != nil {
			return err
		}
		baseline := d.cfg.baseline != "" && n <= d.cfg.baselineMaxRows
		budget := []string{}
		label := "ours: scd2_merge stage"
		if d.cfg.extractBudget != "" {
			budget = []string{d.cfg.extractBudget}
			label += ", memory budget " + d.cfg.extractBudget
		}
		engines := []struct{ name, bin string }{{"ours", d.self}}
		if baseline {
			engines = append(engines, struct{ name, bin string }{d.cfg.baselineName, d.cfg.baseline})
		}
		// The first load: each engine on its own copy of day 1; ours' dimension is the
		// one the day's extract is merged into.
		for _, e := range engines {
			if err := copyDir(day1, wh); err != nil {
				return err
			}
			args := []string{e.bin, "-worker", "extract-merge", dir, strconv.Itoa(n)}
			if e.bin == d.self {
				args = append(args, budget...)
			}
			first := d.child(ctx, fmt.Sprintf("extract: first load of %s keys", commas(n)), e.name+strings.TrimPrefix(label, "ours"), nil, args)
			if e.bin == d.self && first.Error == "" {
				if err := os.Rename(wh, day2); err != nil {
					return err
				}
			} else if err := os.RemoveAll(wh); err != nil {
				return err
			}
		}
		if _, err := os.Stat(day2); err != nil {
			os.RemoveAll(dir)
			continue // (our first load failed: its row says why)
		}
		// The day's extract appended to staging: the files it adds are DuckDB's input.
		before, err := parquetFiles(filepath.Join(day2, "staging", "customers"))
		if err != nil {
			return err
		}
		if err := os.Rename(day2, wh); err != nil {
			return err
		}
		if err := d.setup(ctx, "extract-setup", dir, strconv.Itoa(n), "day2"); err != nil {
			return err
		}
		after, err := parquetFiles(filepath.Join(wh, "staging", "customers"))
		if err != nil {
			return err
		}
		var extract []string
		for _, f := range after {
			if !slices.Contains(before, filepath.Join(day2, "staging", "customers", filepath.Base(f))) {
				extract = append(extract, filepath.Join(day2, "staging", "customers", filepath.Base(f)))
			}
		}
		if err := os.Rename(wh, day2); err != nil {
			return err
		}
		restore := func() error {
			if err := os.RemoveAll(wh); err != nil {
				return err
			}
			return copyDir(day2, wh)
		}
		c := fmt.Sprintf("extract: batch of %s rows into a %s-row dimension", commas(n+n/100), commas(n))
		var cr caseRuns
		cr.add(withPrep(restore, []engineRun{{engine: label, argv: append([]string{d.self, "-worker", "extract-merge", dir, strconv.Itoa(n + n/100)}, budget...)}}))
		if baseline {
			cr.add(withPrep(restore, []engineRun{{engine: d.cfg.baselineName + ": scd2_merge stage", baseline: true,
				argv: []string{d.cfg.baseline, "-worker", "extract-merge", dir, strconv.Itoa(n + n/100)}}}))
		}
		iDuck := cr.add(withPrep(noPrep, d.peerRuns("DuckDB SQL over Parquet", append([]string{"extract-duckdb", dir, filepath.Join(day2, "sales", "customer", "*.parquet")}, extract...)...)))
		all := d.alternate(ctx, c, restore, cr.runs)
		relate(rowOf(all, iDuck), all...)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// parquetFiles lists the Parquet files directly in dir.
func parquetFiles(dir string) ([]string, error) {
	return filepath.Glob(filepath.Join(dir, "*.parquet"))
}
