package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// scrubRun replaces the temporary directory and the random part of run IDs.
func scrubRun(dir string) func(string) string {
	id := regexp.MustCompile(`(\d{8}T\d{6}Z)-[a-z0-9]{6}`)
	return func(s string) string {
		return id.ReplaceAllString(strings.ReplaceAll(s, dir, "$TMP"), "$1-XXXXXX")
	}
}

// TestRun runs a pipeline that captures the fixture table's change feed into an audit
// table and vacuums the source, twice: the second run finds nothing new (exactly once).
// The clock is pinned (testNow), so durations are 0s.
func TestRun(t *testing.T) {
	pipeline, warehouse := inWarehouse(t, makeOrdersTable(t), "capture_vacuum.yaml")
	runCases(t, []cliCase{
		{"run_first", []string{"run", pipeline}, 0},
		{"run_again", []string{"run", pipeline}, 0},
		{"run_audit_show", []string{"table", "show", "audit.orders_history", "--pipeline", pipeline, "--columns", "order_id,amount,_change_type,_commit_version", "--format", "csv"}, 0},
		{"run_only_vacuum_json", []string{"run", pipeline, "--stage", "vacuum", "--format", "json"}, 0},
		{"usage_run_unknown_stage", []string{"run", pipeline, "--stage", "compact"}, 2},
		{"usage_run_no_pipeline", []string{"run"}, 2},
		{"run_invalid_pipeline", []string{"run", "testdata/pipelines/invalid.yaml"}, 1},
	}, scrubRun(warehouse))
}

// TestRunFailure: a stage that fails makes its downstream stages skipped and the exit
// code 1; nothing is half-written.
func TestRunFailure(t *testing.T) {
	warehouse := t.TempDir()
	src, err := os.ReadFile("testdata/pipelines/capture_vacuum.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pipeline := filepath.Join(warehouse, "capture_vacuum.yaml")
	yaml := strings.Replace(string(src), "/tmp/orchestrator-cli-test-warehouse", warehouse, 1)
	if err := os.WriteFile(pipeline, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	runCases(t, []cliCase{{"run_failure", []string{"run", pipeline}, 1}}, scrubRun(warehouse))
}
