package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// UnmarshalJSON reads a cell back (tests).
func (c *cell) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		c.Null = true
	case string:
		c.Text, c.JSON = v, v
	default:
		c.Text, c.JSON = string(b), v
	}
	return nil
}

func TestAPIPipelinesAndRuns(t *testing.T) {
	e := newEnv(t, envOptions{})
	first, second := e.twoRuns()

	var ps struct {
		Pipelines  []pipelineView `json:"pipelines"`
		LoadErrors []LoadError    `json:"load_errors"`
	}
	e.getJSON("/api/v1/pipelines", &ps)
	if len(ps.Pipelines) != 2 || ps.Pipelines[0].Name != "shop" || ps.Pipelines[1].Name != "slow" {
		t.Fatalf("pipelines %+v, want shop and slow", ps.Pipelines)
	}
	shop := ps.Pipelines[0]
	if shop.ScheduleWords != "at 02:00 every day" || shop.Schedule != "0 2 * * *" || shop.Timezone != "Europe/Berlin" {
		t.Errorf("schedule %q %q %q, want at 02:00 every day, 0 2 * * *, Europe/Berlin", shop.ScheduleWords, shop.Schedule, shop.Timezone)
	}
	if loc, _ := time.LoadLocation("Europe/Berlin"); shop.NextSlot.IsZero() || shop.NextSlot.In(loc).Hour() != 2 {
		t.Errorf("next slot %v, want a 02:00 Berlin time", shop.NextSlot)
	}
	if len(shop.Params) != 1 || shop.Params[0].Name != "region" || *shop.Params[0].Default != "eu" {
		t.Errorf("params %+v, want region (default eu)", shop.Params)
	}
	if shop.LastRun == nil || shop.LastRun.ID != second.ID || shop.LastRun.Status != scheduler.Succeeded || shop.LastRun.DurationMS <= 0 {
		t.Errorf("last run %+v, want %s succeeded with a duration", shop.LastRun, second.ID)
	}
	if len(shop.Recent) != 2 || shop.Recent[0].ID != second.ID || shop.Recent[1].ID != first.ID {
		t.Errorf("recent runs %+v, want %s then %s", shop.Recent, second.ID, first.ID)
	}
	if ps.Pipelines[1].ScheduleWords != "on demand only" || ps.Pipelines[1].LastRun != nil {
		t.Errorf("slow: %q, last run %+v; want on demand only, none", ps.Pipelines[1].ScheduleWords, ps.Pipelines[1].LastRun)
	}

	var one struct {
		pipelineView
		Definition string `json:"definition"`
	}
	e.getJSON("/api/v1/pipelines/shop", &one)
	if !strings.Contains(one.Definition, "pipeline: shop") || len(one.Stages) != 3 {
		t.Errorf("pipeline shop: definition %q..., %d stages; want its file and 3 stages", one.Definition[:20], len(one.Stages))
	}
	if resp, _ := e.do(req{path: "/api/v1/pipelines/nope"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown pipeline: %d, want 404", resp.StatusCode)
	}

	// Pages of one run, then the end.
	var page struct {
		Runs []runEntry `json:"runs"`
		Next string     `json:"next_cursor"`
	}
	e.getJSON("/api/v1/runs?pipeline=shop&status=succeeded&limit=1", &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != second.ID || page.Next == "" {
		t.Fatalf("first page %+v next %q, want %s and a cursor", page.Runs, page.Next, second.ID)
	}
	e.getJSON("/api/v1/runs?pipeline=shop&status=succeeded&limit=1&cursor="+url.QueryEscape(page.Next), &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != first.ID {
		t.Fatalf("second page %+v, want %s", page.Runs, first.ID)
	}
	if page.Next != "" {
		e.getJSON("/api/v1/runs?pipeline=shop&status=succeeded&limit=1&cursor="+url.QueryEscape(page.Next), &page)
		if len(page.Runs) != 0 || page.Next != "" {
			t.Errorf("third page %+v next %q, want nothing", page.Runs, page.Next)
		}
	}
	e.getJSON("/api/v1/runs?status=failed", &page)
	if len(page.Runs) != 0 {
		t.Errorf("failed runs %+v, want none", page.Runs)
	}
	for _, bad := range []string{"status=done", "trigger=cron", "limit=0", "limit=501", "cursor=!!!", "cursor=bm90LWpzb24", "pipeline=nope"} {
		if resp, body := e.do(req{path: "/api/v1/runs?" + bad}); resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
			t.Errorf("runs?%s: %d %s, want 400 or 404", bad, resp.StatusCode, body)
		}
	}

	var rec scheduler.Record
	e.getJSON("/api/v1/runs/"+second.ID, &rec)
	if rec.ID != second.ID || len(rec.Stages) != 3 || rec.Stage("load").RowsOut != 2 {
		t.Errorf("run %s: %d stages, load wrote %d rows; want 3 stages, 2 rows", rec.ID, len(rec.Stages), rec.Stage("load").RowsOut)
	}
	if resp, _ := e.do(req{path: "/api/v1/runs/not-a-run"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bad run id: %d, want 404", resp.StatusCode)
	}
	if resp, _ := e.do(req{path: "/api/v1/runs/shop@20200101T000000Z"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("missing run: %d, want 404", resp.StatusCode)
	}

	var grid struct {
		Stages []string  `json:"stages"`
		Runs   []gridRow `json:"runs"`
	}
	e.getJSON("/api/v1/pipelines/shop/grid", &grid)
	if !slices.Equal(grid.Stages, []string{"load", "history", "dim"}) || len(grid.Runs) != 2 || grid.Runs[0].Stages["dim"] != scheduler.Succeeded {
		t.Errorf("grid %v %+v, want load, history, dim; 2 runs with dim succeeded", grid.Stages, grid.Runs)
	}

	resp, log := e.do(req{path: "/api/v1/runs/" + second.ID + "/stages/load/log"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(log, "attempt 1 succeeded") {
		t.Errorf("stage log: %d %q, want the attempt's lines", resp.StatusCode, log)
	}

	// The event stream of an ended run: its state, then the end; resuming from that
	// state sends only the end.
	resp, events := e.do(req{path: "/api/v1/runs/" + second.ID + "/events"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		!strings.Contains(events, "event: run\nid: ") || !strings.Contains(events, `"status":"succeeded"`) || !strings.Contains(events, "event: end") {
		t.Fatalf("events: %d %q", resp.StatusCode, events)
	}
	id := strings.SplitN(strings.SplitN(events, "id: ", 2)[1], "\n", 2)[0]
	_, resumed := e.do(req{path: "/api/v1/runs/" + second.ID + "/events", header: map[string]string{"Last-Event-ID": id}})
	if strings.Contains(resumed, "event: run") || !strings.Contains(resumed, "event: end") {
		t.Errorf("resumed at the last event: %q, want only the end", resumed)
	}
}

func TestAPITriggerCancelRetry(t *testing.T) {
	e := newEnv(t, envOptions{})

	// Trigger with a parameter; the run goes to its page's URL.
	resp, body := e.do(req{method: "POST", path: "/api/v1/pipelines/shop/runs", body: `{"params":{"region":"us"}}`})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", resp.StatusCode, body)
	}
	// The answer is compact: the run's id, state and links, not its definition.
	var rec runAnswer
	json.Unmarshal([]byte(body), &rec)
	if rec.Trigger != scheduler.Manual || rec.Status != scheduler.Queued || resp.Header.Get("Location") != "/api/v1/runs/"+rec.ID ||
		rec.Links["page"] != "/runs/"+rec.ID || rec.Links["events"] != "/api/v1/runs/"+rec.ID+"/events" || len(body) > 600 || strings.Contains(body, "definition") {
		t.Errorf("trigger answer %s (Location %q), want a compact manual run with its links", body, resp.Header.Get("Location"))
	}
	if got := e.waitEnd(rec.ID); got.Status != scheduler.Succeeded || got.Params["region"] != "us" {
		t.Fatalf("run %s: %s %s, params %v (want region=us)", got.ID, got.Status, got.Error, got.Params)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"params":{"nope":"1"}}`, "nope"},
		{`{"params":`, "body"},
		{`{"other":1}`, "other"},
	} {
		resp, body := e.do(req{method: "POST", path: "/api/v1/pipelines/shop/runs", body: bad.body})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, bad.want) {
			t.Errorf("trigger with %s: %d %s, want 400 naming %q", bad.body, resp.StatusCode, body, bad.want)
		}
	}
	resp, _ = e.do(req{method: "POST", path: "/api/v1/runs/" + rec.ID + "/cancel"})
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("cancel an ended run: %d, want 409", resp.StatusCode)
	}

	// Cancel a running run: its source is held.
	e.src.hold()
	resp, body = e.do(req{method: "POST", path: "/api/v1/pipelines/slow/runs"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("trigger slow: %d %s", resp.StatusCode, body)
	}
	json.Unmarshal([]byte(body), &rec)
	select {
	case <-e.src.hits:
	case <-time.After(30 * time.Second):
		t.Fatal("the run never reached its source")
	}
	if _, page := e.do(req{path: "/runs/" + rec.ID}); !strings.Contains(page, ">Cancel</button>") || !strings.Contains(page, `id="run-status" data-status="running">`) {
		t.Error("the page of a running run has no Cancel button")
	}
	resp, body = e.do(req{method: "POST", path: "/api/v1/runs/" + rec.ID + "/cancel"})
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, "cancelled") {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	if got := e.waitEnd(rec.ID); got.Status != scheduler.Cancelled || !strings.Contains(got.Reason, "web@127.0.0.1") {
		t.Errorf("cancelled run: %s %q, want cancelled by web@127.0.0.1", got.Status, got.Reason)
	}
	e.src.release()

	// Retry a failed run: the source fails once, then answers.
	e.src.setFail(true)
	failed := e.run("slow")
	if failed.Status != scheduler.Failed {
		t.Fatalf("run with a failing source: %s", failed.Status)
	}
	e.src.setFail(false)
	if _, page := e.do(req{path: "/runs/" + failed.ID}); !strings.Contains(page, "Retry failed</button>") || strings.Contains(page, ">Cancel</button>") ||
		!strings.Contains(page, "giving up after 1 attempt") || !strings.Contains(page, "Log of fetch (last") {
		t.Error("the page of a failed run lacks Retry failed, its error or its log, or offers Cancel")
	}
	// Two retry requests at once give one retry: the other gets 409 naming it.
	e.src.hold()
	type answer struct {
		code int
		body string
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			resp, err := http.Post(e.srv.URL+"/api/v1/runs/"+failed.ID+"/retry", "application/json", nil)
			if err != nil {
				answers <- answer{0, err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers <- answer{resp.StatusCode, string(b)}
		}()
	}
	a, b := <-answers, <-answers
	if a.code != http.StatusAccepted {
		a, b = b, a
	}
	var retry runAnswer
	json.Unmarshal([]byte(a.body), &retry)
	if a.code != http.StatusAccepted || b.code != http.StatusConflict || !strings.Contains(b.body, "is being retried by run "+retry.ID) || !strings.Contains(b.body, "one retry at a time") {
		t.Fatalf("two retries at once: %d %s and %d %s; want one 202 and one 409 naming the retry", a.code, a.body, b.code, b.body)
	}
	if retry.Trigger != scheduler.Retry || retry.Of != failed.ID || retry.ID != failed.ID+"-r1" {
		t.Errorf("retry %+v, want %s-r1, a retry of %s", retry, failed.ID, failed.ID)
	}
	// While the retry runs, the failed run says so and offers no retry.
	if _, page := e.do(req{path: "/runs/" + failed.ID}); strings.Contains(page, "Retry failed</button>") || !regexp.MustCompile(`retried: (queued|running)`).MatchString(page) {
		t.Errorf("the page of a run being retried offers a retry or hides the retry's state")
	}
	resp, body = e.do(req{method: "POST", path: "/api/v1/runs/" + failed.ID + "/retry"})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, retry.ID) {
		t.Errorf("a third retry while the first runs: %d %s, want 409 naming %s", resp.StatusCode, body, retry.ID)
	}
	e.src.release()
	if got := e.waitEnd(retry.ID); got.Status != scheduler.Succeeded {
		t.Errorf("retry: %s %s", got.Status, got.Error)
	}
	old, _ := e.sched.Record(t.Context(), failed.ID)
	if !slices.Equal(old.RetriedBy, []string{retry.ID}) || old.RetryStatus != scheduler.Succeeded {
		t.Errorf("failed run retried by %v (%s), want %s, succeeded", old.RetriedBy, old.RetryStatus, retry.ID)
	}
	if _, page := e.do(req{path: "/runs/" + failed.ID}); strings.Contains(page, "Retry failed</button>") || !strings.Contains(page, "retried: succeeded") {
		t.Errorf("the page of a run whose retry succeeded offers a retry or hides it")
	}
	var list struct{ Runs []runEntry }
	e.getJSON("/api/v1/runs?pipeline=slow&status=failed", &list)
	if len(list.Runs) == 0 || list.Runs[0].ID != failed.ID || list.Runs[0].Outcome != "retried: succeeded" || list.Runs[0].RetriedBy != retry.ID {
		t.Errorf("runs list %+v, want the failed run first with outcome retried: succeeded", list.Runs)
	}
	for _, id := range []string{failed.ID, retry.ID} {
		resp, body = e.do(req{method: "POST", path: "/api/v1/runs/" + id + "/retry"})
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("retry of %s (its retry succeeded, or it succeeded): %d %s, want 409", id, resp.StatusCode, body)
		}
	}
}

func TestAPITables(t *testing.T) {
	e := newEnv(t, envOptions{})
	first, second := e.twoRuns()

	var list struct {
		Tables []struct{ Name string } `json:"tables"`
	}
	e.getJSON("/api/v1/tables", &list)
	var names []string
	for _, tb := range list.Tables {
		names = append(names, tb.Name)
	}
	if want := []string{"audit.customers_history", "dim.customer", "raw.customers", "raw.signals"}; !slices.Equal(names, want) {
		t.Errorf("tables %v, want %v", names, want)
	}

	var ti tableInfo
	e.getJSON("/api/v1/tables/raw.customers", &ti)
	if !ti.Exists || ti.Version != 2 || !ti.ChangeDataFeed || ti.Properties["delta.enableChangeDataFeed"] != "true" || ti.Files == 0 || ti.SizeBytes == 0 {
		t.Errorf("raw.customers: %+v; want version 2 with its change feed on", ti)
	}
	if ti.Schema[0].Name != "customer_id" || ti.Schema[0].Nullable || !slices.Equal(ti.Keys, []string{"customer_id"}) {
		t.Errorf("schema %+v keys %v, want customer_id not null as the key", ti.Schema[0], ti.Keys)
	}
	if len(ti.Consumers) != 2 {
		t.Fatalf("consumers %+v, want history and dim", ti.Consumers)
	}
	for _, c := range ti.Consumers {
		if c.NextVersion != 3 || c.Behind != 0 || c.AtRisk != "" {
			t.Errorf("consumer %+v, want it to read from v3, nothing behind, nothing at risk", c)
		}
	}
	if ti.Horizons == nil || ti.Horizons.Latest != 2 || ti.Horizons.VacuumVersion != 0 {
		t.Errorf("horizons %+v, want latest 2 and every version within retention", ti.Horizons)
	}
	var dim tableInfo
	e.getJSON("/api/v1/tables/dim.customer", &dim)
	if dim.Schema[0].Identity != "start 1, step 1" || !slices.Equal(dim.Keys, []string{"customer_sk"}) {
		t.Errorf("dim.customer: %+v keys %v, want the identity column as its key", dim.Schema[0], dim.Keys)
	}

	var hist struct {
		History []historyRow `json:"history"`
	}
	e.getJSON("/api/v1/tables/raw.customers/history", &hist)
	if len(hist.History) != 3 || hist.History[0].Version != 2 || hist.History[0].Run != second.ID || hist.History[0].Pipeline != "shop" || hist.History[0].Stage != "load" {
		t.Fatalf("history %+v, want 3 versions, v2 by %s stage load", hist.History, second.ID)
	}
	if hist.History[1].Run != first.ID || hist.History[0].Summary == "" || hist.History[0].Operation != "MERGE" {
		t.Errorf("history v1 by %q, v2 %q %q; want %s, a MERGE with a summary", hist.History[1].Run, hist.History[0].Operation, hist.History[0].Summary, first.ID)
	}

	var rows rowsResult
	e.getJSON("/api/v1/tables/raw.customers/rows?version=1&columns=customer_id,city", &rows)
	if rows.Version != 1 || len(rows.Rows) != 2 || len(rows.Columns) != 2 || rows.Rows[0][1].Text != "Seattle" {
		t.Errorf("rows at v1: %+v, want C-1 in Seattle and C-2", rows)
	}
	e.getJSON("/api/v1/tables/raw.customers/rows?where="+url.QueryEscape("customer_id = 'C-1'"), &rows)
	if len(rows.Rows) != 1 || rows.Rows[0][2].Text != "Portland" {
		t.Errorf("C-1 now: %+v, want Portland", rows.Rows)
	}
	e.getJSON("/api/v1/tables/raw.customers/rows?order_by=customer_id&desc=1&limit=2&columns=city", &rows)
	if len(rows.Rows) != 2 || !rows.Truncated || len(rows.Columns) != 1 || rows.Rows[0][0].Text != "Lyon" || rows.Rows[1][0].Text != "Paris" {
		t.Errorf("ordered by customer_id desc, 2 rows: %+v, want Lyon (C-3) then Paris (C-2), truncated, city only", rows)
	}
	var ts struct {
		History []historyRow `json:"history"`
	}
	e.getJSON("/api/v1/tables/raw.customers/history", &ts)
	e.getJSON("/api/v1/tables/raw.customers/rows?timestamp="+url.QueryEscape(ts.History[1].Timestamp.Format(time.RFC3339Nano)), &rows)
	if rows.Version != 1 {
		t.Errorf("as of v1's time: version %d, want 1", rows.Version)
	}
	for _, bad := range []string{"version=-1", "version=x", "where=" + url.QueryEscape("city = "), "order_by=nope", "limit=100000", "version=1&timestamp=2026-01-01", "version=99"} {
		if resp, body := e.do(req{path: "/api/v1/tables/raw.customers/rows?" + bad}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("rows?%s: %d %s, want 400", bad, resp.StatusCode, body)
		}
	}

	var ch changesResult
	e.getJSON("/api/v1/tables/raw.customers/changes?from=2&to=2", &ch)
	if ch.From != 2 || ch.To != 2 || len(ch.Counts) != 1 || ch.Counts[0].Counts["update_postimage"] != 1 || ch.Counts[0].Counts["insert"] != 1 || ch.Rows() != 3 {
		t.Errorf("changes of v2: %+v, want C-1 updated and C-3 inserted", ch)
	}
	var all changesResult
	e.getJSON("/api/v1/tables/raw.customers/changes", &all)
	if ch := all; ch.From != 0 || ch.To != 2 || len(ch.Counts) != 2 || ch.Counts[0].Counts["insert"] != 2 || len(ch.Counts[0].Counts) != 1 {
		t.Errorf("changes by default: v%d..v%d %+v, want every version with the feed", ch.From, ch.To, ch.Counts)
	}

	var d diffResult
	e.getJSON("/api/v1/tables/raw.customers/diff?from=1&to=2", &d)
	if d.Added != 1 || d.Changed != 1 || d.Removed != 0 || !slices.Equal(d.Keys, []string{"customer_id"}) {
		t.Fatalf("diff v1→v2: %+v, want C-3 added, C-1 changed", d)
	}
	for _, r := range d.Rows {
		switch r.Kind {
		case "changed":
			if r.Key[0].Text != "C-1" || !slices.Contains(r.Changed, "city") || slices.Contains(r.Changed, "name") {
				t.Errorf("changed row %+v, want C-1's city (and lineage) changed, not its name", r)
			}
		case "added":
			if r.Key[0].Text != "C-3" || r.Before != nil {
				t.Errorf("added row %+v, want C-3", r)
			}
		}
	}
	var dd diffResult
	e.getJSON("/api/v1/tables/dim.customer/diff", &dd)
	if dd.Added != 2 || dd.Changed != 1 || dd.Keys[0] != "customer_sk" {
		t.Errorf("dim diff of the last version: %+v, want the closed C-1 version changed, C-1 and C-3 added", dd)
	}
	if resp, _ := e.do(req{path: "/api/v1/tables/raw.customers/diff?key=nope"}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("diff by an unknown key: %d, want 400", resp.StatusCode)
	}
}

// TestOpenAPIMatchesRoutes: the document lists exactly the API routes registered, each
// with its method.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	e.getJSON("/api/v1/openapi.json", &doc)
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m, op := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
			if op["summary"] == nil || op["responses"] == nil {
				t.Errorf("%s %s: no summary or responses", m, p)
			}
		}
	}
	registered := map[string]bool{}
	for _, r := range e.site.routes {
		if strings.HasPrefix(r.pattern, "/api/") {
			registered[r.method+" "+r.pattern] = true
		}
	}
	for k := range registered {
		if !documented[k] {
			t.Errorf("route %s is not in the OpenAPI document", k)
		}
	}
	for k := range documented {
		if !registered[k] {
			t.Errorf("the OpenAPI document lists %s, which is not a route", k)
		}
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") || len(registered) < 16 {
		t.Errorf("openapi %q, %d routes", doc.OpenAPI, len(registered))
	}
}

// TestConsumersAtRisk: readers that lag behind what a vacuum a week later would keep
// are named, on the API and the page.
func TestConsumersAtRisk(t *testing.T) {
	later := time.Now().Add(8 * 24 * time.Hour)
	e := newEnv(t, envOptions{now: func() time.Time { return later }})
	e.run("shop")
	write(t, e.dir, "landing/2.csv", "customer_id,name,city\nC-1,Ann,Portland\n")
	rec, err := e.sched.Trigger(t.Context(), "shop", scheduler.Trigger{Kind: scheduler.Manual, Stages: []string{"load"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.waitEnd(rec.ID); got.Status != scheduler.Succeeded {
		t.Fatalf("load only: %s %s", got.Status, got.Error)
	}
	var ti tableInfo
	e.getJSON("/api/v1/tables/raw.customers", &ti)
	if ti.Horizons.VacuumVersion != 3 {
		t.Errorf("a week later every version is past retention: vacuum keeps from v%d, want 3 (none)", ti.Horizons.VacuumVersion)
	}
	for _, c := range ti.Consumers {
		if c.NextVersion != 2 || c.Behind != 1 || !strings.Contains(c.AtRisk, "a vacuum now by another engine, or forced, would delete the changes of versions 2 to 2") {
			t.Errorf("consumer %s: next v%d, behind %d, at risk %q; want v2, 1, the vacuum named", c.Stage, c.NextVersion, c.Behind, c.AtRisk)
		}
	}
	_, page := e.do(req{path: "/tables/raw.customers"})
	if !strings.Contains(page, `<g class="consumer risk">`) || !strings.Contains(page, `<tr class="risk">`) {
		t.Error("table page: the readers at risk are not marked")
	}
}
