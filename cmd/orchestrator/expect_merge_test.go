package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mergeChecksPipeline loads customer events (an append ingest with a change feed) into a
// history (capture_history), a dimension (scd2_merge), a current table (scd1_merge) and,
// with sales, a fact table (fact_load). Each stage's expectations replace its marker.
const mergeChecksPipeline = `pipeline: rowchecks
tables:
  staging.customers:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: score, type: int}
      - {name: op, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties: {delta.enableChangeDataFeed: true}
  audit.customers_history:
    columns:
      - {name: customer_id, type: string}
      - {name: city, type: string}
      - {name: score, type: int}
      - {name: op, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
      - {name: _change_type, type: string}
      - {name: _commit_version, type: bigint}
      - {name: _commit_timestamp, type: timestamp}
  dim.customer:
    columns:
      - {name: customer_sk, type: bigint, identity: {start: 1, step: 1}}
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: score, type: int}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
  cur.customer:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: score, type: int}
  audit.rejects:
    columns:
      - {name: source_file, type: string}
      - {name: line, type: bigint}
      - {name: column, type: string}
      - {name: value, type: string}
      - {name: error, type: string}
      - {name: record, type: string}
      - {name: expectation, type: string}
      - {name: load_timestamp, type: timestamp}
  bronze.sales:
    columns:
      - {name: sale_id, type: string, nullable: false}
      - {name: customer_id, type: string}
      - {name: amount, type: bigint}
      - {name: sold_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties: {delta.enableChangeDataFeed: true}
  fact.sales:
    columns:
      - {name: sale_id, type: string, nullable: false}
      - {name: customer_id, type: string}
      - {name: amount, type: bigint}
      - {name: sold_at, type: timestamp}
      - {name: customer_sk, type: bigint}
stages:
  - {name: load, kind: ingest, source: landing/customers/*.csv, target: staging.customers}
  - name: capture
    kind: capture_history
    depends_on: [load]
    source: staging.customers
    target: audit.customers_history
{{capture}}
  - name: dim
    kind: scd2_merge
    depends_on: [load]
    source: staging.customers
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city, score]
    sequence_by: updated_at
    delete_when: "op = 'D'"
    deletes: close
    columns: {surrogate_key: customer_sk}
{{dim}}
  - name: cur
    kind: scd1_merge
    depends_on: [load]
    source: staging.customers
    source_changes: true
    target: cur.customer
    keys: [customer_id]
    sequence_by: updated_at
    delete_when: "op = 'D'"
    deletes: delete
{{cur}}
  - {name: load_sales, kind: ingest, source: landing/sales/*.csv, target: bronze.sales}
  - name: facts
    kind: fact_load
    depends_on: [dim, load_sales]
    source: bronze.sales
    source_changes: true
    target: fact.sales
    keys: [sale_id]
    lookups:
      - dimension: dim.customer
        on: {customer_id: customer_id}
        at: sold_at
        key: customer_sk
        missing: fail
{{facts}}
`

// Day 1: C2 has a score that is not positive. Day 2: C1 moves to Munich with a bad score,
// C3 is deleted (a delete event: no score, and not judged), then C1 moves to Hamburg.
const (
	rcDay1  = "customer_id,city,score,op,updated_at\nC1,Berlin,5,U,2026-01-01T00:00:00Z\nC2,Paris,-1,U,2026-01-01T00:00:00Z\nC3,Rome,3,U,2026-01-01T00:00:00Z\n"
	rcDay2  = "customer_id,city,score,op,updated_at\nC1,Munich,-2,U,2026-01-02T00:00:00Z\nC3,,,D,2026-01-02T00:00:00Z\nC1,Hamburg,4,U,2026-01-03T00:00:00Z\n"
	rcSales = "sale_id,customer_id,amount,sold_at\nS1,C1,10,2026-01-01T12:00:00Z\nS2,C3,-5,2026-01-01T12:00:00Z\nS3,C1,7,2026-01-02T12:00:00Z\n"
)

