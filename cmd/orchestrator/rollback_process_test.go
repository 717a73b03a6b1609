package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// The tables of the rollback scenario: customers loaded by key into a staging table
// with a change feed, its audit history, and a type 2 dimension merged from its change
// feed by business time.
const rbTables = `
  staging.customers:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties: {delta.enableChangeDataFeed: true}
`

const rbDownstreamTables = `
  audit.customers_history:
    columns:
      - {name: customer_id, type: string}
      - {name: city, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
      - {name: _change_type, type: string}
      - {name: _commit_version, type: bigint}
      - {name: _commit_timestamp, type: timestamp}
  sales.customer:
    columns:
      - {name: customer_sk, type: bigint, identity: {start: 1, step: 1}}
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
    properties: {delta.enableChangeDataFeed: true}
`

const rbIngest = `
  - {name: ingest_customers, kind: ingest, source: %s/*.csv, target: staging.customers, mode: upsert, keys: [customer_id]}
`

const rbDownstream = `
  - {name: capture_customers, kind: capture_history, source: staging.customers, target: audit.customers_history%[1]s}
  - name: merge_customers
    kind: scd2_merge
    source: staging.customers
    source_changes: true
    target: sales.customer
    keys: [customer_id]
    track: [city]
    sequence_by: updated_at
    deletes: close
    columns: {surrogate_key: customer_sk}%[2]s
`

// rbPipelines writes the scenario's pipeline files into dir/pipes: one pipeline with
// every stage (split false), or the ingest in one file and its readers in another.
func rbPipelines(t *testing.T, dir, warehouse string, split bool) []string {
	ingest := fmt.Sprintf(rbIngest, filepath.Join(dir, "landing"))
	if !split {
		writeFiles(t, dir, map[string]string{"pipes/sales.yaml": "pipeline: sales\nschedule: \"@every 2s\"\n" + warehouse +
			"\ntables:" + rbTables + rbDownstreamTables + "stages:" + ingest + fmt.Sprintf(rbDownstream, ", depends_on: [ingest_customers]", "\n    depends_on: [ingest_customers]")})
		return []string{"sales"}
	}
	writeFiles(t, dir, map[string]string{
		"pipes/sales.yaml":   "pipeline: sales\nschedule: \"@every 2s\"\n" + warehouse + "\ntables:" + rbTables + "stages:" + ingest,
		"pipes/history.yaml": "pipeline: history\nschedule: \"@every 2s\"\n" + warehouse + "\ntables:" + rbTables + rbDownstreamTables + "stages:" + fmt.Sprintf(rbDownstream, "", ""),
	})
	return []string{"sales", "history"}
}

