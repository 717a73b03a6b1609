package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRestore restores the fixture table to version 1 (before the overwrite), checks the
// rows and history, then restores by time to version 2.
func TestRestore(t *testing.T) {
	dir := makeOrdersTable(t)
	scrub := scrubDir(filepath.Dir(dir), "$TMP")
	runCases(t, []cliCase{
		{"restore_version", []string{"table", "restore", dir, "--version", "1"}, 0},
		{"restore_show", []string{"table", "show", dir, "--columns", "order_id,amount", "--format", "csv"}, 0},
		{"restore_timestamp_json", []string{"table", "restore", dir, "--timestamp", "2026-01-15T10:00:00Z", "--format", "json"}, 0},
		{"restore_future_version", []string{"table", "restore", dir, "--version", "99"}, 1},
		{"usage_restore_no_target", []string{"table", "restore", dir}, 2},
	}, scrub)
	r := runCLI(t, "table", "history", dir, "--limit", "2", "--format", "csv")
	if strings.Count(r.stdout, ",RESTORE,") != 2 {
		t.Errorf("history after two restores:\n%s\nwant two RESTORE versions", r.stdout)
	}
	r = runCLI(t, "table", "show", dir, "--format", "csv", "--columns", "order_id,amount")
	if want := "order_id,amount\no-1,19.90\no-2,4.50\no-3,1200.10\no-4,\n"; r.stdout != want {
		t.Errorf("rows after restoring version 2:\n%s\nwant:\n%s", r.stdout, want)
	}
}
