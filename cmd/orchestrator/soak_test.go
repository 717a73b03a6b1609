package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

const soakPipeline = `pipeline: soak
schedule: "@every 2s"
%s
tables:
  raw.events:
    columns:
      - {name: eid, type: string}
      - {name: customer_id, type: string}
      - {name: city, type: string}
      - {name: op, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties: {delta.enableChangeDataFeed: true}
  dim.customer:
    columns:
      - {name: customer_sk, type: bigint, identity: {start: 1, step: 1}}
      - {name: customer_id, type: string}
      - {name: city, type: string}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
    properties: {delta.enableChangeDataFeed: true}
stages:
  - {name: load, kind: ingest, source: %s/*.csv, target: raw.events}
  - name: merge
    kind: scd2_merge
    depends_on: [load]
    source: raw.events
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city]
    sequence_by: updated_at
    delete_when: "op = 'D'"
    deletes: close
    columns: {surrogate_key: customer_sk}
`

// soakDuration is how long the soak runs: ORCH_SOAK_DURATION (a Go duration), default
// 40 s (CI); 2m is the long run.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("ORCH_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ORCH_SOAK_DURATION: %v", err)
		}
		return d
	}
	return 40 * time.Second
}

// TestSoakTwoServes: two serve processes on one MinIO warehouse run a change-stream
// pipeline every 2 s while event files keep arriving (late events, deletes and returns
// among them), an in-process `orchestrator run` of the same pipeline races them every
// few seconds, `runs trigger` asks for manual runs, and readers keep reading the tables.
// Afterwards every commit version of each table is contiguous, every event is in the
// bronze table exactly once, the dimension's SCD2 invariants hold at every version and
// its last version equals the fold of all events, and every run either succeeded or
// says in its record why not.
func TestSoakTwoServes(t *testing.T) {
	bin := buildBinary(t)
	wh := minioWarehouse(t)
	dir := t.TempDir()
	landing := filepath.Join(dir, "landing")
	pipes := filepath.Join(dir, "pipes")
	pipeline := filepath.Join(pipes, "soak.yaml")
	writeFiles(t, dir, map[string]string{"pipes/soak.yaml": fmt.Sprintf(soakPipeline, wh.yaml, landing)})
	if err := os.MkdirAll(landing, 0o755); err != nil {
		t.Fatal(err)
	}
	duration := soakDuration(t)
	a := startServe(t, bin, pipes, wh.env)
	b := startServe(t, bin, pipes, wh.env)

	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var mu sync.Mutex // guards events, problems
	var events []cdcEventRow
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	// Event files: three events each, every 500 ms; a quarter of them late.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		base := time.Date(2026, 1, 14, 0, 0, 0, 0, time.UTC)
		for n := 0; ctx.Err() == nil; n++ {
			var lines []string
			for k := range 3 {
				e := cdcEventRow{eid: fmt.Sprintf("e%05d-%d", n, k), key: fmt.Sprintf("K%d", rng.IntN(8)), op: "U",
					city: []string{"Seattle", "Portland", "Leeds"}[rng.IntN(3)], at: base.Add(time.Duration(n*60+k) * time.Second)}
				if rng.IntN(4) == 0 {
					e.at = e.at.Add(-time.Duration(rng.IntN(n*60+1)) * time.Second)
				}
				// A microsecond of its own: no two events of a key share a time.
				e.at = e.at.Add(time.Duration(n*3+k) * time.Microsecond)
				if rng.IntN(6) == 0 {
					e.op, e.city = "D", ""
				}
				lines = append(lines, fmt.Sprintf("%s,%s,%s,%s,%s", e.eid, e.key, e.city, e.op, e.at.Format(time.RFC3339Nano)))
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
			body := "eid,customer_id,city,op,updated_at\n" + strings.Join(lines, "\n") + "\n"
			tmp := filepath.Join(dir, fmt.Sprintf("%05d.tmp", n))
			if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
				report("write events: %v", err)
				return
			}
			if err := os.Rename(tmp, filepath.Join(landing, fmt.Sprintf("%05d.csv", n))); err != nil {
				report("land events: %v", err)
				return
			}
			sleepCtx(ctx, 500*time.Millisecond)
		}
	})
	// A second writer outside the scheduler, and manual triggers.
	wg.Go(func() {
		for ctx.Err() == nil {
			sleepCtx(ctx, 3*time.Second)
			if r := runCmdEnv(t, "", wh.env, bin, "run", pipeline); r.code != 0 {
				report("orchestrator run: exit %d\n%s", r.code, r.stderr)
			}
			if r := runCmdEnv(t, "", wh.env, bin, "runs", "trigger", pipeline); r.code != 0 {
				report("runs trigger: exit %d\n%s", r.code, r.stderr)
			}
		}
	})
	// Readers, once the pipeline has run.
	store := scheduler.NewStore(wh.store)
	waitFor(t, 30*time.Second, "a first run", func() bool {
		for _, r := range runsOf(t, store, "soak") {
			if r.Status == scheduler.Succeeded {
				return true
			}
		}
		return false
	})
	for _, args := range [][]string{
		{"table", "show", "dim.customer", "--pipeline", pipeline, "--where", "is_current = true", "--format", "csv"},
		{"table", "changes", "raw.events", "--pipeline", pipeline, "--from", "0", "--format", "csv"},
	} {
		wg.Go(func() {
			for ctx.Err() == nil {
				if r := runCmdEnv(t, "", wh.env, bin, args...); r.code != 0 {
					report("%s: exit %d\n%s", strings.Join(args[:2], " "), r.code, r.stderr)
				}
				sleepCtx(ctx, 700*time.Millisecond)
			}
		})
	}
	wg.Wait()
	a.term(t)
	b.term(t)
	// A last run loads what arrived at the end.
	if r := runCmdEnv(t, "", wh.env, bin, "run", pipeline); r.code != 0 {
		t.Fatalf("final run: exit %d\n%s", r.code, r.stderr)
	}
	for _, p := range problems {
		t.Error(p)
	}

	// Every event exactly once in the bronze table.
	var want []string
	for _, e := range events {
		want = append(want, e.eid)
	}
	sort.Strings(want)
	got := soakColumn(t, bin, wh.env, pipeline, "raw.events", "eid", "")
	if !slices.Equal(got, want) {
		t.Errorf("raw.events holds %d events, want each of the %d written exactly once", len(got), len(want))
	}
	// Contiguous versions; the dimension's invariants at every version.
	for _, table := range []string{"raw.events", "dim.customer"} {
		versions := soakVersions(t, bin, wh.env, pipeline, table)
		for i, v := range versions {
			if v != int64(len(versions)-1-i) {
				t.Fatalf("%s: versions %v are not contiguous", table, versions)
			}
		}
		if table == "dim.customer" {
			for _, v := range versions {
				soakInvariants(t, bin, wh.env, pipeline, v)
			}
		}
	}
	// The last version is the fold of every event.
	ref, err := soakReference(events)
	if err != nil {
		t.Fatal(err)
	}
	if got := soakDimension(t, bin, wh.env, pipeline, ""); got != ref {
		t.Errorf("dimension differs from the fold of every event\ngot:\n%s\nwant:\n%s", got, ref)
	}
	// Every run either succeeded or its record says why not; a manual run triggered as
	// the serves stopped may wait, queued, for the next serve.
	var ran, retried int
	for _, r := range runsOf(t, store, "soak") {
		switch {
		case r.Status == scheduler.Succeeded:
			ran++
			for _, st := range r.Stages {
				for _, n := range st.Notes {
					if strings.Contains(n, "ran again after") {
						retried++
					}
				}
			}
		case (r.Status == scheduler.Skipped || r.Status == scheduler.Cancelled) && r.Reason != "":
		case r.Status == scheduler.Failed && r.Error != "":
			t.Logf("run %s failed: %s", r.ID, r.Error)
		case r.Status == scheduler.Queued && r.Trigger.Kind == scheduler.Manual:
		default:
			b, _ := json.MarshalIndent(r, "", "  ")
			t.Errorf("run %s: %s without a reason or error:\n%s", r.ID, r.Status, b)
		}
	}
	if ran < int(duration/(4*time.Second)) {
		t.Errorf("%d runs succeeded in %s, want about one every 2 s", ran, duration)
	}
	t.Logf("%d events, %d runs succeeded, %d stage runs retried after concurrent commits", len(events), ran, retried)
}

