package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// expectOrders is a pipeline loading landing/*.csv into bronze.orders with the
// expectations given (YAML lines under expectations:), and a quarantine table.
func expectOrders(t *testing.T, expectations string, quarantine bool) (dir, pipeline string) {
	t.Helper()
	dir = t.TempDir()
	q := ""
	if quarantine {
		q = "    quarantine_table: bronze.orders_quarantine\n"
	}
	yaml := `pipeline: exp
tables:
  bronze.orders:
    columns:
      - {name: order_id, type: bigint}
      - {name: email, type: string}
      - {name: quantity, type: int}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
  bronze.orders_quarantine:
    columns:
      - {name: source_file, type: string}
      - {name: line, type: bigint}
      - {name: column, type: string}
      - {name: value, type: string}
      - {name: error, type: string}
      - {name: record, type: string}
      - {name: expectation, type: string}
      - {name: load_timestamp, type: timestamp}
stages:
  - name: load
    kind: ingest
    source: landing/*.csv
    target: bronze.orders
` + q + `    expectations:
` + expectations
	writeFiles(t, dir, map[string]string{
		"p.yaml": yaml,
		// Rows 2 (line 3) and 4 (line 5) have no positive quantity; row 2's email has no @.
		"landing/a.csv": "order_id,email,quantity\n1,a@x.com,3\n2,bx.com,-1\n3,c@x.com,5\n4,d@x.com,\n5,e@x.com,7\n",
	})
	return dir, filepath.Join(dir, "p.yaml")
}

// expectShow is `table show --format csv` of a table, without its lineage columns.
func expectShow(t *testing.T, pipeline, table, columns string) string {
	t.Helper()
	r := runCLI(t, "table", "show", table, "--pipeline", pipeline, "--columns", columns, "--order-by", strings.Split(columns, ",")[0], "--format", "csv")
	if r.code != 0 {
		t.Fatalf("table show %s: exit %d\n%s", table, r.code, r.stderr)
	}
	return r.stdout
}

// runChecks is the checks the run record of run id keeps for a stage.
func runChecks(t *testing.T, pipeline, id, stage string) []scheduler.Check {
	t.Helper()
	r := runCLI(t, "runs", "show", id, "--pipeline", pipeline, "--format", "json")
	if r.code != 0 {
		t.Fatalf("runs show: exit %d\n%s", r.code, r.stderr)
	}
	var rec scheduler.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("runs show json: %v\n%s", err, r.stdout)
	}
	s := rec.Stage(stage)
	if s == nil {
		t.Fatalf("run record has no stage %s", stage)
	}
	return s.Checks
}

// commitExpectations is what commitInfo of a table version records of the expectations,
// read from the JSON of the log as Spark or any other reader sees it.
func commitExpectations(t *testing.T, dir, table string, version int64) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "warehouse", strings.ReplaceAll(table, ".", "/"), "_delta_log", versionFile(version)))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var a struct {
			CommitInfo map[string]any `json:"commitInfo"`
		}
		if json.Unmarshal([]byte(line), &a) != nil || a.CommitInfo == nil {
			continue
		}
		orch, _ := a.CommitInfo["orchestrator"].(map[string]any)
		var out []map[string]any
		list, _ := orch["expectations"].([]any)
		for _, x := range list {
			out = append(out, x.(map[string]any))
		}
		return out
	}
	t.Fatalf("%s version %d has no commitInfo", table, version)
	return nil
}

func versionFile(v int64) string { return fmt.Sprintf("%020d.json", v) }

