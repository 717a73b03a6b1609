package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Wrong answers found from outside, each through the binary as a user meets it: the
// smallest case of each, with what the tables must hold.

// eventsYAML declares a bronze table of customer events, an SCD2 dimension (with the
// given deletes) and an SCD1 table; stages holds the stages.
const eventsYAML = `pipeline: events
warehouse: ./warehouse
tables:
  bronze.events:
    columns:
      - {name: customer_id, type: string, nullable: %s}
      - {name: city, type: string}
      - {name: op, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties:
      delta.enableChangeDataFeed: true
  dim.customer:
    columns:
      - {name: customer_sk, type: bigint, identity: {start: 1, step: 1}}
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
  current.customer:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
stages:
  - name: load
    kind: ingest
    source: landing/*.csv
    target: bronze.events
%s`

const scd1Stage = `  - name: current
    kind: scd1_merge
    depends_on: [load]
    source: bronze.events
    source_changes: true
    target: current.customer
    keys: [customer_id]
    sequence_by: updated_at
    delete_when: "op = 'D'"
    deletes: delete
`

const scd2Stage = `  - name: history
    kind: scd2_merge
    depends_on: [load]
    source: bronze.events
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city]
    sequence_by: updated_at
    delete_when: "op = 'D'"
    deletes: %s
    columns: {surrogate_key: customer_sk}
`

