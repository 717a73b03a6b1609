package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// writeFiles writes files (path relative to dir → content) and returns dir.
func writeFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var runIDRE = regexp.MustCompile(`run (\S+@\S+) of pipeline`)

// runID is the id of the run a command's stderr announces.
func runID(t *testing.T, r result) string {
	t.Helper()
	m := runIDRE.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no run id in stderr:\n%s", r.stderr)
	}
	return m[1]
}

// showRecord reads a run's record through runs show --format json.
func showJSON(t *testing.T, id string, where ...string) *scheduler.Record {
	t.Helper()
	r := runCLI(t, append([]string{"runs", "show", id, "--format", "json"}, where...)...)
	if r.code != 0 {
		t.Fatalf("runs show %s: exit %d\n%s", id, r.code, r.stderr)
	}
	var rec scheduler.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("runs show %s --format json: %v\n%s", id, err, r.stdout)
	}
	return &rec
}

// tableRows is a table's rows as CSV without the header.
func tableRows(t *testing.T, pipeline, table string, extra ...string) string {
	t.Helper()
	r := runCLI(t, append([]string{"table", "show", table, "--pipeline", pipeline, "--format", "csv"}, extra...)...)
	if r.code != 0 {
		t.Fatalf("table show %s: exit %d\n%s", table, r.code, r.stderr)
	}
	return r.stdout
}

const threeStages = `pipeline: three
tables:
  raw.a:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
  raw.b:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
    properties: {delta.enableChangeDataFeed: true}
  audit.b:
    columns:
      - {name: id, type: string}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
      - {name: _change_type, type: string}
      - {name: _commit_version, type: bigint}
      - {name: _commit_timestamp, type: timestamp}
stages:
  - {name: load_a, kind: ingest, source: landing/a/*.csv, target: raw.a}
  - {name: load_b, kind: ingest, source: landing/b/*.csv, target: raw.b, depends_on: [load_a]}
  - {name: capture_b, kind: capture_history, source: raw.b, target: audit.b, depends_on: [load_b]}
`

// TestRunsRetry: the middle stage of a run fails (its source directory is missing);
// runs retry runs it and its downstream stage, not the upstream one that succeeded.
func TestRunsRetry(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"three.yaml": threeStages, "landing/a/1.csv": "id\na1\na2\n"})
	pipeline := filepath.Join(dir, "three.yaml")
	first := runCLI(t, "run", pipeline)
	if first.code != 1 {
		t.Fatalf("first run: exit %d, want 1\n%s%s", first.code, first.stdout, first.stderr)
	}
	id := runID(t, first)
	writeFiles(t, dir, map[string]string{"landing/b/1.csv": "id\nb1\n"})
	retry := runCLI(t, "runs", "retry", id, "--pipeline", pipeline)
	if retry.code != 0 {
		t.Fatalf("runs retry: exit %d\n%s%s", retry.code, retry.stdout, retry.stderr)
	}
	lines := strings.Split(strings.TrimSpace(retry.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "load_b     succeeded") || !strings.HasPrefix(lines[3], "capture_b  succeeded") {
		t.Errorf("retry summary:\n%s\nwant load_b and capture_b only, succeeded", retry.stdout)
	}
	retryID := runID(t, retry)
	old, rec := showJSON(t, id, "--pipeline", pipeline), showJSON(t, retryID, "--pipeline", pipeline)
	if rec.Trigger.Kind != scheduler.Retry || rec.Trigger.Of != id || !slices.Equal(rec.Trigger.Stages, []string{"load_b", "capture_b"}) {
		t.Errorf("retry trigger %+v, want a retry of %s with load_b and capture_b", rec.Trigger, id)
	}
	if !slices.Equal(old.RetriedBy, []string{retryID}) {
		t.Errorf("the failed run's retried_by %v, want [%s]", old.RetriedBy, retryID)
	}
	// load_a ran once: raw.a has one commit of rows, by the first run.
	hist := runCLI(t, "table", "history", "raw.a", "--pipeline", pipeline, "--format", "csv")
	if strings.Count(hist.stdout, retryID) != 0 || strings.Count(hist.stdout, id) != 2 {
		t.Errorf("raw.a history:\n%s\nwant only the first run's commits", hist.stdout)
	}
	if got := tableRows(t, pipeline, "audit.b", "--columns", "id,_change_type"); got != "id,_change_type\nb1,insert\n" {
		t.Errorf("audit.b:\n%s", got)
	}
	if again := runCLI(t, "runs", "retry", retryID, "--pipeline", pipeline); again.code != 1 || !strings.Contains(again.stderr, "every stage succeeded: nothing to retry") {
		t.Errorf("retry of a run that succeeded: exit %d\n%s", again.code, again.stderr)
	}
}