func storeOf(t *testing.T, dir string) objectstore.Store {
	t.Helper()
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func checkNamed(t *testing.T, checks []scheduler.Check, name string) scheduler.Check {
	t.Helper()
	i := slices.IndexFunc(checks, func(c scheduler.Check) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no check %s in %+v", name, checks)
	}
	return checks[i]
}

// TestExpectationActions runs each on_violation on a file with violating rows and looks
// at what a user would: the table's rows, the run record's counts, the commitInfo keys
// and, for quarantine, the quarantined rows with the expectation's name.
func TestExpectationActions(t *testing.T) {
	const allRows = "order_id,quantity\n1,3\n2,-1\n3,5\n4,\n5,7\n"
	const goodRows = "order_id,quantity\n1,3\n3,5\n5,7\n"
	cases := []struct {
		action     string
		quarantine bool
		wantCode   int
		wantRows   string // "" : no table
	}{
		{"warn", false, 0, allRows},
		{"drop", false, 0, goodRows},
		{"quarantine", true, 0, goodRows},
		{"fail", false, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.action, func(t *testing.T) {
			dir, pipeline := expectOrders(t, "      - {name: positive_quantity, expect: \"quantity > 0\", on_violation: "+c.action+"}\n", c.quarantine)
			r := runCLI(t, "run", pipeline)
			if r.code != c.wantCode {
				t.Fatalf("run: exit %d, want %d\n%s", r.code, c.wantCode, r.stderr)
			}
			id := runID(t, r)
			chk := checkNamed(t, runChecks(t, pipeline, id, "load"), "positive_quantity")
			if chk.Rows != 5 || chk.Failed != 2 || chk.Action != c.action || chk.Check != "expect" {
				t.Errorf("run record check = %+v, want 2 of 5 rows failed, on_violation %s", chk, c.action)
			}
			// fail and quarantine name the line; warn and drop the record (the decoder
			// spares the line column for them).
			where := "a.csv:3: "
			if c.action == "warn" || c.action == "drop" {
				where = "a.csv record 2: "
			}
			if !strings.Contains(chk.Detail, where+`{"order_id":2,"email":"bx.com","quantity":-1,`) {
				t.Errorf("check detail %q does not name the first violating row (%s) and show it", chk.Detail, where)
			}
			if c.wantRows == "" {
				if _, err := os.Stat(filepath.Join(dir, "warehouse", "bronze", "orders", "_delta_log", versionFile(1))); err == nil {
					t.Errorf("a failing row check committed to bronze.orders")
				}
				for _, want := range []string{"expectation positive_quantity failed", "a.csv:3", `"order_id":2`, "quantity > 0", "nothing was committed, bronze.orders is unchanged"} {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("the error lacks %q:\n%s", want, r.stderr)
					}
				}
				if chk.Version != -1 {
					t.Errorf("a failed check names version %d, want -1 (no commit)", chk.Version)
				}
				return
			}
			if got := expectShow(t, pipeline, "bronze.orders", "order_id,quantity"); got != c.wantRows {
				t.Errorf("bronze.orders =\n%s\nwant\n%s", got, c.wantRows)
			}
			if chk.Version != 1 {
				t.Errorf("the check names version %d, want 1 (the commit with the rows)", chk.Version)
			}
			ci := commitExpectations(t, dir, "bronze.orders", 1)
			want := map[string]any{"name": "positive_quantity", "onViolation": c.action, "numCheckedRows": 5.0, "numPassedRows": 3.0, "numFailedRows": 2.0}
			if len(ci) != 1 || !mapsEqual(ci[0], want) {
				t.Errorf("commitInfo.orchestrator.expectations = %v, want [%v]", ci, want)
			}
			if c.action == "quarantine" {
				got := expectShow(t, pipeline, "bronze.orders_quarantine", "line,column,value,expectation,error")
				want := "line,column,value,expectation,error\n" +
					"3,quantity,-1,positive_quantity," + filepath.Join(dir, "landing", "a.csv") + ":3: expectation positive_quantity violated: quantity > 0\n" +
					"5,quantity,,positive_quantity," + filepath.Join(dir, "landing", "a.csv") + ":5: expectation positive_quantity violated: quantity > 0\n"
				if got != want {
					t.Errorf("quarantine =\n%s\nwant\n%s", got, want)
				}
			}
			// A second run finds the file loaded: nothing is checked, quarantined or
			// written twice.
			if r2 := runCLI(t, "run", pipeline); r2.code != 0 {
				t.Fatalf("second run: exit %d\n%s", r2.code, r2.stderr)
			}
			if got := expectShow(t, pipeline, "bronze.orders", "order_id,quantity"); got != c.wantRows {
				t.Errorf("after a second run bronze.orders =\n%s\nwant\n%s", got, c.wantRows)
			}
			if c.quarantine {
				if got := expectShow(t, pipeline, "bronze.orders_quarantine", "line"); got != "line\n3\n5\n" {
					t.Errorf("after a second run the quarantine holds lines\n%s, want 3 and 5 once", got)
				}
			}
		})
	}
}