// rowChecksPipeline writes the pipeline with expectation (one YAML flow mapping) on
// stage, and day 1's files.
func rowChecksPipeline(t *testing.T, stage, expectation string) (dir, pipeline string) {
	t.Helper()
	dir = t.TempDir()
	yaml := mergeChecksPipeline
	for _, s := range []string{"capture", "dim", "cur", "facts"} {
		block := ""
		if s == stage {
			block = "    expectations:\n      - " + expectation
		}
		yaml = strings.Replace(yaml, "{{"+s+"}}\n", block+"\n", 1)
	}
	writeFiles(t, dir, map[string]string{
		"p.yaml":                     yaml,
		"landing/customers/day1.csv": rcDay1,
		"landing/sales/s1.csv":       rcSales,
	})
	return dir, filepath.Join(dir, "p.yaml")
}

// sortedShow is expectShow with its rows sorted (the header first).
func sortedShow(t *testing.T, pipeline, table, columns string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(expectShow(t, pipeline, table, columns), "\n"), "\n")
	slices.Sort(lines[1:])
	return strings.Join(lines, "\n") + "\n"
}

// lastVersion is the newest version of a table in the warehouse (-1: none).
func lastVersion(t *testing.T, dir, table string) int64 {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "warehouse", strings.ReplaceAll(table, ".", "/"), "_delta_log"))
	if err != nil {
		return -1
	}
	last := int64(-1)
	for v := int64(0); ; v++ {
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == versionFile(v) }) {
			return last
		}
		last = v
	}
}

