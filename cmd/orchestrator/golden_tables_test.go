package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// sharedGoldenDir finds the golden tables in testdata/golden (testenv.GoldenDir).
func sharedGoldenDir(t *testing.T) string { return testenv.GoldenDir(t) }

// TestShowForeignTables shows tables written by Spark: every Delta type, partition values,
// nested structs, maps with non-string keys, decimals of several scales, timestamp_ntz.
func TestShowForeignTables(t *testing.T) {
	dir := sharedGoldenDir(t)
	var cases []cliCase
	for _, name := range []string{"data-reader-primitives", "basic-decimal-table", "data-reader-map",
		"data-reader-nested-struct", "data-reader-partition-values", "data-reader-timestamp_ntz"} {
		loc := filepath.Join(dir, "delta-golden", name, "delta")
		cases = append(cases,
			cliCase{"foreign_" + name, []string{"table", "show", loc, "--limit", "4"}, 0},
			cliCase{"foreign_" + name + "_json", []string{"table", "show", loc, "--limit", "4", "--format", "json"}, 0})
	}
	runCases(t, cases, scrubDir(dir, "$GOLDEN"))
}

// TestChangesForeignTables reads the change data feed of tables Spark wrote with UPDATE
// and DELETE (cdc files with update pre- and post-images). Commit timestamps come from
// the commit files' modification times, which a copy of the tables changes, so they are
// replaced by <TS>.
func TestChangesForeignTables(t *testing.T) {
	dir := sharedGoldenDir(t)
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	scrub := func(s string) string {
		return stamp.ReplaceAllString(strings.ReplaceAll(s, dir, "$GOLDEN"), "<TS>")
	}
	runCases(t, []cliCase{
		{"foreign_changes_update_delete", []string{"table", "changes", filepath.Join(dir, "delta-rs", "cdf-table"), "--from", "1", "--format", "csv"}, 0},
		{"foreign_changes_postimages", []string{"table", "changes", filepath.Join(dir, "delta-rs", "cdf-table"), "--from", "0", "--types", "update_postimage", "--format", "json"}, 0},
	}, scrub)
}

// TestShowForeignReadTables: `table show --where` on a float column whose stats Spark
// wrote as float32 text returns the rows Spark returns (f < 0.234 holds for the float
// 0.234, f = 0.234 for none), a void column shows as null, a partition directory with
// an unescaped ':' reads (testdata/golden/foreign-read).
func TestShowForeignReadTables(t *testing.T) {
	dir := filepath.Join(sharedGoldenDir(t), "foreign-read")
	inexact := filepath.Join(dir, "data-skipping-inexact-stats")
	runCases(t, []cliCase{
		{"foreign_float_lt", []string{"table", "show", inexact, "--where", "as_float < 0.234", "--columns", "id,as_float", "--order-by", "id"}, 0},
		{"foreign_float_eq", []string{"table", "show", inexact, "--where", "as_float = 0.234 OR as_float = 0.23399999737739563", "--columns", "id,as_float", "--order-by", "id"}, 0},
		{"foreign_void", []string{"table", "show", filepath.Join(dir, "void-column"), "--order-by", "id"}, 0},
		{"foreign_colon_partition", []string{"table", "show", filepath.Join(dir, "timestamp-partitioned-table")}, 0},
	}, scrubDir(dir, "$GOLDEN"))
}
