package web

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

func TestMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.twoRuns()
	e.site.obs.SlotHandled(scheduler.SlotEvent{Pipeline: "shop", Lag: 90 * time.Second, Missed: true, Skipped: true, Count: 3})
	e.site.obs.SlotHandled(scheduler.SlotEvent{Pipeline: "shop", Lag: 200 * time.Millisecond, Count: 1})
	e.site.obs.TickDone(scheduler.TickTimes{Plan: 3 * time.Millisecond, Record: 40 * time.Millisecond, Dispatch: time.Millisecond, Slots: 2})
	_, body := e.do(req{path: "/metrics"})
	for _, want := range []string{
		`orchestrator_runs_total{pipeline="shop",status="succeeded"} 2`,
		`orchestrator_stage_duration_seconds_count{kind="ingest",pipeline="shop",status="succeeded"} 2`,
		`orchestrator_rows_written_total{pipeline="shop",stage="load"} 4`,
		`orchestrator_commits_total{pipeline="shop",table="raw.customers"} 2`,
		`orchestrator_active_runs{pipeline="shop",status="running"} 0`,
		`orchestrator_missed_slots_total{pipeline="shop"} 3`,
		`orchestrator_skipped_slots_total{pipeline="shop"} 3`,
		`orchestrator_scheduler_lag_seconds_count{pipeline="shop"} 1`,
		`orchestrator_scheduler_tick_seconds_bucket{phase="plan",le="0.005"} 1`,
		`orchestrator_scheduler_tick_seconds_bucket{phase="record",le="0.025"} 0`,
		`orchestrator_scheduler_tick_seconds_bucket{phase="record",le="0.05"} 1`,
		`orchestrator_pipelines_loaded 2`,
		`orchestrator_lease_held{warehouse=`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, absent := range []string{"orchestrator_commit_conflicts_total{", "orchestrator_stage_retries_total{"} {
		if strings.Contains(body, absent) {
			t.Errorf("/metrics counts %s without any", absent)
		}
	}
}

// TestPages: every page answers with what a user looks for, without JavaScript.
func TestPages(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, second := e.twoRuns()
	run := "/runs/" + second.ID
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/pipelines", []string{"at 02:00 every day", "<code>0 2 * * *</code> · Europe/Berlin", "Run now", `name="param.region" value="eu"`, `class="strip"`, "st-succeeded", "on demand only"}},
		{"/pipelines/shop", []string{`<table class="grid">`, `title="dim: succeeded — open the stage and its log"`, "2 runs recorded", "Definition", `class="dag"`, "raw.customers"}},
		{"/pipelines/shop?status=failed", []string{"No run matches the filter"}},
		{run, []string{`id="run-status" data-status="succeeded">`, `class="dag"`, `class="gantt"`, `href="/tables/raw.customers/rows?version=2">raw.customers@v2`, "Log of load", "Definition as run"}},
		{"/tables", []string{"audit.customers_history", "dim.customer"}},
		{"/tables/raw.customers", []string{"customer_id", "delta.enableChangeDataFeed", "Change feed readers", `class="horizons"`, "shop</a> / history", "safe"}},
		{"/tables/dim.customer", []string{"identity: start 1, step 1"}},
		{"/tables/raw.customers/history", []string{"v2", "MERGE", "~1 -0 rows", second.ID, "CREATE TABLE"}},
		{"/tables/raw.customers/rows?version=1", []string{"Version <b>v1</b>", "Seattle"}},
		{"/tables/raw.customers/rows?where=city+%3D+%27Lyon%27", []string{"Lyon", "1 row"}},
		{"/tables/raw.customers/rows?where=city+%3D", []string{`class="error"`, "Where"}},
		{"/tables/raw.customers/changes?from=1", []string{"ct-update-postimage", "Portland", "Changes per version"}},
		{"/tables/raw.customers/diff?from=1&to=2", []string{"1 added", "1 changed", "<del>Seattle</del> <ins>Portland</ins>"}},
		{"/nope", []string{"404"}},
	} {
		resp, body := e.do(req{path: tc.path})
		wantCode := 200
		switch {
		case tc.path == "/nope":
			wantCode = 404
		case strings.HasSuffix(tc.path, "where=city+%3D"): // the form and the error, with the error's status
			wantCode = 400
		}
		if resp.StatusCode != wantCode {
			t.Errorf("%s: %d, want %d", tc.path, resp.StatusCode, wantCode)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", tc.path, w)
			}
		}
	}
	// The live part of the run page, as the script fetches it.
	_, part := e.do(req{path: run + "?partial=1"})
	if strings.Contains(part, "<html") || !strings.Contains(part, `id="run-status"`) {
		t.Errorf("partial run page: %.200s", part)
	}
	// No page uses inline script or style (the CSP forbids them).
	for _, p := range []string{"/pipelines", run, "/tables/raw.customers"} {
		_, body := e.do(req{path: p})
		if regexp.MustCompile(`<script>|style="|onclick=`).MatchString(body) {
			t.Errorf("%s has inline script or style", p)
		}
	}
}