const ordersPipeline = `pipeline: orders
tables:
  raw.orders:
    columns: [{name: id, type: string}, {name: amount, type: int}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
    properties: {delta.enableChangeDataFeed: true}
  audit.orders:
    columns:
      - {name: id, type: string}
      - {name: amount, type: int}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
      - {name: _change_type, type: string}
      - {name: _commit_version, type: bigint}
      - {name: _commit_timestamp, type: timestamp}
stages:
  - {name: load, kind: ingest, source: landing/*.csv, target: raw.orders}
  - {name: capture, kind: capture_history, source: raw.orders, target: audit.orders, depends_on: [load]}
`

// TestRunsRollback: a run that loaded a bad file is rolled back: the table it loaded is
// equal (rows and schema) to its version before the run, its history shows a RESTORE
// with the rollback's run id whose change feed holds only the bad row's delete, and the
// two records link. The audit history is append-only: kept by the rollback, it records
// the reversal at the next run, so it holds the bad insert once and its delete once,
// the delete at the RESTORE's version. A run with a later run's commit on top is
// refused.
func TestRunsRollback(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"orders.yaml": ordersPipeline, "landing/1.csv": "id,amount\no1,10\no2,20\n"})
	p := filepath.Join(dir, "orders.yaml")
	if r := runCLI(t, "run", p); r.code != 0 {
		t.Fatalf("run 1: %s", r.stderr)
	}
	before := tableRows(t, p, "raw.orders")
	schemaBefore := runCLI(t, "table", "properties", "raw.orders", "--pipeline", p).stdout
	writeFiles(t, dir, map[string]string{"landing/2.csv": "id,amount\no3,-999999\n"})
	bad := runCLI(t, "run", p)
	badID := runID(t, bad)
	if bad.code != 0 || tableRows(t, p, "raw.orders") == before {
		t.Fatalf("run 2 did not load the bad file: %s", bad.stderr)
	}
	auditCols := []string{"--columns", "id,_change_type,_commit_version"}
	auditBefore := tableRows(t, p, "audit.orders", auditCols...)

	dry := runCLI(t, "runs", "rollback", badID, "--pipeline", p, "--dry-run")
	for _, want := range []string{"audit.orders  keep", "raw.orders    restore  versions 2..2", "capture (capture_history, pipeline orders)  raw.orders  audit.orders  records the reversal"} {
		if dry.code != 0 || !strings.Contains(dry.stdout, want) {
			t.Errorf("dry run: exit %d\n%s%s\nwant a line with %q", dry.code, dry.stdout, dry.stderr, want)
		}
	}
	if tableRows(t, p, "raw.orders") == before {
		t.Fatal("the dry run changed the table")
	}

	rb := runCLI(t, "runs", "rollback", badID, "--pipeline", p)
	if rb.code != 0 {
		t.Fatalf("rollback: exit %d\n%s%s", rb.code, rb.stdout, rb.stderr)
	}
	m := regexp.MustCompile(`rolled back by run (\S+)`).FindStringSubmatch(rb.stderr)
	if m == nil {
		t.Fatalf("rollback stderr:\n%s", rb.stderr)
	}
	rbID := m[1]
	if got := tableRows(t, p, "raw.orders"); got != before {
		t.Errorf("raw.orders after the rollback:\n%s\nwant as before the bad run:\n%s", got, before)
	}
	hist := runCLI(t, "table", "history", "raw.orders", "--pipeline", p, "--format", "csv", "--limit", "1")
	if !strings.Contains(hist.stdout, ",RESTORE,") || !strings.Contains(hist.stdout, ",orders,rollback,"+rbID+",") {
		t.Errorf("raw.orders history:\n%s\nwant a RESTORE by run %s", hist.stdout, rbID)
	}
	if got := runCLI(t, "table", "changes", "raw.orders", "--pipeline", p, "--from", "3", "--columns", "id,amount", "--format", "csv").stdout; strings.Count(got, "\n") != 2 || !strings.Contains(got, "\no3,-999999,delete,3,") {
		t.Errorf("change feed of the RESTORE:\n%s\nwant the delete of o3 alone", got)
	}
	if got := runCLI(t, "table", "properties", "raw.orders", "--pipeline", p).stdout; got != schemaBefore {
		t.Errorf("raw.orders properties after the rollback:\n%s\nwant\n%s", got, schemaBefore)
	}
	if got := tableRows(t, p, "audit.orders", auditCols...); got != auditBefore {
		t.Errorf("audit.orders after the rollback:\n%s\nwant it kept:\n%s", got, auditBefore)
	}
	old, rec := showJSON(t, badID, "--pipeline", p), showJSON(t, rbID, "--pipeline", p)
	if old.RolledBackBy != rbID || rec.Trigger.Kind != scheduler.Rollback || rec.Trigger.Of != badID || rec.Status != scheduler.Succeeded {
		t.Errorf("links: bad run rolled back by %q; rollback %s of %s, %s", old.RolledBackBy, rec.Trigger.Kind, rec.Trigger.Of, rec.Status)
	}
	if len(rec.Stages) != 1 || rec.Stages[0].Name != "restore raw.orders" {
		t.Errorf("rollback stages %+v, want one: restore raw.orders", rec.Stages)
	}
	// The next run records the reversal in the history, once: nothing else is new.
	if r := runCLI(t, "run", p); r.code != 0 {
		t.Fatalf("run 3: %s", r.stderr)
	}
	if got, want := sortedLines(tableRows(t, p, "audit.orders", auditCols...)), sortedLines(auditBefore+"o3,delete,3\n"); got != want {
		t.Errorf("audit.orders after the next run:\n%s\nwant the bad insert once and its delete once, at the RESTORE's version 3:\n%s", got, want)
	}
	if got := tableRows(t, p, "raw.orders"); got != before {
		t.Errorf("raw.orders after the next run:\n%s\nwant as before the bad run (its file stays loaded):\n%s", got, before)
	}

	// A later run's commit on top blocks the rollback of the run before it.
	writeFiles(t, dir, map[string]string{"landing/3.csv": "id,amount\no4,40\n"})
	third := runCLI(t, "run", p)
	writeFiles(t, dir, map[string]string{"landing/4.csv": "id,amount\no5,50\n"})
	fourth := runCLI(t, "run", p)
	thirdID, fourthID := runID(t, third), runID(t, fourth)
	refused := runCLI(t, "runs", "rollback", thirdID, "--pipeline", p)
	if refused.code != 1 || !strings.Contains(refused.stderr, "the rollback would not be exact") ||
		!strings.Contains(refused.stderr, "raw.orders: a later commit, version 5 (WRITE by run "+fourthID+", stage load), would be undone too") {
		t.Errorf("rollback under a later commit: exit %d\n%s", refused.code, refused.stderr)
	}
}