// TestRollbackKeepsHistoryTrue: a run loads a bad file into staging.customers, which a
// capture_history and an SCD2 merge read; `runs rollback` undoes it; then the next
// scheduled runs (of a serve) find nothing new. Afterwards staging.customers equals its
// version before the bad run; the RESTORE's change feed holds only the net changes (the
// bad new customer's delete, the bad change's pre/post images back); the audit history
// holds each bad change once and its reversal once, at the RESTORE's version, and
// nothing else new; and the dimension equals one built from the same files without the
// bad one (surrogate keys aside: those the bad run handed out are not reused), before
// and after a good file that comes later. With every stage in one pipeline, with the
// readers in a second pipeline file that read the bad run before the rollback, and in
// one that had not read it yet.
func TestRollbackKeepsHistoryTrue(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name         string
		split        bool
		readBadFirst bool // the readers' pipeline ran after the bad run, before the rollback
	}{
		{"one pipeline", false, true},
		{"readers in a second pipeline", true, true},
		{"readers in a second pipeline that had not read the bad run", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			wh := localWarehouse(t, filepath.Join(dir, "warehouse"))
			names := rbPipelines(t, dir, wh.yaml, tc.split)
			pipes := filepath.Join(dir, "pipes")
			file := func(name string) string { return filepath.Join(pipes, name+".yaml") }
			run := func(name string) string {
				t.Helper()
				r := runCmdEnv(t, "", wh.env, bin, "run", file(name))
				if r.code != 0 {
					t.Fatalf("run %s: exit %d\n%s", name, r.code, r.stderr)
				}
				return runID(t, r)
			}
			runAll := func() string {
				var first string
				for _, n := range names {
					if id := run(n); first == "" {
						first = id
					}
				}
				return first
			}
			ctx := context.Background()
			table := func(path string) *delta.Table {
				tbl, err := delta.Open(ctx, wh.store, path, delta.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return tbl
			}

			writeFiles(t, dir, map[string]string{"landing/1.csv": "customer_id,city,updated_at\nc1,Berlin,2026-01-01T00:00:00\nc2,Paris,2026-01-01T00:00:00\nc3,Rome,2026-01-01T00:00:00\n"})
			runAll()
			staging := table("staging/customers")
			goodVersion := latestVersion(t, staging)
			goodRows := rowStrings(t, staging, goodVersion, "customer_id", "city", "updated_at")

			// The bad file: c2 moves to a city that does not exist, c4 is no customer.
			writeFiles(t, dir, map[string]string{"landing/2.csv": "customer_id,city,updated_at\nc2,XXX,2026-01-02T00:00:00\nc4,Nowhere,2026-01-02T00:00:00\n"})
			badID := run("sales")
			if tc.split && tc.readBadFirst {
				run("history")
			}
			auditBefore := rowStrings(t, table("audit/customers_history"), -1, "customer_id", "city", "_change_type", "_commit_version")

			args := []string{"runs", "rollback", badID, "--pipelines", pipes}
			dry := runCmdEnv(t, "", wh.env, bin, append(args, "--dry-run")...)
			wantReader := "rolled back"
			if !tc.readBadFirst {
				wantReader = "skips the run"
			}
			for _, want := range []string{"staging.customers", "records the reversal", wantReader} {
				if dry.code != 0 || !strings.Contains(dry.stdout, want) {
					t.Errorf("dry run: exit %d\n%s%s\nwant %q", dry.code, dry.stdout, dry.stderr, want)
				}
			}
			rb := runCmdEnv(t, "", wh.env, bin, args...)
			if rb.code != 0 {
				t.Fatalf("rollback: exit %d\n%s%s", rb.code, rb.stdout, rb.stderr)
			}
			m := regexp.MustCompile(`rolled back by run (\S+)`).FindStringSubmatch(rb.stderr)
			if m == nil {
				t.Fatalf("rollback stderr:\n%s", rb.stderr)
			}
			rbID := m[1]
			restoreVersion := latestVersion(t, staging)
			if h, err := staging.History(ctx, 1); err != nil || h[0].Operation != "RESTORE" || h[0].Lineage == nil || h[0].Lineage.RunID != rbID {
				t.Errorf("staging.customers' last commit %+v (%v), want the RESTORE by run %s", h, err, rbID)
			}

			// The next scheduled runs: a serve runs every pipeline's next slots.
			store := scheduler.NewStore(wh.store)
			srv := startServe(t, bin, pipes, wh.env)
			waitScheduled := func(after time.Time) {
				t.Helper()
				for _, n := range names {
					waitFor(t, 60*time.Second, "a scheduled run of "+n, func() bool {
						for _, r := range runsOf(t, store, n) {
							if r.Trigger.Kind == scheduler.Scheduled && r.Created.After(after) && r.Status == scheduler.Succeeded {
								return true
							}
						}
						return false
					})
				}
			}
			waitScheduled(time.Now())
			srv.term(t)

			if got := rowStrings(t, staging, -1, "customer_id", "city", "updated_at"); !slices.Equal(got, goodRows) {
				t.Errorf("staging.customers after the rollback and the next run:\n%v\nwant its version before the bad run:\n%v", got, goodRows)
			}
			// The RESTORE's change feed: the net changes only.
			feed := changeStrings(t, staging, restoreVersion, restoreVersion, "customer_id", "city")
			wantFeed := []string{"c2 Paris update_postimage", "c2 XXX update_preimage", "c4 Nowhere delete"}
			if !slices.Equal(feed, wantFeed) {
				t.Errorf("change feed of the RESTORE (version %d):\n%v\nwant the net changes:\n%v", restoreVersion, feed, wantFeed)
			}
			// The audit history: each bad change once, its reversal once at the RESTORE's
			// version, nothing else new.
			audit := rowStrings(t, table("audit/customers_history"), -1, "customer_id", "city", "_change_type", "_commit_version")
			v := fmt.Sprint(restoreVersion)
			wantAudit := slices.Clone(auditBefore)
			if tc.split && !tc.readBadFirst { // it records the bad changes now, then their reversal
				bad := fmt.Sprint(restoreVersion - 1)
				wantAudit = append(wantAudit, "c2 Paris update_preimage "+bad, "c2 XXX update_postimage "+bad, "c4 Nowhere insert "+bad)
			}
			wantAudit = append(wantAudit, "c2 XXX update_preimage "+v, "c2 Paris update_postimage "+v, "c4 Nowhere delete "+v)
			slices.Sort(wantAudit)
			if !slices.Equal(audit, wantAudit) {
				t.Errorf("audit.customers_history:\n%v\nwant:\n%v", audit, wantAudit)
			}
			for _, c := range []string{"c2 XXX update_postimage", "c4 Nowhere insert"} {
				if n := countPrefix(audit, c); n != 1 {
					t.Errorf("audit.customers_history holds %q %d times, want once", c, n)
				}
			}

			// The dimension equals one built from the good files alone.
			ref := referenceDimension(t, bin, dir, []string{"1.csv"})
			dim := table("sales/customer")
			if got := dimensionRows(t, dim); !slices.Equal(got, ref) {
				t.Errorf("sales.customer:\n%v\nwant the dimension of the good file alone:\n%v", got, ref)
			}
			old, err := store.Get(ctx, badID)
			if err != nil || old.RolledBackBy != rbID {
				t.Errorf("the bad run's record: rolled back by %q (%v), want %s", old.RolledBackBy, err, rbID)
			}

			// A good file later: the merge goes on from the RESTORE, as if the bad file never was.
			writeFiles(t, dir, map[string]string{"landing/3.csv": "customer_id,city,updated_at\nc3,Milan,2026-01-03T00:00:00\nc5,Oslo,2026-01-03T00:00:00\n"})
			srv = startServe(t, bin, pipes, wh.env)
			waitFor(t, 60*time.Second, "the good file to reach the dimension", func() bool {
				return slices.Contains(dimensionRows(t, dim), "c5 Oslo 2026-01-03T00:00:00Z 9999-12-31T00:00:00Z true")
			})
			srv.term(t)
			ref = referenceDimension(t, bin, dir, []string{"1.csv", "3.csv"})
			if got := dimensionRows(t, dim); !slices.Equal(got, ref) {
				t.Errorf("sales.customer after a good file:\n%v\nwant the dimension of the good files alone:\n%v", got, ref)
			}
		})
	}
}

