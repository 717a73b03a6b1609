package main

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// copyExample copies examples/pipelines/sales (the pipeline and its landing files) into
// a temporary directory and returns the copy's pipeline file. Its warehouse is the
// directory "warehouse" next to it.
func copyExample(t *testing.T) string {
	t.Helper()
	return filepath.Join(copyExampleDir(t, "sales"), "pipeline.yaml")
}

// copyExampleDir copies examples/pipelines/<name> (without a local run's warehouse)
// into a temporary directory and returns it.
func copyExampleDir(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "..", "examples", "pipelines", name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "warehouse" { // a local run's output, not part of the example
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// unsetEnv removes a variable for the test (restored after it).
func unsetEnv(t *testing.T, name string) {
	t.Setenv(name, "")
	os.Unsetenv(name)
}

// TestExampleSales runs the sales example end to end on local disk, twice, and asks its
// tables the questions of the README: the customer dimension with its versions, what
// changed on the second day, the audit history, the table as of version 1, the history
// with lineage. The second run finds nothing new to do (exactly once).
func TestExampleSales(t *testing.T) {
	unsetEnv(t, "ORCH_WAREHOUSE")
	pipeline := copyExample(t)
	dir := filepath.Dir(pipeline)
	runID := regexp.MustCompile(`(\d{8}T\d{6}Z)-[a-z0-9]{6}`)
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	// Times and sizes vary: sizes with the length of the temporary paths in source_file.
	varying := regexp.MustCompile(`(\w*TimeMs|Bytes\w*)=\d+`)
	scrub := func(s string) string {
		s = strings.ReplaceAll(s, dir, "$EXAMPLE")
		return runID.ReplaceAllString(s, "$1-XXXXXX")
	}
	osUser := ""
	if u, err := user.Current(); err == nil {
		osUser = u.Username // the userName of commits when the pipeline sets no identity
	}
	scrubHistory := func(s string) string {
		s = varying.ReplaceAllString(scrub(s), "$1=N")
		if osUser != "" {
			s = strings.ReplaceAll(s, ","+osUser+",", ",<os user>,")
		}
		return stamp.ReplaceAllString(s, "<commit time>")
	}
	p := []string{"--pipeline", pipeline}
	table := func(args ...string) []string { return append(append([]string{"table"}, args...), p...) }

	// Stages that run at once report in any order: their progress blocks are sorted.
	scrubRun := func(s string) string { return sortStderrBlocks(scrub(s)) }
	runCases(t, []cliCase{
		{"example_validate", []string{"validate", pipeline}, 0},
		{"example_run_first", []string{"run", pipeline}, 0},
		{"example_run_again", []string{"run", pipeline}, 0},
	}, scrubRun)
	runCases(t, []cliCase{
		{"example_customer", table("show", "sales.customer"), 0},
		{"example_customer_portland", table("show", "sales.customer", "--where", "city = 'Portland' OR is_current = false", "--columns", "customer_id,city,valid_from,valid_to,is_current"), 0},
		{"example_sales_csv", table("show", "bronze.sales_transactions", "--format", "csv"), 0},
		{"example_staging_v1", table("show", "staging.customers", "--version", "1", "--columns", "customer_id,name,email,city"), 0},
		{"example_audit_csv", table("show", "audit.sales_transactions_history", "--columns", "transaction_id,amount,source_file,_change_type,_commit_version", "--format", "csv"), 0},
		{"example_properties", table("properties", "bronze.sales_transactions"), 0},
	}, scrub)
	// Commit timestamps are the commit files' modification times, replaced; paths in
	// source_file go in CSV, whose columns do not align on their varying length.
	runCases(t, []cliCase{
		{"example_changes_day2_json", table("changes", "bronze.sales_transactions", "--from", "2", "--to", "2", "--columns", "transaction_id,amount", "--format", "json"), 0},
		{"example_changes_updates_csv", table("changes", "staging.customers", "--from", "0", "--types", "update_preimage,update_postimage", "--columns", "customer_id,email,city", "--format", "csv"), 0},
		{"example_history_csv", table("history", "bronze.sales_transactions", "--format", "csv"), 0},
	}, scrubHistory)
}

// sortStderrBlocks sorts the stderr part of a transcript by blocks: a line and the
// indented lines after it.
func sortStderrBlocks(s string) string {
	head, stderr, ok := strings.Cut(s, "-- stderr --\n")
	if !ok {
		return s
	}
	var blocks []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "  ") && len(blocks) > 0 {
			blocks[len(blocks)-1] += line
			continue
		}
		blocks = append(blocks, line)
	}
	slices.Sort(blocks)
	return head + "-- stderr --\n" + strings.Join(blocks, "")
}
