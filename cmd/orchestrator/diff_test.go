package main

import (
	"strings"
	"testing"
)

// TestTableDiff: v1 → v2 of the orders fixture by order_id: one amount corrected, one
// row added; --from/--to and --format json carry it too.
func TestTableDiff(t *testing.T) {
	dir := makeOrdersTable(t)
	r := runCLI(t, "table", "diff", dir, "--from", "1", "--to", "2", "--key", "order_id")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "v1 → v2 by order_id: 1 added, 0 removed, 1 changed") {
		t.Errorf("summary %q", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "changed") || !strings.Contains(lines[2], "amount: ") || !strings.HasPrefix(lines[3], "added") {
		t.Errorf("diff:\n%s\nwant a header, a changed row naming amount, an added row", r.stdout)
	}
	j := runCLI(t, "table", "diff", dir, "--to", "2", "--key", "order_id", "--format", "json")
	if j.code != 0 || strings.Count(j.stdout, "\n") != 2 || !strings.Contains(j.stdout, `"change":"changed"`) {
		t.Errorf("json diff of v2: exit %d\n%s", j.code, j.stdout)
	}
	if bad := runCLI(t, "table", "diff", dir, "--key", "nope"); bad.code == 0 || !strings.Contains(bad.stderr, `key column "nope"`) {
		t.Errorf("diff by an unknown key: exit %d %s", bad.code, bad.stderr)
	}
}