// TestRowChecksOnMerges runs each row check action the stage kind takes on
// scd2_merge, scd1_merge, capture_history and fact_load, over two days of events, and
// looks at what a user would: the table's rows, the run record's counts and sample, the
// commitInfo keys, and for fail the table left as it was.
func TestRowChecksOnMerges(t *testing.T) {
	const pred = `"score > 0"`
	cases := []struct {
		stage, table, action, columns string
		expect                        string
		// after day 1 and after day 2 (warn, drop); "" for fail
		wantDay1, wantDay2 string
		// the rows checked and failed each day
		checked1, failed1, checked2, failed2 int64
		sample                               string
	}{
		{stage: "dim", table: "dim.customer", action: "warn", columns: "customer_id,city,score,is_current", expect: pred,
			wantDay1: "customer_id,city,score,is_current\nC1,Berlin,5,true\nC2,Paris,-1,true\nC3,Rome,3,true\n",
			wantDay2: "customer_id,city,score,is_current\nC1,Berlin,5,false\nC1,Hamburg,4,true\nC1,Munich,-2,false\nC2,Paris,-1,true\nC3,Rome,3,false\n",
			checked1: 3, failed1: 1, checked2: 2, failed2: 1, sample: `staging.customers version 1, row from `},
		// A dropped event never happened: C1 goes from Berlin straight to Hamburg, its
		// versions still chained; C2 never enters.
		{stage: "dim", table: "dim.customer", action: "drop", columns: "customer_id,city,score,is_current", expect: pred,
			wantDay1: "customer_id,city,score,is_current\nC1,Berlin,5,true\nC3,Rome,3,true\n",
			wantDay2: "customer_id,city,score,is_current\nC1,Berlin,5,false\nC1,Hamburg,4,true\nC3,Rome,3,false\n",
			checked1: 3, failed1: 1, checked2: 2, failed2: 1},
		{stage: "dim", table: "dim.customer", action: "fail", expect: pred, checked1: 3, failed1: 1},
		{stage: "cur", table: "cur.customer", action: "warn", columns: "customer_id,city,score", expect: pred,
			wantDay1: "customer_id,city,score\nC1,Berlin,5\nC2,Paris,-1\nC3,Rome,3\n",
			wantDay2: "customer_id,city,score\nC1,Hamburg,4\nC2,Paris,-1\n",
			checked1: 3, failed1: 1, checked2: 2, failed2: 1},
		{stage: "cur", table: "cur.customer", action: "drop", columns: "customer_id,city,score", expect: pred,
			wantDay1: "customer_id,city,score\nC1,Berlin,5\nC3,Rome,3\n",
			wantDay2: "customer_id,city,score\nC1,Hamburg,4\n",
			checked1: 3, failed1: 1, checked2: 2, failed2: 1},
		{stage: "cur", table: "cur.customer", action: "fail", expect: pred, checked1: 3, failed1: 1},
		// The history rows: every change row of the source (here inserts only).
		{stage: "capture", table: "audit.customers_history", action: "warn", columns: "customer_id,city,score,_change_type", expect: pred,
			wantDay1: "customer_id,city,score,_change_type\nC1,Berlin,5,insert\nC2,Paris,-1,insert\nC3,Rome,3,insert\n",
			wantDay2: "customer_id,city,score,_change_type\nC1,Berlin,5,insert\nC1,Hamburg,4,insert\nC1,Munich,-2,insert\nC2,Paris,-1,insert\nC3,,,insert\nC3,Rome,3,insert\n",
			checked1: 3, failed1: 1, checked2: 3, failed2: 2, sample: "staging.customers version 1 (insert): "},
		{stage: "capture", table: "audit.customers_history", action: "fail", expect: pred, checked1: 3, failed1: 1},
		// The facts the merge writes: S2's amount is negative. On day 2 C1's Munich
		// version re-keys S3 (sold on the 2nd): the updated fact is judged too.
		{stage: "facts", table: "fact.sales", action: "warn", columns: "sale_id,amount", expect: `"amount > 0"`,
			wantDay1: "sale_id,amount\nS1,10\nS2,-5\nS3,7\n", wantDay2: "sale_id,amount\nS1,10\nS2,-5\nS3,7\n",
			checked1: 3, failed1: 1, checked2: 1, sample: "a fact from bronze.sales@v1 (key S2): "},
		// drop: S2 never enters; the re-keyed S3 is not judged by drop (its amount is
		// the one it was loaded with), so day 2 checks nothing.
		{stage: "facts", table: "fact.sales", action: "drop", columns: "sale_id,amount", expect: `"amount > 0"`,
			wantDay1: "sale_id,amount\nS1,10\nS3,7\n", wantDay2: "sale_id,amount\nS1,10\nS3,7\n",
			checked1: 3, failed1: 1, checked2: 0, sample: "a fact from bronze.sales@v1 (key S2): "},
		{stage: "facts", table: "fact.sales", action: "fail", expect: `"amount > 0"`, checked1: 3, failed1: 1},
	}
	for _, c := range cases {
		t.Run(c.stage+"/"+c.action, func(t *testing.T) {
			dir, pipeline := rowChecksPipeline(t, c.stage, "{name: positive, expect: "+c.expect+", on_violation: "+c.action+"}")
			if r := runCLI(t, "validate", pipeline); r.code != 0 {
				t.Fatalf("validate: exit %d\n%s", r.code, r.stderr)
			}
			before := lastVersion(t, dir, c.table)
			r := runCLI(t, "run", pipeline)
			wantCode := 0
			if c.action == "fail" {
				wantCode = 1
			}
			if r.code != wantCode {
				t.Fatalf("day 1: exit %d, want %d\n%s", r.code, wantCode, r.stderr)
			}
			chk := checkNamed(t, runChecks(t, pipeline, runID(t, r), c.stage), "positive")
			if chk.Rows != c.checked1 || chk.Failed != c.failed1 || chk.Action != c.action || chk.Check != "expect" || chk.Table != c.table {
				t.Errorf("day 1 run record check = %+v, want %d of %d rows failed on %s, on_violation %s", chk, c.failed1, c.checked1, c.table, c.action)
			}
			if c.sample != "" && !strings.Contains(chk.Detail, "first at "+c.sample) {
				t.Errorf("check detail %q does not say where the first violating row came from (%q)", chk.Detail, c.sample)
			}
			if c.action == "fail" {
				if v := lastVersion(t, dir, c.table); v != before {
					t.Errorf("a failing row check left %s at version %d, want %d (unchanged)", c.table, v, before)
				}
				for _, want := range []string{"expectation positive failed", "is not " + strings.Trim(c.expect, `"`), "nothing was committed, " + c.table + " is unchanged"} {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("the error lacks %q:\n%s", want, r.stderr)
					}
				}
				if chk.Version != -1 {
					t.Errorf("a failed check names version %d, want -1 (no commit)", chk.Version)
				}
				return
			}
			if got := sortedShow(t, pipeline, c.table, c.columns); got != c.wantDay1 {
				t.Errorf("day 1: %s =\n%s\nwant\n%s", c.table, got, c.wantDay1)
			}
			v := lastVersion(t, dir, c.table)
			if chk.Version != v {
				t.Errorf("the check names version %d, want %d (the commit with the rows)", chk.Version, v)
			}
			ci := commitExpectations(t, dir, c.table, v)
			want := map[string]any{"name": "positive", "onViolation": c.action, "numCheckedRows": float64(c.checked1),
				"numPassedRows": float64(c.checked1 - c.failed1), "numFailedRows": float64(c.failed1)}
			if len(ci) != 1 || !mapsEqual(ci[0], want) {
				t.Errorf("commitInfo.orchestrator.expectations = %v, want [%v]", ci, want)
			}
			// Day 2, then a run with nothing new: nothing is checked twice.
			writeFiles(t, dir, map[string]string{"landing/customers/day2.csv": rcDay2})
			r = runCLI(t, "run", pipeline)
			if r.code != 0 {
				t.Fatalf("day 2: exit %d\n%s", r.code, r.stderr)
			}
			if got := sortedShow(t, pipeline, c.table, c.columns); got != c.wantDay2 {
				t.Errorf("day 2: %s =\n%s\nwant\n%s", c.table, got, c.wantDay2)
			}
			chk = checkNamed(t, runChecks(t, pipeline, runID(t, r), c.stage), "positive")
			if chk.Rows != c.checked2 || chk.Failed != c.failed2 {
				t.Errorf("day 2 run record check = %+v, want %d of %d rows failed", chk, c.failed2, c.checked2)
			}
			if r = runCLI(t, "run", pipeline); r.code != 0 {
				t.Fatalf("day 3: exit %d\n%s", r.code, r.stderr)
			}
			if got := sortedShow(t, pipeline, c.table, c.columns); got != c.wantDay2 {
				t.Errorf("a run with nothing new changed %s:\n%s", c.table, got)
			}
		})
	}
}

