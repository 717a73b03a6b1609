package main

import (
	"encoding/csv"
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
	ex := newSalesFacts(t)
	orch, cityOfSale := ex.orch, ex.cityOfSale
	orch("run", "pipeline.yaml")
	want := map[string]string{"T-1": "Seattle", "T-2": "Seattle", "T-3": "Seattle", "T-4": "Portland", "T-5": "unknown"}
	if got := cityOfSale(); !maps.Equal(got, want) {
		t.Fatalf("first run: got %v, want %v", got, want)
	}

	ex.late()
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

// TestRollbackRekeysFacts: the sales-facts example, with the late customer events merged
// by a run of the customer stages alone and the sales re-keyed by the next full run;
// rolling the customer run back restores the dimension, and the plan says that the
// fact_load, which read the dimension's changes, re-keys (it is neither rolled back nor
// made to skip the RESTORE); the next run re-keys the three sales back to the versions
// of before, so the answer to "which city was this sale in?" is the first run's again.
func TestRollbackRekeysFacts(t *testing.T) {
	ex := newSalesFacts(t)
	first := map[string]string{"T-1": "Seattle", "T-2": "Seattle", "T-3": "Seattle", "T-4": "Portland", "T-5": "unknown"}
	ex.orch("run", "pipeline.yaml")
	ex.late()
	ex.orch("run", "pipeline.yaml", "--stage", "load_customers", "--stage", "customer_history")
	customersRun := ex.runID()
	ex.orch("run", "pipeline.yaml")
	if got, want := ex.cityOfSale(), map[string]string{"T-1": "Seattle", "T-2": "Tacoma", "T-3": "Tacoma", "T-4": "Portland", "T-5": "Boston"}; !maps.Equal(got, want) {
		t.Fatalf("after the late events: got %v, want %v", got, want)
	}
	plan := ex.orch("runs", "rollback", customersRun, "--pipeline", "pipeline.yaml", "--dry-run")
	reader := ex.readerLines(plan)
	if !strings.Contains(reader, "sales.customer") || !strings.Contains(reader, "re-keys") || strings.Count(reader, "\n") != 1 {
		t.Errorf("rollback plan:\n%s\nwant one reader line: sales_facts reads sales.customer and re-keys", plan)
	}
	ex.orch("runs", "rollback", customersRun, "--pipeline", "pipeline.yaml")
	ex.orch("run", "pipeline.yaml")
	if got := ex.cityOfSale(); !maps.Equal(got, first) {
		t.Errorf("after the rollback and the next run: got %v, want the first run's %v", got, first)
	}
}

// salesFacts is a copy of examples/pipelines/sales-facts run through the binary.
type salesFacts struct {
	t      *testing.T
	bin    string
	dir    string
	stderr string // of the last command
}

func newSalesFacts(t *testing.T) *salesFacts {
	ex := &salesFacts{t: t, bin: buildBinary(t), dir: t.TempDir()}
	copyDir(t, filepath.Join("..", "..", "examples", "pipelines", "sales-facts"), ex.dir)
	if err := os.RemoveAll(filepath.Join(ex.dir, "warehouse")); err != nil {
		t.Fatal(err)
	}
	return ex
}

// orch runs the binary in the example's directory: its stdout (ex.stderr its stderr).
func (ex *salesFacts) orch(args ...string) string {
	t := ex.t
	t.Helper()
	cmd := exec.Command(ex.bin, args...)
	cmd.Dir = ex.dir
	cmd.Env = commandEnv([]string{"ORCH_WAREHOUSE="})
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	ex.stderr = stderr.String()
	if err != nil {
		t.Fatalf("orchestrator %s: %v\n%s%s", strings.Join(args, " "), err, out, ex.stderr)
	}
	return string(out)
}

// runID is the id of the run whose output is in ex.stderr.
func (ex *salesFacts) runID() string {
	ex.t.Helper()
	m := runIDRE.FindStringSubmatch(ex.stderr)
	if m == nil {
		ex.t.Fatalf("no run id in:\n%s", ex.stderr)
	}
	return m[1]
}

// readerLines are the lines of a rollback plan about the sales_facts stage as a reader.
func (ex *salesFacts) readerLines(plan string) string {
	var out string
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, "sales_facts (fact_load") {
			out += line + "\n"
		}
	}
	return out
}