func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// TestExpectationTableFailAfterCommit: a table check that fails after the commit marks
// the run failed, keeps the commit, and names the command that rolls it back; that
// command works.
func TestExpectationTableFailAfterCommit(t *testing.T) {
	dir, pipeline := expectOrders(t, "      - {name: unique_order, unique: [order_id], on_violation: fail}\n      - {name: at_most_4, row_count: {max: 4}, on_violation: fail}\n      - {name: no_null_quantity, not_null: [quantity]}\n", false)
	r := runCLI(t, "run", pipeline)
	if r.code != 1 {
		t.Fatalf("run: exit %d, want 1\n%s", r.code, r.stderr)
	}
	restore := "orchestrator table restore --pipeline " + pipeline + " bronze.orders --version 0"
	for _, want := range []string{"expectation at_most_4 failed on bronze.orders after the stage's commit", "version 1: 5 rows, outside max 4", restore} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the error lacks %q:\n%s", want, r.stderr)
		}
	}
	checks := runChecks(t, pipeline, runID(t, r), "load")
	if c := checkNamed(t, checks, "unique_order"); c.Failed != 0 || c.Version != 1 || c.Rows != 5 {
		t.Errorf("unique_order = %+v, want passed on version 1 of 5 rows", c)
	}
	if c := checkNamed(t, checks, "at_most_4"); c.Failed != 1 || c.Version != 1 || c.Outcome() != "failed" {
		t.Errorf("at_most_4 = %+v, want failed on version 1", c)
	}
	if c := checkNamed(t, checks, "no_null_quantity"); c.Failed != 1 || c.Outcome() != "warned" || !strings.Contains(c.Detail, "quantity in 1") {
		t.Errorf("no_null_quantity = %+v, want a warning of 1 row with a NULL quantity", c)
	}
	if got := expectShow(t, pipeline, "bronze.orders", "order_id"); got != "order_id\n1\n2\n3\n4\n5\n" {
		t.Errorf("the commit is kept: bronze.orders =\n%s", got)
	}
	args := strings.Fields(strings.TrimPrefix(restore, "orchestrator "))
	if rr := runCLI(t, args...); rr.code != 0 {
		t.Fatalf("%s: exit %d\n%s", restore, rr.code, rr.stderr)
	}
	if got := expectShow(t, pipeline, "bronze.orders", "order_id"); got != "order_id\n" {
		t.Errorf("after the suggested restore bronze.orders =\n%s, want no rows", got)
	}
	_ = dir
}

// TestExpectationSCD2Invariants: scd2_invariants passes on what the merge writes, and
// catches a hand-made overlap (a closed version reopened) on the next run.
func TestExpectationSCD2Invariants(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"p.yaml": `pipeline: dim
tables:
  staging.customers:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
  sales.customer:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
stages:
  - name: load
    kind: ingest
    source: landing/*.csv
    target: staging.customers
    mode: upsert
    keys: [customer_id]
  - name: merge
    kind: scd2_merge
    depends_on: [load]
    source: staging.customers
    target: sales.customer
    keys: [customer_id]
    track: [city]
    sequence_by: updated_at
    expectations:
      - {name: dimension_ok, scd2_invariants: true, on_violation: fail}
`,
		"landing/day1.csv": "customer_id,city,updated_at\nC1,Berlin,2026-01-01T00:00:00Z\nC2,Paris,2026-01-01T00:00:00Z\n",
	})
	pipeline := filepath.Join(dir, "p.yaml")
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("day 1: exit %d\n%s", r.code, r.stderr)
	}
	writeFiles(t, dir, map[string]string{"landing/day2.csv": "customer_id,city,updated_at\nC1,Rome,2026-01-02T00:00:00Z\n"})
	r := runCLI(t, "run", pipeline)
	if r.code != 0 {
		t.Fatalf("day 2: exit %d\n%s", r.code, r.stderr)
	}
	if c := checkNamed(t, runChecks(t, pipeline, runID(t, r), "merge"), "dimension_ok"); c.Failed != 0 || c.Rows != 3 {
		t.Fatalf("after day 2 dimension_ok = %+v, want passed on 3 rows", c)
	}
	// By hand: C1's closed Berlin version loses its end, so it overlaps the Rome one.
	tbl, err := delta.Open(context.Background(), storeOf(t, filepath.Join(dir, "warehouse")), "sales/customer", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	where, err := expr.Parse("customer_id = 'C1' AND city = 'Berlin'")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Update(context.Background(), delta.UpdateOptions{Where: where, Set: map[string]any{"valid_to": nil}}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "run", pipeline)
	if r.code != 1 {
		t.Fatalf("after the hand-made overlap: exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"expectation dimension_ok failed on sales.customer, which the stage did not change", "1 keys with overlapping validity intervals (valid_from, valid_to): (C1) has overlapping versions"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the error lacks %q:\n%s", want, r.stderr)
		}
	}
	c := checkNamed(t, runChecks(t, pipeline, runID(t, r), "merge"), "dimension_ok")
	if c.Failed != 2 || c.Version != 3 {
		t.Errorf("dimension_ok = %+v, want the 2 rows of C1 failing on version 3 (the hand-made one)", c)
	}
}

