package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRoughEdges: each rough edge operators met, fixed.
func TestRoughEdges(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.twoRuns()

	t.Run("the warehouse as its location", func(t *testing.T) {
		var h Health
		e.getJSON("/healthz", &h)
		if len(h.Leases) == 0 || h.Leases[0].Warehouse != e.specs["shop"].Warehouse || strings.Contains(h.Leases[0].Warehouse, "&{") {
			t.Errorf("healthz leases %+v, want the warehouse %s", h.Leases, e.specs["shop"].Warehouse)
		}
		_, m := e.do(req{path: "/metrics"})
		if !strings.Contains(m, `orchestrator_lease_held{warehouse="`+e.specs["shop"].Warehouse+`"}`) {
			t.Errorf("metrics lack the lease of %s by its location", e.specs["shop"].Warehouse)
		}
	})

	t.Run("405 with Allow", func(t *testing.T) {
		for _, c := range []struct{ method, path, allow string }{
			{"GET", "/api/v1/runs/shop@20260101T010000Z/cancel", "POST"},
			{"DELETE", "/api/v1/runs", "GET, HEAD"},
			{"POST", "/pipelines/shop", "GET, HEAD"},
		} {
			resp, body := e.do(req{method: c.method, path: c.path})
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow || !strings.Contains(body, "answers "+c.allow+" only") {
				t.Errorf("%s %s: %d Allow %q %.120s; want 405 allowing %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body, c.allow)
			}
		}
		if resp, _ := e.do(req{method: "DELETE", path: "/nope"}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("DELETE /nope: %d, want 404", resp.StatusCode)
		}
	})

	t.Run("errors in the user's terms", func(t *testing.T) {
		resp, body := e.do(req{path: "/api/v1/runs/shop@20260101T010000Z"})
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "run shop@20260101T010000Z: no such run") || strings.Contains(body, "_orchestrator") || strings.Contains(body, ".json") {
			t.Errorf("missing run: %d %s", resp.StatusCode, body)
		}
		for _, c := range []struct{ body, want string }{
			{`{"params": "x"}`, `field "params" is a JSON string`},
			{`{"params": {"region": 3}}`, `is a JSON number`},
			{`{"x": 1}`, `unknown field "x"`},
		} {
			resp, raw := e.do(req{method: "POST", path: "/api/v1/pipelines/shop/runs", body: c.body})
			var msg struct{ Error string }
			json.Unmarshal([]byte(raw), &msg)
			body := msg.Error
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) || strings.Contains(body, "triggerBody") || strings.Contains(body, "Go ") || strings.Contains(body, "map[string]") {
				t.Errorf("trigger with %s: %d %s; want 400 saying %q, no Go type", c.body, resp.StatusCode, body, c.want)
			}
		}
	})

	t.Run("HTML error pages with their status", func(t *testing.T) {
		for _, c := range []struct {
			path string
			code int
		}{
			{"/pipelines/nope", 404}, {"/runs/nope", 404}, {"/tables/raw.customers/rows?version=abc", 400},
			{"/tables/raw.customers/changes?types=bogus", 400}, {"/runs?status=bogus", 400},
		} {
			resp, body := e.do(req{path: c.path})
			if resp.StatusCode != c.code || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `class="error"`) {
				t.Errorf("%s: %d %s, want a %d page with the error", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.code)
			}
		}
	})

	t.Run("the where hint from the table's columns", func(t *testing.T) {
		_, page := e.do(req{path: "/tables/raw.customers/rows"})
		if strings.Contains(page, "amount") || !strings.Contains(page, `placeholder="customer_id = &#39;…&#39; AND load_timestamp &gt;= &#39;2026-01-01&#39;"`) {
			i := strings.Index(page, `name="where"`)
			t.Errorf("raw.customers where hint: %.200s", page[max(i, 0):])
		}
	})

	t.Run("heavy reads bounded per client", func(t *testing.T) {
		for range e.site.heavyReads.maxClient { // the client's share is taken
			release, ok := e.site.heavyReads.acquire("127.0.0.1")
			if !ok {
				t.Fatal("no slot")
			}
			defer release()
		}
		for _, path := range []string{"/api/v1/tables/raw.customers/diff?from=1&to=2", "/api/v1/tables/raw.customers/rows?order_by=city", "/tables/raw.customers/changes?from=1"} {
			resp, body := e.do(req{path: path})
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "at most 2 per client") {
				t.Errorf("%s over the client's share: %d Retry-After %q %.100s; want 429", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		}
		if resp, _ := e.do(req{path: "/api/v1/tables/raw.customers/rows"}); resp.StatusCode != http.StatusOK {
			t.Errorf("an unsorted rows page over the share: %d, want 200 (it is no heavy read)", resp.StatusCode)
		}
	})

	t.Run("a change feed page reads only what it shows", func(t *testing.T) {
		var res changesResult
		e.getJSON("/api/v1/tables/raw.customers/changes?from=1&limit=2", &res)
		if res.Rows() != 2 || !res.Truncated || !res.CountsFromMetrics || len(res.Counts) != 2 {
			t.Fatalf("changes limit 2: %d rows, truncated %v, counts from metrics %v, counts %+v", res.Rows(), res.Truncated, res.CountsFromMetrics, res.Counts)
		}
		// v1 inserted two rows; v2 (a MERGE) changed one and inserted one.
		if c := res.Counts[0].Counts; c["insert"] != 2 {
			t.Errorf("v1 counts %v", c)
		}
		if c := res.Counts[1].Counts; c["insert"] != 1 || c["update_preimage"] != 1 || c["update_postimage"] != 1 {
			t.Errorf("v2 counts %v", c)
		}
		var all changesResult
		e.getJSON("/api/v1/tables/raw.customers/changes?from=1", &all)
		if all.Truncated || all.CountsFromMetrics || all.Rows() != 5 {
			t.Errorf("the whole feed: %d rows, truncated %v, from metrics %v", all.Rows(), all.Truncated, all.CountsFromMetrics)
		}
	})
}

// Durations and counts for people.
func TestPeopleFormats(t *testing.T) {
	for d, want := range map[time.Duration]string{
		40 * time.Microsecond: "40 µs", 900 * time.Microsecond: "0.9 ms", 12300 * time.Microsecond: "12 ms",
		850 * time.Millisecond: "850 ms", 12400 * time.Millisecond: "12.4 s", 185 * time.Second: "3 min 05 s", 0: "",
	} {
		if got := durationWords(d); got != want {
			t.Errorf("durationWords(%s) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 10000024: "10,000,024", -1234: "-1,234"} {
		if got := countText(n); got != want {
			t.Errorf("countText(%d) = %q, want %q", n, got, want)
		}
	}
	var e runEntry
	b, _ := json.Marshal(entryView(e.Entry, time.Now()))
	if strings.Contains(string(b), "duration_ms") {
		t.Errorf("a run not started has a duration: %s", b)
	}
}