// referenceDimension builds the scenario's dimension in a warehouse of its own from the
// given landing files, one run per file, and returns its rows.
func referenceDimension(t *testing.T, bin, dir string, files []string) []string {
	t.Helper()
	ref := t.TempDir()
	wh := localWarehouse(t, filepath.Join(ref, "warehouse"))
	rbPipelines(t, ref, wh.yaml, false)
	for _, f := range files {
		writeFiles(t, ref, map[string]string{"landing/" + f: readFile(t, filepath.Join(dir, "landing", f))})
		if r := runCmdEnv(t, "", wh.env, bin, "run", filepath.Join(ref, "pipes", "sales.yaml")); r.code != 0 {
			t.Fatalf("reference run: exit %d\n%s", r.code, r.stderr)
		}
	}
	tbl, err := delta.Open(context.Background(), wh.store, "sales/customer", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dimensionRows(t, tbl)
}

// dimensionRows are a dimension's rows without their surrogate keys, sorted.
func dimensionRows(t *testing.T, tbl *delta.Table) []string {
	return rowStrings(t, tbl, -1, "customer_id", "city", "valid_from", "valid_to", "is_current")
}

func latestVersion(t *testing.T, tbl *delta.Table) int64 {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version()
}

// rowStrings reads columns of a table at a version (-1: the latest), one string per
// row, sorted.
func rowStrings(t *testing.T, tbl *delta.Table, version int64, columns ...string) []string {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err == nil && version >= 0 {
		snap, err = tbl.SnapshotAt(ctx, version)
	}
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: columns})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		out = append(out, recordStrings(sc.RecordBatch())...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// changeStrings reads the change feed of versions from..to: columns and _change_type.
func changeStrings(t *testing.T, tbl *delta.Table, from, to int64, columns ...string) []string {
	t.Helper()
	r, err := tbl.Changes(context.Background(), delta.ChangesOptions{StartVersion: &from, EndVersion: &to, Columns: columns})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var out []string
	for r.Next() {
		rec := r.RecordBatch()
		n := len(columns) + 1 // the data columns and _change_type
		cols := make([]arrow.Array, n)
		for i := range n {
			cols[i] = rec.Column(i)
		}
		for i := range int(rec.NumRows()) {
			var parts []string
			for _, c := range cols {
				parts = append(parts, c.ValueStr(i))
			}
			out = append(out, strings.Join(parts, " "))
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func recordStrings(rec arrow.RecordBatch) []string {
	var out []string
	for i := range int(rec.NumRows()) {
		var parts []string
		for c := range int(rec.NumCols()) {
			parts = append(parts, rec.Column(c).ValueStr(i))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix+" ") || l == prefix {
			n++
		}
	}
	return n
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