// late copies the late customer events into the landing directory.
func (ex *salesFacts) late() {
	late, err := os.ReadFile(filepath.Join(ex.dir, "late", "2026-02-01.csv"))
	if err != nil {
		ex.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ex.dir, "landing", "customers", "2026-02-01.csv"), late, 0o644); err != nil {
		ex.t.Fatal(err)
	}
}

// rows are a table's rows (columns cols) as CSV records.
func (ex *salesFacts) rows(table, cols string) [][]string {
	t := ex.t
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(ex.orch("table", "show", table, "--pipeline", "pipeline.yaml", "--columns", cols, "--format", "csv"))).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("table show %s: %v", table, err)
	}
	return recs[1:]
}

// cityOfSale answers "which city was this sale in?" by a plain join on customer_sk
// ("unknown" for the unknown member, "" for a key the dimension lacks).
func (ex *salesFacts) cityOfSale() map[string]string {
	t := ex.t
	t.Helper()
	city := map[string]string{}
	members := 0
	for _, r := range ex.rows("sales.customer", "customer_sk,customer_id,city,valid_from,is_current") {
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
	for _, r := range ex.rows("sales.sales", "sale_id,customer_sk") {
		out[r[0]] = city[r[1]]
	}
	return out
}

func rows2(t *testing.T, text string) [][]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("csv %q: %v", text, err)
	}
	return recs[1:]
}

// TestRollbackSnapshotSourceFacts: the sales-facts example with its sales read as a
// snapshot (source_changes: false). A run of the sales ingest alone brings a bad file
// (T-6), the next full run loads it as a fact; rolling the ingest run back restores
// bronze.sales, and the plan says that the fact_load follows the source's snapshot (it
// is neither rolled back nor made to skip the RESTORE); with the bad file gone from the
// landing directory, the next run reads the RESTORE's net changes from the source's
// feed and deletes T-6, so the facts are the first run's again.
func TestRollbackSnapshotSourceFacts(t *testing.T) {
	ex := newSalesFacts(t)
	yaml := filepath.Join(ex.dir, "pipeline.yaml")
	b, err := os.ReadFile(yaml)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := strings.Replace(string(b), "    source: bronze.sales\n    source_changes: true\n", "    source: bronze.sales\n", 1)
	if snapshot == string(b) {
		t.Fatal("the example's sales_facts stage no longer reads bronze.sales with source_changes: true")
	}
	if err := os.WriteFile(yaml, []byte(snapshot), 0o644); err != nil {
		t.Fatal(err)
	}
	first := map[string]string{"T-1": "Seattle", "T-2": "Seattle", "T-3": "Seattle", "T-4": "Portland", "T-5": "unknown"}
	ex.orch("run", "pipeline.yaml")
	bad := filepath.Join(ex.dir, "landing", "sales", "2026-02-01.csv")
	if err := os.WriteFile(bad, []byte("sale_id,customer_id,amount,sold_at\nT-6,C-1,99.00,2026-02-01T12:00:00Z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ex.orch("run", "pipeline.yaml", "--stage", "load_sales")
	salesRun := ex.runID()
	ex.orch("run", "pipeline.yaml")
	if got := ex.cityOfSale(); got["T-6"] != "Portland" || len(got) != 6 {
		t.Fatalf("after the bad file: got %v, want T-6 (Portland) besides the first five", got)
	}
	plan := ex.orch("runs", "rollback", salesRun, "--pipeline", "pipeline.yaml", "--dry-run")
	reader := ex.readerLines(plan)
	if !strings.Contains(reader, "bronze.sales") || !strings.Contains(reader, "follows") || strings.Count(reader, "\n") != 1 {
		t.Errorf("rollback plan:\n%s\nwant one reader line: sales_facts reads bronze.sales and follows it", plan)
	}
	ex.orch("runs", "rollback", salesRun, "--pipeline", "pipeline.yaml")
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	out := ex.orch("run", "pipeline.yaml")
	if got := ex.cityOfSale(); !maps.Equal(got, first) {
		t.Errorf("after the rollback and the next run: got %v, want the first run's %v", got, first)
	}
	// It read the one net change (T-6 deleted), not the whole snapshot's five sales.
	rowsIn := ""
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[0] == "sales_facts" {
			rowsIn = f[len(f)-3] // (the rows_in column: rows_in, rows_out, versions end the line)
		}
	}
	if rowsIn != "1" {
		t.Errorf("the run after the rollback read %q rows of bronze.sales, want its feed's 1 change:\n%s", rowsIn, out)
	}
}
