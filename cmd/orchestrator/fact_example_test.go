package main

import (
	"encoding/csv"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleSalesFacts runs examples/pipelines/sales-facts through the binary as its
// README walks it and answers "which city was this sale in?" with a plain join on
// customer_sk: first C-2's sale is the unknown member's (a row the stage adds to the
// dimension once) and T-2, T-3 are Seattle's; after
// the late customer events arrive, one run re-keys exactly those three sales (Boston,
// Tacoma, Tacoma) and leaves the others alone; a third run does nothing.
func TestExampleSalesFacts(t *testing.T) {
	bin := buildBinary(t)
	src := filepath.Join("..", "..", "examples", "pipelines", "sales-facts")
	dir := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel == "warehouse" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	orch := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = commandEnv([]string{"ORCH_WAREHOUSE="})
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("orchestrator %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	rows := func(table, cols string) [][]string {
		t.Helper()
		recs, err := csv.NewReader(strings.NewReader(orch("table", "show", table, "--pipeline", "pipeline.yaml", "--columns", cols, "--format", "csv"))).ReadAll()
		if err != nil || len(recs) == 0 {
			t.Fatalf("table show %s: %v", table, err)
		}
		return recs[1:]
	}
	cityOfSale := func() map[string]string {
		city := map[string]string{}
		members := 0
		for _, r := range rows("sales.customer", "customer_sk,customer_id,city,valid_from,is_current") {
			city[r[0]] = r[2]
			if r[1] == "" { // the unknown member row: once, key -1, valid since 1900, current
				members++
				city[r[0]] = "unknown"
				if r[0] != "-1" || !strings.HasPrefix(r[3], "1900-01-01") || r[4] != "true" {
					t.Errorf("unknown member row %q, want key -1, valid from 1900-01-01, current", r)
				}
			}
		}
		if members != 1 {
			t.Errorf("%d unknown member rows in sales.customer, want 1", members)
		}
		out := map[string]string{}
		for _, r := range rows("sales.sales", "sale_id,customer_sk") {
			out[r[0]] = city[r[1]]
		}
		return out
	}

	orch("run", "pipeline.yaml")
	want := map[string]string{"T-1": "Seattle", "T-2": "Seattle", "T-3": "Seattle", "T-4": "Portland", "T-5": "unknown"}
	if got := cityOfSale(); !maps.Equal(got, want) {
		t.Fatalf("first run: got %v, want %v", got, want)
	}

	late, err := os.ReadFile(filepath.Join(dir, "late", "2026-02-01.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "landing", "customers", "2026-02-01.csv"), late, 0o644); err != nil {
		t.Fatal(err)
	}
	orch("run", "pipeline.yaml")
	want = map[string]string{"T-1": "Seattle", "T-2": "Tacoma", "T-3": "Tacoma", "T-4": "Portland", "T-5": "Boston"}
	if got := cityOfSale(); !maps.Equal(got, want) {
		t.Fatalf("after the late events: got %v, want %v", got, want)
	}
	changed := map[string]bool{}
	for _, r := range rows2(t, orch("table", "changes", "sales.sales", "--pipeline", "pipeline.yaml", "--from", "2", "--to", "2", "--columns", "sale_id,_change_type", "--format", "csv")) {
		changed[r[0]] = true
	}
	if len(changed) != 3 || !changed["T-2"] || !changed["T-3"] || !changed["T-5"] {
		t.Errorf("the re-keying run changed sales %v, want T-2, T-3 and T-5 only", changed)
	}
	if out := orch("run", "pipeline.yaml"); strings.Contains(out, "sales.sales@v") {
		t.Errorf("a run with nothing new committed to sales.sales:\n%s", out)
	}
}

func rows2(t *testing.T, text string) [][]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("csv %q: %v", text, err)
	}
	return recs[1:]
}
