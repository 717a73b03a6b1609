package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// TestRollbackRoutes: the plan of a rollback, then the rollback through the API; the
// form needs its confirmation box; the rolled-back run shows it.
func TestRollbackRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, second := e.twoRuns()
	var plan struct {
		Run    string
		Tables []struct {
			Table, Action string
			RestoreTo     int64 `json:"restore_to"`
		}
		Readers []struct {
			Stage, Action string
		}
		Problems []string
	}
	e.getJSON("/api/v1/runs/"+second.ID+"/rollback", &plan)
	actions := map[string]string{}
	for _, tb := range plan.Tables {
		actions[tb.Table] = tb.Action
	}
	readers := map[string]string{}
	for _, rd := range plan.Readers {
		readers[rd.Stage] = rd.Action
	}
	if actions["raw.customers"] != "restore" || actions["audit.customers_history"] != "keep" || actions["dim.customer"] != "restore" ||
		readers["history"] != "records the reversal" || readers["dim"] != "rolled back" || len(plan.Problems) != 0 {
		t.Errorf("plan %+v; want raw.customers and dim.customer restored, the history kept, its capture recording the reversal, the dim rolled back", plan)
	}
	_, page := e.do(req{path: "/runs/" + second.ID + "/rollback"})
	for _, want := range []string{"restored to v1", "kept", "records the reversal", `name="confirm"`, ">Roll back</button>"} {
		if !strings.Contains(page, want) {
			t.Errorf("rollback page lacks %q", want)
		}
	}
	// The form without its confirmation: 400, nothing done.
	resp, _ := e.do(req{method: "POST", path: "/runs/" + second.ID + "/rollback", body: "x=1", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("rollback form without confirm: %d, want 400", resp.StatusCode)
	}
	resp, body := e.do(req{method: "POST", path: "/api/v1/runs/" + second.ID + "/rollback", body: `{"force": false}`})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("rollback: %d %s", resp.StatusCode, body)
	}
	var rb runAnswer
	json.Unmarshal([]byte(body), &rb)
	if got := e.waitEnd(rb.ID); got.Status != scheduler.Succeeded || got.Trigger.Kind != scheduler.Rollback {
		t.Fatalf("rollback run: %s %s %v", got.Status, got.Error, got.Notes)
	}
	if _, page := e.do(req{path: "/runs/" + second.ID}); !strings.Contains(page, ">rolled back</span>") || strings.Contains(page, "Roll back…") {
		t.Errorf("the page of a rolled-back run does not say so, or still offers a rollback")
	}
	resp, body = e.do(req{method: "POST", path: "/api/v1/runs/" + second.ID + "/rollback"})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already rolled back by run "+rb.ID) {
		t.Errorf("a second rollback: %d %s", resp.StatusCode, body)
	}
	var list struct{ Runs []runEntry }
	e.getJSON("/api/v1/runs?pipeline=shop&trigger=manual", &list)
	for _, r := range list.Runs {
		if r.ID == second.ID && (r.Outcome != "rolled back" || r.RolledBackBy != rb.ID) {
			t.Errorf("the rolled-back run listed as %+v", r)
		}
	}
	// Its grid has no column per rollback step.
	var grid struct{ Stages []string }
	e.getJSON("/api/v1/pipelines/shop/grid", &grid)
	if strings.Join(grid.Stages, ",") != "load,history,dim" {
		t.Errorf("grid columns %v, want the pipeline's stages only", grid.Stages)
	}
}

