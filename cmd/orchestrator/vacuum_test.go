package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVacuum removes the file that the overwrite of version 2 replaced, with the clock
// at testNow (more than 7 days after it).
func TestVacuum(t *testing.T) {
	dir := makeOrdersTable(t)
	before, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(before) != 2 {
		t.Fatalf("fixture has %d data files (%v), want 2", len(before), err)
	}
	parquet := regexp.MustCompile(`part-[0-9a-f-]+-c\d+(\.[a-z]+)*\.parquet`)
	scrub := func(s string) string {
		return parquet.ReplaceAllString(strings.ReplaceAll(s, filepath.Dir(dir), "$TMP"), "<data file>")
	}
	runCases(t, []cliCase{
		{"vacuum_dry_run", []string{"table", "vacuum", dir, "--dry-run"}, 0},
		{"vacuum_too_short", []string{"table", "vacuum", dir, "--retain", "1h"}, 1},
		{"usage_vacuum_bad_retain", []string{"table", "vacuum", dir, "--retain", "a week"}, 2},
	}, scrub)
	after, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if len(after) != 2 {
		t.Fatalf("a dry run deleted files: %d left, want 2", len(after))
	}

	runCases(t, []cliCase{{"vacuum", []string{"table", "vacuum", dir, "--retain", "7d"}, 0}}, scrub)
	after, _ = filepath.Glob(filepath.Join(dir, "*.parquet"))
	if len(after) != 1 {
		t.Errorf("after vacuum %d data files, want 1 (the live one)", len(after))
	}
	if r := runCLI(t, "table", "show", dir, "--format", "csv"); r.code != 0 || strings.Count(r.stdout, "\n") != 5 {
		t.Errorf("show after vacuum: exit %d\n%s%s\nwant the 4 live rows", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "table", "show", dir, "--version", "1"); r.code != 1 {
		t.Errorf("show --version 1 after vacuum: exit %d, want 1 (its file is gone)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "table", "history", dir, "--limit", "2", "--format", "csv"); !strings.Contains(r.stdout, "VACUUM END") || !strings.Contains(r.stdout, "VACUUM START") {
		t.Errorf("history after vacuum:\n%s\nwant VACUUM START and VACUUM END", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "_delta_log")); err != nil {
		t.Errorf("vacuum touched the log: %v", err)
	}
}

// TestVacuumKeepsConsumers vacuums, by its declared name, a table whose change feed a
// capture_history stage reads and has not read yet: the file that stage still needs is
// kept (and named in the summary); --force deletes it.
func TestVacuumKeepsConsumers(t *testing.T) {
	pipeline, warehouse := inWarehouse(t, makeOrdersTable(t), "capture.yaml")
	parquet := regexp.MustCompile(`part-[0-9a-f-]+-c\d+(\.[a-z]+)*\.parquet`)
	scrub := func(s string) string {
		return parquet.ReplaceAllString(scrubDir(warehouse, "$TMP")(s), "<data file>")
	}
	runCases(t, []cliCase{
		{"vacuum_consumer_kept", []string{"table", "vacuum", "bronze.orders", "--pipeline", pipeline}, 0},
	}, scrub)
	files, _ := filepath.Glob(filepath.Join(warehouse, "bronze", "orders", "*.parquet"))
	if len(files) != 2 {
		t.Errorf("%d data files left, want both", len(files))
	}
	runCases(t, []cliCase{
		{"vacuum_consumer_forced", []string{"table", "vacuum", "bronze.orders", "--pipeline", pipeline, "--force"}, 0},
	}, scrub)
	files, _ = filepath.Glob(filepath.Join(warehouse, "bronze", "orders", "*.parquet"))
	if len(files) != 1 {
		t.Errorf("after --force %d data files left, want 1 (the live one)", len(files))
	}
}