// TestRowChecksValidateMerges: validate refuses, with the reason, the row check actions
// that would make what a stage writes wrong, and a merge's predicate over a column the
// merge computes.
func TestRowChecksValidateMerges(t *testing.T) {
	snapshot := func(stage string) func(string) string {
		return func(yaml string) string {
			return strings.Replace(yaml, "source_changes: true\n    target: "+stage, "target: "+stage, 1)
		}
	}
	cases := []struct {
		stage, exp string
		edit       func(string) string
		want       string
	}{
		{"capture", `{name: positive, expect: "score > 0", on_violation: drop}`, nil,
			"stage capture: expectations[0].on_violation: expectation positive: drop on this capture_history stage: the history is the record of every change its source made, version by version"},
		{"capture", `{name: positive, expect: "score > 0", on_violation: quarantine}`, nil,
			"stage capture: expectations[0].on_violation: expectation positive: quarantine on this capture_history stage: the history is the record of every change its source made"},
		{"facts", `{name: positive, expect: "amount > 0", on_violation: quarantine}`, nil,
			"stage facts: expectations[0].on_violation: expectation positive: quarantine on this fact_load stage: quarantine needs the stage's quarantine_table"},
		{"facts", `{name: positive, expect: "amount > 0", on_violation: quarantine}` + "\n    quarantine_table: audit.rejects", snapshot("fact.sales"),
			"stage facts: expectations[0].on_violation: expectation positive: quarantine on this fact_load stage: a fact load quarantines the new facts of its source's change feed (source_changes: true)"},
		{"facts", `{name: known, expect: "customer_sk > 0", on_violation: drop}`, nil,
			"stage facts: expectations[0].expect: expectation known: drop on this fact_load stage: the predicate reads customer_sk, a key the lookups compute"},
		{"dim", `{name: positive, expect: "score > 0", on_violation: quarantine}`, nil,
			"stage dim: expectations[0].on_violation: expectation positive: quarantine on this scd2_merge stage: quarantine needs the stage's quarantine_table: declare one with the columns source_file, line, column, value, error, record, load_timestamp"},
		{"cur", `{name: positive, expect: "score > 0", on_violation: quarantine}` + "\n    quarantine_table: audit.rejects", snapshot("cur.customer"),
			"stage cur: expectations[0].on_violation: expectation positive: quarantine on this scd1_merge stage: a merge quarantines the change events of its source's change feed (source_changes: true)"},
		{"dim", `{name: positive, expect: "score > 0", on_violation: quarantine}` + "\n    quarantine_table: dim.customer", nil,
			"stage dim: expectations[0].on_violation: expectation positive: quarantine on this scd2_merge stage: the quarantine_table must differ from the source and the target"},
		{"dim", `{name: positive, expect: "score > 0", on_violation: quarantine}` + "\n    quarantine_table: fact.sales", nil,
			"stage dim: quarantine_table: table fact.sales has no column"},
		{"dim", `{name: positive, expect: "score > 0", on_violation: drop}`, snapshot("dim.customer"),
			"stage dim: expectations[0].on_violation: expectation positive: drop on this scd2_merge stage: this merge reads its source's snapshot and closes the keys the snapshot lacks, so a dropped row would end its key's current version"},
		{"cur", `{name: positive, expect: "score > 0", on_violation: drop}`, snapshot("cur.customer"),
			"stage cur: expectations[0].on_violation: expectation positive: drop on this scd1_merge stage: this merge reads its source's snapshot and deletes the keys the snapshot lacks"},
		{"", "", func(yaml string) string {
			return strings.Replace(yaml, "{name: load, kind: ingest, source: landing/customers/*.csv, target: staging.customers}",
				"{name: load, kind: ingest, source: landing/customers/*.csv, target: staging.customers, mode: snapshot, keys: [customer_id], expectations: [{name: positive, expect: \"score > 0\", on_violation: drop}]}", 1)
		}, "stage load: expectations[0].on_violation: expectation positive: drop on this ingest stage: a snapshot ingest deletes the keys its files lack, so a row left out would delete its key's row from the table"},
		{"dim", `{name: positive, expect: "score > 0", on_violation: drop}` + "\n    quarantine_table: audit.rejects", nil,
			"stage dim: quarantine_table: only used by row expectations with on_violation: quarantine, and this stage has none"},
		{"dim", `{name: dated, expect: "valid_from IS NOT NULL", on_violation: warn}`, nil,
			`stage dim: expectations[0].expect: expectation dated: a merge's row checks judge each change it takes from its source staging.customers, before it becomes a version; column "valid_from" is computed by the merge, not in the source`},
	}
	for _, c := range cases {
		_, pipeline := rowChecksPipeline(t, c.stage, c.exp)
		if c.edit != nil {
			src, err := os.ReadFile(pipeline)
			if err != nil {
				t.Fatal(err)
			}
			edited := c.edit(string(src))
			if edited == string(src) {
				t.Fatalf("the edit of %s changed nothing", c.stage)
			}
			if err := os.WriteFile(pipeline, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := runCLI(t, "validate", pipeline)
		if r.code != 1 || !strings.Contains(r.stderr, "p.yaml:") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("validate: exit %d\n%s\nwant (at its line) %s", r.code, r.stderr, c.want)
		}
	}
	// Read from the change feed, or with deletes: ignore, a dropped row is an event that
	// never came: validate takes it.
	_, pipeline := rowChecksPipeline(t, "dim", `{name: positive, expect: "score > 0", on_violation: drop}`)
	src, _ := os.ReadFile(pipeline)
	ignore := strings.Replace(snapshot("dim.customer")(string(src)), "deletes: close", "deletes: ignore", 1)
	if err := os.WriteFile(pipeline, []byte(ignore), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "validate", pipeline); r.code != 0 {
		t.Errorf("validate of drop on a snapshot scd2_merge with deletes: ignore: exit %d\n%s", r.code, r.stderr)
	}
}

// TestRowChecksQuarantineOnMerges: a merge reading its source's change feed sets the
// violating events aside in its quarantine table, with the expectation's name, the
// source version and file they came from, the column and value, and the whole row; the
// target is as if they never came (as with drop), and no run quarantines one twice.
func TestRowChecksQuarantineOnMerges(t *testing.T) {
	for _, c := range []struct{ stage, table, columns, wantDay2 string }{
		{"dim", "dim.customer", "customer_id,city,score,is_current", "customer_id,city,score,is_current\nC1,Berlin,5,false\nC1,Hamburg,4,true\nC3,Rome,3,false\n"},
		{"cur", "cur.customer", "customer_id,city,score", "customer_id,city,score\nC1,Hamburg,4\n"},
	} {
		t.Run(c.stage, func(t *testing.T) {
			dir, pipeline := rowChecksPipeline(t, c.stage, `{name: positive, expect: "score > 0", on_violation: quarantine}`+"\n    quarantine_table: audit.rejects")
			if r := runCLI(t, "validate", pipeline); r.code != 0 {
				t.Fatalf("validate: exit %d\n%s", r.code, r.stderr)
			}
			if r := runCLI(t, "run", pipeline); r.code != 0 {
				t.Fatalf("day 1: exit %d\n%s", r.code, r.stderr)
			}
			writeFiles(t, dir, map[string]string{"landing/customers/day2.csv": rcDay2})
			r := runCLI(t, "run", pipeline)
			if r.code != 0 {
				t.Fatalf("day 2: exit %d\n%s", r.code, r.stderr)
			}
			if got := sortedShow(t, pipeline, c.table, c.columns); got != c.wantDay2 {
				t.Errorf("%s =\n%s\nwant\n%s", c.table, got, c.wantDay2)
			}
			chk := checkNamed(t, runChecks(t, pipeline, runID(t, r), c.stage), "positive")
			if chk.Rows != 2 || chk.Failed != 1 || chk.Action != "quarantine" || chk.Outcome() != "quarantined" {
				t.Errorf("day 2 check = %+v, want 1 of 2 rows quarantined", chk)
			}
			day1 := filepath.Join(dir, "landing", "customers", "day1.csv")
			day2 := filepath.Join(dir, "landing", "customers", "day2.csv")
			want := "source_file,column,value,expectation,error,record\n" +
				`"staging.customers version 1, row from ` + day1 + `",score,-1,positive,"staging.customers version 1, row from ` + day1 + `: expectation positive violated: score > 0",` +
				`"{""customer_id"":""C2"",""city"":""Paris"",""score"":-1,""op"":""U"",""updated_at"":""2026-01-01T00:00:00Z"",""source_file"":""` + day1 + `"",""load_timestamp"":`
			got := sortedShow(t, pipeline, "audit.rejects", "source_file,column,value,expectation,error,record")
			if !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 3 || !strings.Contains(got, `"staging.customers version 2, row from `+day2+`",score,-2,positive,`) {
				t.Errorf("quarantine =\n%s\nwant C2 of version 1 (starting %s) and C1's Munich event of version 2", got, want)
			}
			// A change event has no line: NULL, not 0.
			if got := sortedShow(t, pipeline, "audit.rejects", "line,expectation"); got != "line,expectation\n,positive\n,positive\n" {
				t.Errorf("quarantine lines =\n%q, want NULL (empty) for both events", got)
			}
			// The quarantine's commits hold the counts too.
			if ci := commitExpectations(t, dir, "audit.rejects", lastVersion(t, dir, "audit.rejects")); len(ci) != 1 || ci[0]["numFailedRows"] != 1.0 {
				t.Errorf("the quarantine commit's expectations %v, want the day's 1 failed row", ci)
			}
			if r := runCLI(t, "run", pipeline); r.code != 0 {
				t.Fatalf("day 3: exit %d\n%s", r.code, r.stderr)
			}
			if got := sortedShow(t, pipeline, "audit.rejects", "expectation"); got != "expectation\npositive\npositive\n" {
				t.Errorf("after a run with nothing new the quarantine holds\n%s, want the 2 rows once", got)
			}
		})
	}
}

// TestRowChecksQuarantineOnFacts: a fact_load reading its source's change feed sets the
// violating new facts aside in its quarantine table, with the expectation's name, the
// source version, no line (NULL), the column and value; they are not in the fact table
// (a fact loaded before whose change violates leaves it), the run record and both
// commits count them, and no run quarantines one twice.
func TestRowChecksQuarantineOnFacts(t *testing.T) {
	dir, pipeline := rowChecksPipeline(t, "facts", `{name: positive, expect: "amount > 0", on_violation: quarantine}`+"\n    quarantine_table: audit.rejects")
	if r := runCLI(t, "validate", pipeline); r.code != 0 {
		t.Fatalf("validate: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, "run", pipeline)
	if r.code != 0 {
		t.Fatalf("day 1: exit %d\n%s", r.code, r.stderr)
	}
	if got, want := sortedShow(t, pipeline, "fact.sales", "sale_id,amount"), "sale_id,amount\nS1,10\nS3,7\n"; got != want {
		t.Errorf("fact.sales =\n%s\nwant\n%s", got, want)
	}
	chk := checkNamed(t, runChecks(t, pipeline, runID(t, r), "facts"), "positive")
	if chk.Rows != 3 || chk.Failed != 1 || chk.Action != "quarantine" || chk.Outcome() != "quarantined" {
		t.Errorf("day 1 check = %+v, want 1 of 3 facts quarantined", chk)
	}
	for _, table := range []string{"fact.sales", "audit.rejects"} {
		if ci := commitExpectations(t, dir, table, lastVersion(t, dir, table)); len(ci) != 1 || ci[0]["numFailedRows"] != 1.0 || ci[0]["onViolation"] != "quarantine" {
			t.Errorf("%s's commit expectations %v, want the 1 quarantined fact", table, ci)
		}
	}
	const cols = "expectation,source_file,line,column,value"
	day1 := "expectation,source_file,line,column,value\npositive,bronze.sales@v1,,amount,-5\n"
	if got := sortedShow(t, pipeline, "audit.rejects", cols); got != day1 {
		t.Errorf("quarantine =\n%s\nwant\n%s", got, day1)
	}
	// S1's amount turns negative: the fact leaves the table, into the quarantine.
	writeFiles(t, dir, map[string]string{"landing/sales/s2.csv": "sale_id,customer_id,amount,sold_at\nS1,C1,-3,2026-01-01T12:00:00Z\n"})
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("day 2: exit %d\n%s", r.code, r.stderr)
	}
	if got, want := sortedShow(t, pipeline, "fact.sales", "sale_id,amount"), "sale_id,amount\nS3,7\n"; got != want {
		t.Errorf("day 2 fact.sales =\n%s\nwant\n%s", got, want)
	}
	day2 := day1 + "positive,bronze.sales@v2,,amount,-3\n"
	if got := sortedShow(t, pipeline, "audit.rejects", cols); got != day2 {
		t.Errorf("day 2 quarantine =\n%s\nwant\n%s", got, day2)
	}
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("day 3: exit %d\n%s", r.code, r.stderr)
	}
	if got := sortedShow(t, pipeline, "audit.rejects", cols); got != day2 {
		t.Errorf("after a run with nothing new the quarantine holds\n%s\nwant\n%s", got, day2)
	}
}
