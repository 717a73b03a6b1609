package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserRowChecksOnMerges: a run made by serve whose scd2_merge drops an event by
// a row check, as a person sees it in a real Chromium: the run page lists the check
// under the merge with its counts and outcome, the dimension's history tab shows it on
// the version the merge wrote; /metrics counts it under the merge's stage.
func TestBrowserRowChecksOnMerges(t *testing.T) {
	chromium := findChromium(t)
	bin := buildBinary(t)
	dir, pipeline := rowChecksPipeline(t, "dim", `{name: positive, expect: "score > 0", on_violation: drop}`)
	srv := startServe(t, bin, dir, nil)
	base := "http://" + srv.addr
	waitFor(t, 10*time.Second, "the lease", func() bool { h := srv.health(t); return len(h.Leases) > 0 && h.Leases[0].Held })
	trig := runCmd(t, "", bin, "runs", "trigger", pipeline)
	if trig.code != 0 {
		t.Fatalf("runs trigger: exit %d\n%s%s", trig.code, trig.stdout, trig.stderr)
	}
	id := strings.TrimSpace(trig.stdout)
	waitFor(t, 60*time.Second, "the run to end", func() bool {
		r := runCLI(t, "runs", "show", id, "--pipeline", pipeline, "--format", "json")
		return r.code == 0 && strings.Contains(r.stdout, `"status": "succeeded"`) || strings.Contains(r.stdout, `"status":"succeeded"`)
	})
	v := lastVersion(t, dir, "dim.customer")

	b := newBrowser(t, chromium, 2*time.Minute)
	run, wantText := b.run, b.wantText
	run("open the run", chromedp.Navigate(base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`table.checks`)))
	wantText("run page", "table.checks", "positive", "drop", "dropped", "dim.customer@v", "staging.customers version 1")
	if got := b.text(`table.checks tr[data-check="positive"]`); !strings.Contains(got, "3\t1") {
		t.Errorf("positive's row shows %q, want 3 rows checked and 1 failed", got)
	}
	run("open the history", chromedp.Navigate(base+"/tables/dim.customer/history"), chromedp.WaitVisible(chromedp.CSS(`td.checks-cell`)))
	wantText("history", "table.history", "positive: dropped 1")
	if got := b.text(`table.history tbody tr:first-child td.checks-cell`); !strings.Contains(got, "positive") {
		t.Errorf("the newest version (v%d, the merge's) shows checks %q, want its own", v, got)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`orchestrator_expectation_failed_rows_total{expectation="positive",on_violation="drop",pipeline="rowchecks",stage="dim"} 1`,
		`orchestrator_expectation_checked_rows_total{expectation="positive",pipeline="rowchecks",stage="dim"} 3`,
		`orchestrator_expectation_results_total{expectation="positive",outcome="dropped",pipeline="rowchecks",stage="dim"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
