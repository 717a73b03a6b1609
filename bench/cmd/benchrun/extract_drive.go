package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// extract runs the case at each size of -extract-rows: ours, and the -baseline build's
// where it can (-baseline-max-rows).
func (d *driver) extract(ctx context.Context) error {
	for _, n := range d.cfg.extractRows {
		dir := filepath.Join(d.work, "extract-"+strconv.Itoa(n))
		if err := d.setup(ctx, "extract-setup", dir, strconv.Itoa(n)); err != nil {
			return err
		}
		day1 := filepath.Join(dir, "wh.day1")
		if err := os.Rename(filepath.Join(dir, "wh"), day1); err != nil {
			return err
		}
		engines := []struct{ name, bin string }{{"ours", d.self}}
		if d.cfg.baseline != "" && n <= d.cfg.baselineMaxRows {
			engines = append(engines, struct{ name, bin string }{d.cfg.baselineName, d.cfg.baseline})
		}
		for _, e := range engines {
			wh := filepath.Join(dir, "wh")
			if err := copyDir(day1, wh); err != nil {
				return err
			}
			budget := []string{}
			if e.bin == d.self && d.cfg.extractBudget != "" {
				budget = []string{d.cfg.extractBudget}
			}
			label := e.name + ": scd2_merge stage"
			if len(budget) > 0 {
				label += ", memory budget " + budget[0]
			}
			first := d.child(ctx, fmt.Sprintf("extract: first load of %s keys", commas(n)), label, nil,
				append([]string{e.bin, "-worker", "extract-merge", dir, strconv.Itoa(n)}, budget...))
			if first.Error != "" {
				os.RemoveAll(wh)
				continue
			}
			if err := d.setup(ctx, "extract-setup", dir, strconv.Itoa(n), "day2"); err != nil {
				return err
			}
			d.child(ctx, fmt.Sprintf("extract: batch of %s rows into a %s-row dimension", commas(n+n/100), commas(n)), label, nil,
				append([]string{e.bin, "-worker", "extract-merge", dir, strconv.Itoa(n + n/100)}, budget...))
			if err := os.RemoveAll(wh); err != nil {
				return err
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}