const dailyPipeline = `pipeline: daily
schedule: "0 2 * * *"
timezone: Europe/Rome
params:
  - {name: region, default: eu}
tables:
  raw.sales:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: load, kind: ingest, source: "landing/${params.region}/${run.slot_date}/*.csv", target: raw.sales}
`

// TestRunsBackfill: a backfill of two past slots runs each with its own slot's files
// (${run.slot_date}); a second backfill skips them, --rerun runs them again as attempt 2.
func TestRunsBackfill(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"daily.yaml":                    dailyPipeline,
		"landing/eu/2026-01-10/a.csv":   "id\nday10\n",
		"landing/eu/2026-01-11/a.csv":   "id\nday11-1\nday11-2\n",
		"landing/us/2026-01-10/a.csv":   "id\nus10\n",
		"landing/eu/2026-01-12/not.csv": "id\nnot-in-the-range\n",
	})
	p := filepath.Join(dir, "daily.yaml")
	args := []string{"runs", "backfill", p, "--from", "2026-01-10T00:00:00Z", "--to", "2026-01-11T12:00:00Z"}
	dry := runCLI(t, append(args, "--dry-run")...)
	want := "slot                  local                      run                     action  existing  attempt\n" +
		"--------------------  -------------------------  ----------------------  ------  --------  -------\n" +
		"2026-01-10T01:00:00Z  2026-01-10T02:00:00+01:00  daily@20260110T010000Z  run     NULL            1\n" +
		"2026-01-11T01:00:00Z  2026-01-11T02:00:00+01:00  daily@20260111T010000Z  run     NULL            1\n"
	if dry.code != 0 || dry.stdout != want {
		t.Errorf("backfill --dry-run: exit %d\n%s\nwant\n%s%s", dry.code, dry.stdout, want, dry.stderr)
	}
	if r := runCLI(t, args...); r.code != 0 || strings.Count(r.stdout, "succeeded") != 2 {
		t.Fatalf("backfill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := sortedLines(tableRows(t, p, "raw.sales", "--columns", "id")); got != "day10\nday11-1\nday11-2\nid\n" {
		t.Errorf("raw.sales after the backfill:\n%s\nwant each slot's own file", got)
	}
	rec := showJSON(t, "daily@20260111T010000Z", "--pipeline", p)
	if rec.Trigger.Kind != scheduler.Backfill || rec.Attempt != 1 || rec.Params["region"] != "eu" || rec.Stages[0].RowsIn != 2 {
		t.Errorf("backfilled slot: %+v attempt %d params %v", rec.Trigger, rec.Attempt, rec.Params)
	}
	again := runCLI(t, append(args, "--dry-run")...)
	if strings.Count(again.stdout, "skip    succeeded") != 2 {
		t.Errorf("second backfill plan:\n%s\nwant both slots skipped", again.stdout)
	}
	rerun := runCLI(t, append(args, "--rerun")...)
	if rerun.code != 0 || len(regexp.MustCompile(`(?m) rerun +succeeded +2  succeeded$`).FindAllString(rerun.stdout, -1)) != 2 {
		t.Errorf("backfill --rerun: exit %d\n%s%s", rerun.code, rerun.stdout, rerun.stderr)
	}
	list := runCLI(t, "runs", "list", "--pipeline", p, "--format", "json")
	var n int
	for _, line := range strings.Split(strings.TrimSpace(list.stdout), "\n") {
		var en struct {
			Run     string `json:"run"`
			Attempt int    `json:"attempt"`
			Trigger string `json:"trigger"`
		}
		if err := json.Unmarshal([]byte(line), &en); err != nil || en.Attempt != 2 || en.Trigger != "backfill" {
			t.Errorf("runs list line %q: want attempt 2 of a backfill", line)
		}
		n++
	}
	if n != 2 {
		t.Errorf("runs list: %d runs, want the 2 slots, each once\n%s", n, list.stdout)
	}
}