func eventsDir(t *testing.T, nullable bool, stages string) (dir, pipeline string) {
	t.Helper()
	dir = t.TempDir()
	pipeline = filepath.Join(dir, "pipeline.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "landing"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pipeline, []byte(fmt.Sprintf(eventsYAML, fmt.Sprint(nullable), stages)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pipeline
}

// at is a time on 2026-01-14 at minute m.
func at(m int) string { return fmt.Sprintf("2026-01-14T00:%02d:00Z", m) }

func showCSV(t *testing.T, bin, dir, pipeline, table, columns, order string) string {
	t.Helper()
	args := []string{"table", "show", "--pipeline", pipeline, table, "--columns", columns, "--format", "csv"}
	if order != "" {
		args = append(args, "--order-by", order)
	}
	return mustRun(t, bin, dir, args...)
}

func TestWrongDataCasesThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)

	// 1. scd1_merge from a change feed over several runs: a late event must not win over
	// a newer event that repeated an earlier value of its key in one batch.
	t.Run("scd1 late event after a repeat in one batch", func(t *testing.T) {
		for _, tc := range []struct{ name, s, want string }{
			{"repeat", "S", "customer_id,city\nC1,S\n"},
			{"deletes", "", "customer_id,city\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dir, p := eventsDir(t, false, scd1Stage)
				ev := func(city string, m int) string {
					if city == "" {
						return fmt.Sprintf("C1,,D,%s", at(m))
					}
					return fmt.Sprintf("C1,%s,U,%s", city, at(m))
				}
				landFile(t, dir, "1.csv", ev("X", 6))
				mustRun(t, bin, dir, "run", p)
				landFile(t, dir, "2.csv", ev(tc.s, 2), ev("T", 9), ev(tc.s, 13))
				mustRun(t, bin, dir, "run", p)
				landFile(t, dir, "3.csv", ev("A", 11))
				mustRun(t, bin, dir, "run", p)
				if got := showCSV(t, bin, dir, p, "current.customer", "customer_id,city", ""); got != tc.want {
					t.Fatalf("current.customer:\n%s\nwant:\n%s", got, tc.want)
				}
			})
		}
	})

	// 2. deletes: tombstone keeps a version whose non-key columns are all NULL when an
	// earlier event comes in a later run.
	t.Run("tombstone keeps an all-NULL version", func(t *testing.T) {
		dir, p := eventsDir(t, false, fmt.Sprintf(scd2Stage, "tombstone"))
		landFile(t, dir, "1.csv", "C1,B,U,"+at(13))
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "2.csv", "C1,,U,"+at(11))
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "3.csv", "C1,E,U,"+at(7))
		mustRun(t, bin, dir, "run", p)
		want := "customer_id,city,valid_from,valid_to\n" +
			"C1,E," + at(7) + "," + at(11) + "\n" +
			"C1,," + at(11) + "," + at(13) + "\n" +
			"C1,B," + at(13) + ",9999-12-31T00:00:00Z\n"
		if got := showCSV(t, bin, dir, p, "dim.customer", "customer_id,city,valid_from,valid_to", "valid_from"); got != want {
			t.Fatalf("dim.customer:\n%s\nwant:\n%s", got, want)
		}
	})

	// 3. A 0-byte extract is an error naming it, and a header-only one may not empty the
	// table: nothing is written either way.
	t.Run("empty extracts never empty a table", func(t *testing.T) {
		dir, p := eventsDir(t, false, `    mode: snapshot
    keys: [customer_id]
`)
		landFile(t, dir, "2026-01-14.csv", "C1,Oslo,U,"+at(1), "C2,Rome,U,"+at(1), "C3,Lima,U,"+at(1))
		mustRun(t, bin, dir, "run", p)
		if err := os.Remove(filepath.Join(dir, "landing", "2026-01-14.csv")); err != nil {
			t.Fatal(err)
		}
		before := showCSV(t, bin, dir, p, "bronze.events", "customer_id,city", "customer_id")
		if err := os.WriteFile(filepath.Join(dir, "landing", "2026-01-15.csv"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCmdEnv(t, dir, nil, bin, "run", p)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "2026-01-15.csv is empty (0 bytes)") {
			t.Fatalf("a 0-byte extract: exit %d\n%s%s\nwant a failure naming the file", r.code, r.stdout, r.stderr)
		}
		if err := os.WriteFile(filepath.Join(dir, "landing", "2026-01-15.csv"), []byte("customer_id,city,op,updated_at\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r = runCmdEnv(t, dir, nil, bin, "run", p)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "lacks 3 of the 3 rows of bronze.events (100%), more than max_delete_fraction (0.5)") {
			t.Fatalf("a header-only extract: exit %d\n%s%s\nwant it refused naming the counts", r.code, r.stdout, r.stderr)
		}
		if got := showCSV(t, bin, dir, p, "bronze.events", "customer_id,city", "customer_id"); got != before {
			t.Fatalf("bronze after the refused extracts:\n%s\nwant it unchanged:\n%s", got, before)
		}
	})

	// 4. Daily snapshots with business time: a key missing from an extract closes at the
	// extract's date, and its return opens a version at the return's date.
	t.Run("daily snapshots with business time", func(t *testing.T) {
		dir, p := eventsDir(t, false, `    mode: snapshot
    keys: [customer_id]
    sequence_by: updated_at
`+strings.ReplaceAll(fmt.Sprintf(scd2Stage, "close"), "    delete_when: \"op = 'D'\"\n", ""))
		day := func(d int) string { return fmt.Sprintf("2026-01-%02dT00:00:00Z", d) }
		for d, keys := range [][]string{{"C1", "C2"}, {"C1"}, {"C1", "C2"}} {
			var lines []string
			for _, k := range keys {
				lines = append(lines, fmt.Sprintf("%s,Oslo,U,%s", k, day(10+d)))
			}
			landFile(t, dir, fmt.Sprintf("extract-%d.csv", d), lines...)
			mustRun(t, bin, dir, "run", p)
			if err := os.Remove(filepath.Join(dir, "landing", fmt.Sprintf("extract-%d.csv", d))); err != nil {
				t.Fatal(err)
			}
		}
		want := "customer_id,valid_from,valid_to\n" +
			"C1," + day(10) + ",9999-12-31T00:00:00Z\n" +
			"C2," + day(10) + "," + day(11) + "\n" +
			"C2," + day(12) + ",9999-12-31T00:00:00Z\n"
		if got := sortedLines(showCSV(t, bin, dir, p, "dim.customer", "customer_id,valid_from,valid_to", "")); got != sortedLines(want) {
			t.Fatalf("dim.customer:\n%s\nwant C2 closed at the date of the extract that lacked it:\n%s", got, want)
		}
	})

	// 5. A NULL key reaching a merge is refused naming the source, version, file and
	// column; validate warns of the nullable key; where lets the merge pass the row.
	t.Run("NULL key", func(t *testing.T) {
		dir, p := eventsDir(t, true, scd1Stage)
		r := runCmdEnv(t, dir, nil, bin, "validate", p)
		if r.code != 0 || !strings.Contains(r.stderr, "warning: stage current: key customer_id is nullable in source bronze.events") {
			t.Fatalf("validate: exit %d\n%s%s\nwant ok with a warning", r.code, r.stdout, r.stderr)
		}
		landFile(t, dir, "1.csv", "C1,Oslo,U,"+at(1), ",Rome,U,"+at(2))
		r = runCmdEnv(t, dir, nil, bin, "run", p)
		for _, want := range []string{"source bronze.events", "version 1", "landing/1.csv", "key column customer_id is NULL"} {
			if r.code == 0 || !strings.Contains(r.stdout+r.stderr, want) {
				t.Fatalf("run with a NULL key: exit %d\n%s%s\nwant a failure naming %q", r.code, r.stdout, r.stderr, want)
			}
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(src, "    where: customer_id IS NOT NULL\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(t, bin, dir, "run", p)
		if got, want := showCSV(t, bin, dir, p, "current.customer", "customer_id,city", ""), "customer_id,city\nC1,Oslo\n"; got != want {
			t.Fatalf("current.customer:\n%s\nwant:\n%s", got, want)
		}
	})

	// 6. Racing runs (five at once) of one upsert pipeline all succeed: a commit lost to the same
	// file's commit by another run means the file is loaded.
	t.Run("racing runs", func(t *testing.T) {
		dir, p := eventsDir(t, false, `    mode: upsert
    keys: [customer_id]
`)
		var want []string
		for f := range 10 {
			var lines []string
			for r := range 2000 {
				id := fmt.Sprintf("C%d-%04d", f, r)
				lines = append(lines, fmt.Sprintf("%s,Oslo,U,%s", id, at(f)))
				want = append(want, id)
			}
			landFile(t, dir, fmt.Sprintf("sales_%03d.csv", f), lines...)
		}
		var wg sync.WaitGroup
		results := make([]result, 5)
		for i := range results {
			wg.Go(func() { results[i] = runCmdEnv(t, dir, nil, bin, "run", p) })
		}
		wg.Wait()
		for i, r := range results {
			if r.code != 0 {
				t.Errorf("run %d: exit %d\n%s%s", i+1, r.code, r.stdout, r.stderr)
			}
		}
		got := showCSV(t, bin, dir, p, "bronze.events", "customer_id", "customer_id")
		if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != len(want)+1 {
			t.Fatalf("bronze holds %d rows, want %d", len(lines)-1, len(want))
		}
	})

	// 7. A ${VAR} set to the empty string is a value; table commands need only the
	// variables of the tables and the warehouse.
	t.Run("environment variables", func(t *testing.T) {
		dir, p := eventsDir(t, false, `    on_error: ${ON_ERROR:-fail}
  - name: other
    kind: ingest
    source: ${OTHER_LANDING}/*.csv
    target: bronze.events
`)
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(src), "warehouse: ./warehouse", "warehouse: ./warehouse${SUFFIX}", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		landFile(t, dir, "1.csv", "C1,Oslo,U,"+at(1))
		// (runCmdEnv leaves out empty values: run with SUFFIX set to "" by hand.)
		run := func(env []string, args ...string) (string, error) {
			cmd := exec.Command(bin, args...)
			cmd.Dir, cmd.Env = dir, append(commandEnv(nil), env...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := run([]string{"SUFFIX=", "OTHER_LANDING=landing"}, "run", p, "--stage", "load"); err != nil {
			t.Fatalf("SUFFIX set to the empty string: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "warehouse", "bronze", "events")); err != nil {
			t.Fatalf("the run did not write to ./warehouse: %v", err)
		}
		out, err := run([]string{"SUFFIX="}, "table", "show", "--pipeline", p, "bronze.events", "--columns", "customer_id", "--format", "csv")
		if err != nil || out != "customer_id\nC1\n" {
			t.Fatalf("table show with OTHER_LANDING unset: %v\n%s", err, out)
		}
	})
}