// TestPauseBackfillRoutes: pause and resume through the API (who and when, 409 when
// paused twice), shown on the pages; a backfill lists its slots, then queues their runs.
func TestPauseBackfillRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp, body := e.do(req{method: "POST", path: "/api/v1/pipelines/shop/pause", body: `{"reason": "upstream outage"}`})
	var p scheduler.Pause
	json.Unmarshal([]byte(body), &p)
	if resp.StatusCode != http.StatusOK || !p.Paused || p.By != "web@127.0.0.1" || p.Reason != "upstream outage" || p.Time.IsZero() {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	resp, body = e.do(req{method: "POST", path: "/api/v1/pipelines/shop/pause"})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already paused by web@127.0.0.1") {
		t.Errorf("pause twice: %d %s", resp.StatusCode, body)
	}
	e.sched.Tick(t.Context()) // the tick reads the paused pipelines
	if _, page := e.do(req{path: "/pipelines/shop"}); !strings.Contains(page, "The schedule is paused by web@127.0.0.1") || !strings.Contains(page, "Resume schedule") {
		t.Errorf("the page of a paused pipeline does not say so or offer to resume")
	}
	if _, page := e.do(req{path: "/pipelines"}); !strings.Contains(page, `class="tag paused"`) {
		t.Errorf("the pipelines page does not mark the paused pipeline")
	}
	resp, body = e.do(req{method: "POST", path: "/api/v1/pipelines/shop/resume"})
	if json.Unmarshal([]byte(body), &p); resp.StatusCode != http.StatusOK || p.Paused {
		t.Errorf("resume: %d %s", resp.StatusCode, body)
	}

	from, to := "2026-01-01", "2026-01-02"
	var plan struct{ Slots []slotView }
	e.getJSON("/api/v1/pipelines/shop/backfill?from="+from+"&to="+to, &plan)
	if len(plan.Slots) != 2 || plan.Slots[0].Action != "run" || plan.Slots[0].Run != "shop@20260101T010000Z" {
		t.Fatalf("backfill slots %+v, want the two 02:00 Berlin slots to run", plan.Slots)
	}
	if _, page := e.do(req{path: "/pipelines/shop/backfill?from=" + from + "&to=" + to}); !strings.Contains(page, "2 slots, 2 to run") || !strings.Contains(page, "Run 2 slots</button>") {
		t.Errorf("backfill page does not list the slots with the button")
	}
	resp, body = e.do(req{method: "POST", path: "/api/v1/pipelines/shop/backfill", body: `{"from": "` + from + `", "to": "` + to + `"}`})
	var bf struct{ Runs []runAnswer }
	if json.Unmarshal([]byte(body), &bf); resp.StatusCode != http.StatusAccepted || len(bf.Runs) != 2 {
		t.Fatalf("backfill: %d %s", resp.StatusCode, body)
	}
	for _, r := range bf.Runs {
		if got := e.waitEnd(r.ID); got.Status != scheduler.Succeeded || got.Trigger.Kind != scheduler.Backfill {
			t.Errorf("backfill run %s: %s %s", r.ID, got.Status, got.Trigger.Kind)
		}
	}
	e.getJSON("/api/v1/pipelines/shop/backfill?from="+from+"&to="+to, &plan)
	if plan.Slots[0].Action != "skip" || plan.Slots[0].Outcome != "succeeded" {
		t.Errorf("backfill slots after the backfill %+v, want them skipped", plan.Slots)
	}
}

// TestRunsPage: the runs of every pipeline on one page, filtered by pipeline, status,
// trigger and time range; a bad range or cursor is a 400.
func TestRunsPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	first, _ := e.twoRuns()
	slow := e.run("slow")
	_, page := e.do(req{path: "/runs"})
	for _, want := range []string{first.ID, slow.ID, `<select name="pipeline">`, `name="from"`} {
		if !strings.Contains(page, want) {
			t.Errorf("/runs lacks %q", want)
		}
	}
	if _, page := e.do(req{path: "/runs?pipeline=slow"}); strings.Contains(page, first.ID) || !strings.Contains(page, slow.ID) {
		t.Errorf("/runs?pipeline=slow shows other pipelines' runs or not its own")
	}
	day := first.Created.UTC().Format("2006-01-02")
	if _, page := e.do(req{path: "/runs?from=" + day + "&to=" + day}); !strings.Contains(page, first.ID) {
		t.Errorf("/runs of the day of the runs lacks them")
	}
	old := first.Created.Add(-48 * time.Hour).UTC().Format("2006-01-02")
	if _, page := e.do(req{path: "/runs?to=" + old}); !strings.Contains(page, "No run matches the filter") {
		t.Errorf("/runs before the runs lists some")
	}
	for _, bad := range []string{"from=yesterday", "from=2026-02-01&to=2026-01-01", "cursor=" + url.QueryEscape("eyJub3BlIjoxfQ"), "cursor=!!"} {
		resp, body := e.do(req{path: "/api/v1/runs?" + bad})
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("/api/v1/runs?%s: %d %s, want 400", bad, resp.StatusCode, body)
		}
		if resp, _ := e.do(req{path: "/runs?" + bad}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("/runs?%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}