// TestRunsTriggerInProcess: with no serve, runs trigger runs the pipeline here, with its
// parameters; an undeclared parameter is a usage error.
func TestRunsTriggerInProcess(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"daily.yaml": dailyPipeline, "landing/us/2026-02-01/a.csv": "id\nus1\n"})
	p := filepath.Join(dir, "daily.yaml")
	r := runCLI(t, "runs", "trigger", p, "--param", "region=us")
	if r.code != 0 || !strings.Contains(r.stdout, "load   succeeded         1       0 s        1         1  raw.sales@v1") {
		t.Fatalf("trigger: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rec := showJSON(t, runID(t, r), "--pipelines", dir)
	if rec.Trigger.Kind != scheduler.Manual || rec.Trigger.Params["region"] != "us" || !strings.Contains(rec.Trigger.By, "@") {
		t.Errorf("trigger %+v", rec.Trigger)
	}
	bad := runCLI(t, "runs", "trigger", p, "--param", "zone=x")
	if bad.code != 2 || !strings.Contains(bad.stderr, "param zone is not declared in pipeline daily (declared: region)") {
		t.Errorf("undeclared param: exit %d\n%s", bad.code, bad.stderr)
	}
	show := runCLI(t, "runs", "show", rec.ID, "--pipeline", p)
	for _, want := range []string{"trigger      manual slot 2026-02-01T12:00:00Z by ", "params       region=us", "status       succeeded", "stage load:", "| 12:00:00.000 attempt 1 started"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("runs show:\n%s\nwant a line with %q", show.stdout, want)
		}
	}
	if r := runCLI(t, "runs", "show", "daily@nope"); r.code != 2 {
		t.Errorf("runs show of a malformed id without a store: exit %d\n%s", r.code, r.stderr)
	}
}

