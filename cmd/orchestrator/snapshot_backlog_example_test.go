package main

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleSnapshotBacklog runs examples/pipelines/snapshot-backlog through the binary:
// three dated extracts waiting at once become the customers' history in one run, each
// change at its extract's date (C-3 closed on the day it is missing, back with a new
// version the day after); a stray extract dated before the last one loaded is refused
// naming it and both dates, with nothing written; a newer one then loads alone.
func TestExampleSnapshotBacklog(t *testing.T) {
	bin := buildBinary(t)
	dir := copyExampleDir(t, "snapshot-backlog")
	orch := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = commandEnv([]string{"ORCH_WAREHOUSE="})
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	history := func() string {
		t.Helper()
		out, err := orch("table", "show", "dim.customer", "--pipeline", "pipeline.yaml", "--order-by", "customer_id",
			"--columns", "customer_id,city,tier,valid_from,valid_to,is_current", "--format", "csv")
		if err != nil {
			t.Fatalf("table show: %v\n%s", err, out)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, r := range recs[1:] {
			rows = append(rows, strings.Join(r, "|"))
		}
		return strings.Join(rows, "\n")
	}
	if out, err := orch("run", "pipeline.yaml"); err != nil || !strings.Contains(out, "3 snapshots loaded in date order, one commit each: 2026-11-01, 2026-11-02, 2026-11-03") {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	want := strings.Join([]string{
		"C-1|Seattle|gold|2026-11-01T00:00:00Z|2026-11-02T00:00:00Z|false",
		"C-1|Portland|gold|2026-11-02T00:00:00Z|9999-12-31T00:00:00Z|true",
		"C-2|Leeds|silver|2026-11-01T00:00:00Z|2026-11-03T00:00:00Z|false",
		"C-2|Leeds|gold|2026-11-03T00:00:00Z|9999-12-31T00:00:00Z|true",
		"C-3|Arlington|gold|2026-11-01T00:00:00Z|2026-11-02T00:00:00Z|false",
		"C-3|Arlington|gold|2026-11-03T00:00:00Z|9999-12-31T00:00:00Z|true",
		"C-4|Austin|bronze|2026-11-02T00:00:00Z|9999-12-31T00:00:00Z|true",
	}, "\n")
	if got := history(); got != want {
		t.Fatalf("history after the backlog:\n%s\nwant:\n%s", got, want)
	}

	stray := filepath.Join(dir, "extracts", "customers_2026-10-31.csv")
	if err := os.WriteFile(stray, []byte("customer_id,name,city,tier\nC-1,Ada Lovelace,Boston,gold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := orch("run", "pipeline.yaml")
	if err == nil || !strings.Contains(out, "customers_2026-10-31.csv: this snapshot is as of 2026-10-31, older than the last snapshot staging.customers holds (as of 2026-11-03); nothing was loaded") {
		t.Fatalf("an older extract: %v\n%s", err, out)
	}
	if got := history(); got != want {
		t.Fatalf("history after the refused run:\n%s\nwant it unchanged", got)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(dir, "extracts", "customers_2026-11-04.csv")
	if err := os.WriteFile(next, []byte("customer_id,name,city,tier\nC-1,Ada Lovelace,Portland,gold\nC-2,Alan M. Turing,Leeds,gold\nC-3,Grace Hopper,Arlington,gold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := orch("run", "pipeline.yaml"); err != nil {
		t.Fatalf("the next day: %v\n%s", err, out)
	}
	want = strings.Replace(want, "C-4|Austin|bronze|2026-11-02T00:00:00Z|9999-12-31T00:00:00Z|true", "C-4|Austin|bronze|2026-11-02T00:00:00Z|2026-11-04T00:00:00Z|false", 1)
	if got := history(); got != want {
		t.Fatalf("history after the next day:\n%s\nwant C-4 closed on 2026-11-04:\n%s", got, want)
	}
}