// TestExpectationValidate: validate names the stage, the expectation and the problem at
// its line and column: a predicate that does not parse (with its position), a column the
// target lacks, an action a check does not take.
func TestExpectationValidate(t *testing.T) {
	_, pipeline := expectOrders(t, `      - {name: q, expect: "quantity >", on_violation: drop}
      - {name: e, expect: "emial IS NOT NULL"}
      - {name: u, unique: [order_id], on_violation: drop}
      - {name: n, expect: "quantity > 'many'"}
      - {name: s, scd2_invariants: true}
`, false)
	r := runCLI(t, "validate", pipeline)
	if r.code != 1 {
		t.Fatalf("validate: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`p.yaml:26:27: stage load: expectations[0].expect: expectation q: "quantity >": parse predicate: position 11: expected a literal`,
		`p.yaml:27:27: stage load: expectations[1].expect: expectation e: the target table bronze.orders has no column "emial" (columns: order_id, email, quantity, source_file, load_timestamp)`,
		`p.yaml:28:53: stage load: expectations[2].on_violation: expectation u: drop applies to row checks (expect:); a table check is warn or fail`,
		`p.yaml:29:27: stage load: expectations[3].expect: expectation n: "quantity > 'many'"`,
		`p.yaml:30:36: stage load: expectations[4].scd2_invariants: expectation s: only on scd2_merge stages`,
	} {
		if !strings.Contains(r.stderr+r.stdout, want) {
			t.Errorf("validate output lacks\n%s\n got:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// TestExpectationValidateSpark: row checks on a stage that runs on Spark are refused
// (they would not run there).
func TestExpectationValidateSpark(t *testing.T) {
	_, pipeline := expectOrders(t, "      - {name: q, expect: \"quantity > 0\"}\n    engine: spark\n", false)
	src, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pipeline, []byte(strings.Replace(string(src), "pipeline: exp\n", "pipeline: exp\nspark: {remote: \"sc://localhost:15002\"}\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "validate", pipeline)
	if want := "p.yaml:27:27: stage load: expectations[0].expect: expectation q: row checks run in this process, not on Spark"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("validate: exit %d\n%s\nwant %s", r.code, r.stderr, want)
	}
}

// TestExpectationMaxChange: max_change compares the row count the stage's commit left
// with the version before it: a first load (from no rows) passes, a 20% growth passes
// at 20%, a 50% growth warns.
func TestExpectationMaxChange(t *testing.T) {
	dir, pipeline := expectOrders(t, "      - {name: steady, max_change: 20%}\n", false)
	steady := func(day string) scheduler.Check {
		t.Helper()
		r := runCLI(t, "run", pipeline)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", day, r.code, r.stderr)
		}
		return checkNamed(t, runChecks(t, pipeline, runID(t, r), "load"), "steady")
	}
	if c := steady("day 1"); c.Failed != 0 || c.Rows != 5 || c.Version != 1 {
		t.Errorf("day 1 (from no rows) = %+v, want passed on 5 rows at v1", c)
	}
	writeFiles(t, dir, map[string]string{"landing/b.csv": "order_id,email,quantity\n6,f@x.com,1\n"})
	if c := steady("day 2"); c.Failed != 0 || c.Rows != 6 {
		t.Errorf("day 2 (5 to 6 rows, 20%%) = %+v, want passed", c)
	}
	writeFiles(t, dir, map[string]string{"landing/c.csv": "order_id,email,quantity\n7,g@x.com,1\n8,h@x.com,1\n9,i@x.com,1\n"})
	c := steady("day 3")
	if c.Failed != 1 || c.Outcome() != "warned" || !strings.Contains(c.Detail, "9 rows at version 3, 6 at version 2 before the stage: a change of 50.0%, above 20%") {
		t.Errorf("day 3 (6 to 9 rows, 50%%) = %+v, want a warning naming both counts", c)
	}
}