// TestSchedule prints DST known answers through the CLI.
func TestSchedule(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"chicago.yaml": "pipeline: chicago\nschedule: \"30 2 * * *\"\ntimezone: America/Chicago\ntables: {raw.t: {columns: [{name: id, type: string}]}}\nstages: [{name: v, kind: vacuum, tables: [raw.t]}]\n",
		"once.yaml":    "pipeline: once\nschedule: \"30 1 * * *\"\ntimezone: America/Chicago\ntables: {raw.t: {columns: [{name: id, type: string}]}}\nstages: [{name: v, kind: vacuum, tables: [raw.t]}]\n",
		"steps.yaml":   "pipeline: steps\nschedule: \"*/7 * * * *\"\ntimezone: America/Chicago\ntables: {raw.t: {columns: [{name: id, type: string}]}}\nstages: [{name: v, kind: vacuum, tables: [raw.t]}]\n",
	})
	runCases(t, []cliCase{
		{"schedule_spring_forward", []string{"schedule", filepath.Join(dir, "chicago.yaml"), "--from", "2024-03-09T12:00:00Z", "--next", "2"}, 0},
		{"schedule_fall_back_json", []string{"schedule", filepath.Join(dir, "once.yaml"), "--from", "2024-11-02T12:00:00Z", "--next", "2", "--format", "json"}, 0},
		{"schedule_step_warning", []string{"schedule", filepath.Join(dir, "steps.yaml"), "--from", "2024-11-03T05:50:00Z", "--next", "4"}, 0},
	}, func(s string) string { return strings.ReplaceAll(s, dir, "$TMP") })
}

