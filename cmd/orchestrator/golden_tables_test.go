package main

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedGoldenDir finds shared/golden (tables written by Spark, delta-rs and the Delta
// projects' test suites): $ORCH_GOLDEN_DIR, else ../../../shared/golden from this package
// (the checkout's sibling). Missing is a failure in CI and a skip elsewhere.
func sharedGoldenDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ORCH_GOLDEN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "golden")
	}
	if _, err := os.Stat(filepath.Join(dir, "expected.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("golden tables not found at %s (set ORCH_GOLDEN_DIR): %v", dir, err)
		}
		t.Skipf("golden tables not found at %s: %v", dir, err)
	}
	return dir
}

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
