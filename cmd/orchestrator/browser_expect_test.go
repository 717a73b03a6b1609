package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserExpectations: a run made by serve whose ingest warns on one expectation,
// quarantines by another and passes a table check, as a person sees it in a real
// Chromium: the run page lists each check with its counts and outcome, the table's
// history tab shows the checks of the version they judged; /metrics counts them.
// Screenshots 30-31.
func TestBrowserExpectations(t *testing.T) {
	chromium := findChromium(t)
	bin := buildBinary(t)
	dir, pipeline := expectOrders(t, `      - {name: email_known, expect: "email != 'bx.com'", on_violation: warn}
      - {name: positive_quantity, expect: "quantity > 0", on_violation: quarantine}
      - {name: unique_order, unique: [order_id], on_violation: fail}
`, true)
	srv := startServe(t, bin, dir, nil)
	base := "http://" + srv.addr
	waitFor(t, 10*time.Second, "the lease", func() bool { h := srv.health(t); return len(h.Leases) > 0 && h.Leases[0].Held })
	trig := runCmd(t, "", bin, "runs", "trigger", pipeline)
	if trig.code != 0 {
		t.Fatalf("runs trigger: exit %d\n%s%s", trig.code, trig.stdout, trig.stderr)
	}
	id := strings.TrimSpace(trig.stdout)
	waitFor(t, 30*time.Second, "the run to end", func() bool {
		r := runCLI(t, "runs", "show", id, "--pipeline", pipeline, "--format", "json")
		return r.code == 0 && strings.Contains(r.stdout, `"status": "succeeded"`) || strings.Contains(r.stdout, `"status":"succeeded"`)
	})

	b := newBrowser(t, chromium, 2*time.Minute)
	run, shot, wantText := b.run, b.shot, b.wantText

	run("open the run", chromedp.Navigate(base+"/runs/"+id), chromedp.WaitVisible(chromedp.CSS(`table.checks`)))
	wantText("run page", "table.checks", "email_known", "warn", "warned", "positive_quantity", "quarantine", "quarantined",
		"unique_order", "unique", "passed", "bronze.orders@v1", "a.csv:3")
	if got := b.text(`table.checks tr[data-check="positive_quantity"]`); !strings.Contains(got, "5\t2") {
		t.Errorf("positive_quantity's row shows %q, want 5 rows checked and 2 failed", got)
	}
	shot("30-run-checks.png")

	run("open the history", chromedp.Navigate(base+"/tables/bronze.orders/history"), chromedp.WaitVisible(chromedp.CSS(`td.checks-cell`)))
	wantText("history", "table.history", "email_known: warned 1", "positive_quantity: quarantined 2", "unique_order: passed")
	if got := b.text(`table.history tbody tr:first-child td.checks-cell`); !strings.Contains(got, "positive_quantity") {
		t.Errorf("the newest version (v1) shows checks %q, want its own", got)
	}
	if got := b.text(`table.history tbody tr:last-child td.checks-cell`); got != "" {
		t.Errorf("version 0 (the table's creation) shows checks %q, want none", got)
	}
	shot("31-history-checks.png")

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`orchestrator_expectation_failed_rows_total{expectation="positive_quantity",on_violation="quarantine",pipeline="exp",stage="load"} 2`,
		`orchestrator_expectation_checked_rows_total{expectation="positive_quantity",pipeline="exp",stage="load"} 5`,
		`orchestrator_expectation_results_total{expectation="email_known",outcome="warned",pipeline="exp",stage="load"} 1`,
		`orchestrator_expectation_results_total{expectation="unique_order",outcome="passed",pipeline="exp",stage="load"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