// sortedLines sorts a text's lines (rows come in file order, not key order).
func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestRunsPauseResume: runs pause records who paused a pipeline and why, in the run
// store; a second pause names the first; runs resume ends it.
func TestRunsPauseResume(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"daily.yaml": dailyPipeline})
	r := runCLI(t, "runs", "pause", "daily", "--pipelines", dir, "--reason", "source down")
	if r.code != 0 || !regexp.MustCompile(`^pipeline daily: schedule paused by \S+@\S+ at \S+ \(source down\)\n$`).MatchString(r.stdout) {
		t.Fatalf("pause: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	again := runCLI(t, "runs", "pause", filepath.Join(dir, "daily.yaml"))
	if again.code != 1 || !strings.Contains(again.stderr, "is already paused by") || !strings.Contains(again.stderr, "(source down)") {
		t.Errorf("second pause: exit %d\n%s", again.code, again.stderr)
	}
	st := scheduler.NewStore(localWarehouse(t, filepath.Join(dir, "warehouse")).store)
	if p, err := st.PausedPipelines(t.Context()); err != nil || !p["daily"].Paused || p["daily"].Reason != "source down" {
		t.Errorf("paused pipelines in the store: %+v %v", p, err)
	}
	res := runCLI(t, "runs", "resume", "daily", "--pipelines", dir, "--format", "json")
	if res.code != 0 || !strings.Contains(res.stdout, `"paused":false`) {
		t.Errorf("resume: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if p, _ := st.PausedPipelines(t.Context()); len(p) != 0 {
		t.Errorf("paused after the resume: %+v", p)
	}
}

// TestScheduleEveryAsServe: schedule --next shows the @every slots serve runs: from
// the anchor a serve stored when it first loaded the pipeline, else from now to the
// second, saying so.
func TestScheduleEveryAsServe(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"every.yaml": `pipeline: every
schedule: "@every 90s"
tables: {raw.t: {columns: [{name: id, type: string}]}}
stages: [{name: a, kind: vacuum, tables: [raw.t]}]
`})
	p := filepath.Join(dir, "every.yaml")
	r := runCLI(t, "schedule", p, "--next", "2", "--format", "csv")
	if r.code != 0 || !strings.Contains(r.stderr, "no serve has loaded it yet") || !strings.Contains(r.stdout, "2026-02-01T12:01:30Z") {
		t.Errorf("before any serve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A serve loaded it at 11:59:47.
	st := scheduler.NewStore(localWarehouse(t, filepath.Join(dir, "warehouse")).store)
	if _, err := st.Anchor(t.Context(), "every", time.Date(2026, 2, 1, 11, 59, 47, 600e6, time.UTC)); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "schedule", p, "--next", "2", "--format", "csv")
	if r.code != 0 || !strings.Contains(r.stderr, "from 2026-02-01T11:59:47Z, when a serve first loaded it") ||
		!strings.Contains(r.stdout, "2026-02-01T12:01:17Z,2026-02-01T12:01:17Z") || !strings.Contains(r.stdout, "2026-02-01T12:02:47Z") {
		t.Errorf("after a serve anchored it: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunsWithAnInvalidEdit: while a pipeline's file has an invalid edit (serve goes on
// with its previous version), the runs commands find its runs through its last valid
// definition, and say so.
func TestRunsWithAnInvalidEdit(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"orders.yaml": ordersPipeline, "landing/1.csv": "id,amount\no1,10\n"})
	p := filepath.Join(dir, "orders.yaml")
	first := runCLI(t, "run", p)
	id := runID(t, first)
	writeFiles(t, dir, map[string]string{"orders.yaml": strings.Replace(ordersPipeline, "kind: ingest", "kind: ingestt", 1)})
	for _, where := range [][]string{{"--pipelines", dir}, {"--pipeline", p}} {
		r := runCLI(t, append([]string{"runs", "list", "--name", "orders"}, where...)...)
		if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stderr, "orders.yaml is invalid: pipeline orders is taken as its last valid definition, as run "+id+" ran it") {
			t.Errorf("runs list %v with an invalid edit: exit %d\n%s%s", where, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, "runs", "show", id, "--pipelines", dir); r.code != 0 || !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("runs show with an invalid edit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A file that never was valid and has no run is still an error, with its problems.
	writeFiles(t, dir, map[string]string{"new.yaml": "pipeline: new\nstages: []\n"})
	if r := runCLI(t, "runs", "list", "--pipeline", filepath.Join(dir, "new.yaml")); r.code != 1 || !strings.Contains(r.stderr, "has no run that recorded a valid definition") {
		t.Errorf("runs list of a new invalid file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestRunsHelpListsFlagsThatAct: only the runs commands that run stages here list the
// stages' memory budget and spill directory.
func TestRunsHelpListsFlagsThatAct(t *testing.T) {
	for cmd, runsStages := range map[string]bool{"list": false, "show": false, "cancel": false, "rollback": false, "pause": false, "resume": false,
		"trigger": true, "retry": true, "backfill": true} {
		r := runCLI(t, "runs", cmd, "--help")
		has := strings.Contains(r.stdout, "--memory-budget") && strings.Contains(r.stdout, "--spill-dir")
		if r.code != 0 || has != runsStages || (!runsStages && (strings.Contains(r.stdout, "--memory-budget") || strings.Contains(r.stdout, "--spill-dir"))) {
			t.Errorf("runs %s --help lists the stage flags: %v, want %v\n%s", cmd, has, runsStages, r.stdout)
		}
	}
}