// TestResponseCache: a run's page is one cache entry whatever the query (a client cannot
// fill the cache), and an answer that is not 200 is not kept.
func TestResponseCache(t *testing.T) {
	e := newEnv(t, envOptions{})
	rec := e.run("shop")
	for i := range 5 {
		if resp, _ := e.do(req{path: "/runs/" + rec.ID + "?x=" + strings.Repeat("y", i)}); resp.StatusCode != 200 {
			t.Fatalf("run page: %d", resp.StatusCode)
		}
	}
	e.do(req{path: "/runs/" + rec.ID + "?partial=1"})
	e.do(req{path: "/runs/shop@20200101T000000Z"})
	e.site.cache.mu.Lock()
	n := len(e.site.cache.entries)
	e.site.cache.mu.Unlock()
	if n != 3 { // the page, its live part, and the missing run's (kept empty)
		t.Errorf("%d cache entries, want 3", n)
	}
}

// TestLoadProblemsOnePerLine: the pipelines page shows each problem of a file that
// failed to load on a line of its own, without the indentation the CLI prints.
func TestLoadProblemsOnePerLine(t *testing.T) {
	problem := "  /p/bad.yaml:1:1: missing key \"stages\"\n  /p/bad.yaml:2:1: unknown key \"schedul\"\n"
	e := newEnv(t, envOptions{loadErrors: []LoadError{{File: "/p/bad.yaml", Problem: problem}}})
	_, body := e.do(req{path: "/pipelines"})
	want := `<div class="lines code"><div>/p/bad.yaml:1:1: missing key &#34;stages&#34;</div><div>/p/bad.yaml:2:1: unknown key &#34;schedul&#34;</div></div>`
	if !strings.Contains(body, want) {
		t.Errorf("/pipelines lacks the problems one per line:\n%s", body)
	}
}

// TestWatchesShown: a table's freshness and a pipeline's deadline show on the pipelines
// page, the table page, the JSON API and /metrics.
func TestWatchesShown(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, body := e.do(req{path: "/tables/raw.customers"})
	if !strings.Contains(body, `id="freshness"`) || !strings.Contains(body, "no data written yet (freshness 26h)") {
		t.Errorf("table page before any run: no freshness shown")
	}
	e.run("shop")
	e.sched.Tick(context.Background())
	_, body = e.do(req{path: "/pipelines"})
	for _, want := range []string{`data-watch="deadline"`, "deadline 45m<", "no slot judged yet", `data-watch="raw.customers"`, `class="tag w-ok">fresh</span>`, "last data change v1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/pipelines lacks %q", want)
		}
	}
	_, body = e.do(req{path: "/tables/raw.customers"})
	if !regexp.MustCompile(`fresh</span> last data change v1 \d+s ago, within 26h`).MatchString(body) {
		t.Errorf("table page: freshness not shown as fresh at v1")
	}
	_, body = e.do(req{path: "/api/v1/pipelines"})
	if !strings.Contains(body, `"freshness":[{"kind":"freshness","pipeline":"shop","table":"raw.customers"`) || !strings.Contains(body, `"state":"ok"`) {
		t.Errorf("API: %s", body)
	}
	_, body = e.do(req{path: "/metrics"})
	for _, want := range []string{
		`orchestrator_table_stale{pipeline="shop",table="raw.customers"} 0`,
		`orchestrator_table_freshness_seconds{pipeline="shop",table="raw.customers"} 93600`,
		`orchestrator_table_data_age_seconds{pipeline="shop",table="raw.customers"}`,
		`orchestrator_pipeline_deadline_seconds{pipeline="shop"} 2700`,
		`orchestrator_pipeline_late{pipeline="shop"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