type cdcEventRow struct {
	eid, key, city, op string
	at                 time.Time
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// soakColumn reads one column of a table (at a version, "" for the latest), sorted.
func soakColumn(t *testing.T, bin string, env []string, pipeline, table, col, version string) []string {
	t.Helper()
	args := []string{"table", "show", table, "--pipeline", pipeline, "--columns", col, "--format", "csv"}
	if version != "" {
		args = append(args, "--version", version)
	}
	r := runCmdEnv(t, "", env, bin, args...)
	if r.code != 0 {
		t.Fatalf("table show %s: exit %d\n%s", table, r.code, r.stderr)
	}
	rows := lines(r.stdout)[1:]
	sort.Strings(rows)
	return rows
}

func soakVersions(t *testing.T, bin string, env []string, pipeline, table string) []int64 {
	t.Helper()
	r := runCmdEnv(t, "", env, bin, "table", "history", table, "--pipeline", pipeline, "--format", "json")
	if r.code != 0 {
		t.Fatalf("table history %s: exit %d\n%s", table, r.code, r.stderr)
	}
	var out []int64
	for _, l := range lines(r.stdout) {
		var h struct{ Version int64 }
		if err := json.Unmarshal([]byte(l), &h); err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Version)
	}
	return out
}

// soakDimension renders the dimension (at a version) as key city [from,to) current.
func soakDimension(t *testing.T, bin string, env []string, pipeline, version string) string {
	t.Helper()
	args := []string{"table", "show", "dim.customer", "--pipeline", pipeline, "--columns", "customer_id,city,valid_from,valid_to,is_current", "--format", "csv"}
	if version != "" {
		args = append(args, "--version", version)
	}
	r := runCmdEnv(t, "", env, bin, args...)
	if r.code != 0 {
		t.Fatalf("table show dim.customer: exit %d\n%s", r.code, r.stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs[1:] {
		out = append(out, strings.Join(rec, " "))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// soakInvariants checks rule 7 of the SCD2 rules at a version: per key at most one
// current row, no overlapping intervals, is_current iff valid_to is the sentinel.
func soakInvariants(t *testing.T, bin string, env []string, pipeline string, v int64) {
	t.Helper()
	byKey := map[string][][3]string{}
	for _, l := range strings.Split(soakDimension(t, bin, env, pipeline, fmt.Sprint(v)), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			continue
		}
		if (f[3] == "9999-12-31T00:00:00Z") != (f[4] == "true") {
			t.Errorf("version %d: %s: is_current does not match valid_to", v, l)
		}
		byKey[f[0]] = append(byKey[f[0]], [3]string{f[2], f[3], f[4]})
	}
	for k, vs := range byKey {
		sort.Slice(vs, func(i, j int) bool { return vs[i][0] < vs[j][0] })
		current := 0
		for i, iv := range vs {
			if iv[2] == "true" {
				current++
			}
			if i > 0 && vs[i-1][1] > iv[0] {
				t.Errorf("version %d: key %s: intervals overlap: %v", v, k, vs)
			}
		}
		if current > 1 {
			t.Errorf("version %d: key %s has %d current rows", v, k, current)
		}
	}
}

// soakReference folds every event by the SCD2 rules (as the reference fold of the jobs
// tests: per key by time, a delete winning a tie, repeats of the tracked value dropped,
// half-open intervals) and renders it as soakDimension does.
func soakReference(events []cdcEventRow) (string, error) {
	byKey := map[string]map[time.Time]cdcEventRow{}
	for _, e := range events {
		m := byKey[e.key]
		if m == nil {
			m = map[time.Time]cdcEventRow{}
			byKey[e.key] = m
		}
		prev, ok := m[e.at]
		switch {
		case !ok || e.op == "D":
			m[e.at] = e
		case prev.op != "D" && prev.city != e.city:
			return "", fmt.Errorf("key %s has two different upserts at %s", e.key, e.at)
		}
	}
	const end = "9999-12-31T00:00:00Z"
	var out []string
	for k, m := range byKey {
		var ts []time.Time
		for at := range m {
			ts = append(ts, at)
		}
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		var cur []string // city, from
		for _, at := range ts {
			e := m[at]
			stamp := at.Format(time.RFC3339Nano)
			switch {
			case e.op == "D":
				if cur != nil {
					out = append(out, fmt.Sprintf("%s %s %s %s false", k, cur[0], cur[1], stamp))
					cur = nil
				}
			case cur != nil && cur[0] == e.city:
			default:
				if cur != nil {
					out = append(out, fmt.Sprintf("%s %s %s %s false", k, cur[0], cur[1], stamp))
				}
				cur = []string{e.city, stamp}
			}
		}
		if cur != nil {
			out = append(out, fmt.Sprintf("%s %s %s %s true", k, cur[0], cur[1], end))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n"), nil
}
