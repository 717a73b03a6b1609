package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// The browser test drives the pages of a real serve with Debian's Chromium (headless,
// through chromedp) as a first-time user would, and saves a screenshot of each page in
// the screenshot folder (ORCH_SCREENSHOTS, default artifacts/screenshots at the
// repository root; gitignored). Without Chromium it is skipped, or fails when CI=true:
// scripts/test.sh installs it.

// EnvChromium names the Chromium binary (default: chromium on PATH, /usr/bin/chromium).
const EnvChromium = "ORCH_TEST_CHROMIUM"

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "no Chromium (set %s, or apt-get install chromium; scripts/test.sh does)", EnvChromium)
	return ""
}

// screenshotDir is where the browser test saves its screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ORCH_SCREENSHOTS")
	if dir == "" {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "artifacts", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyDir copies a directory tree (an example pipeline and its data).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			if d.Name() == "warehouse" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// browser is a headless Chromium driven by a test, with the steps the tests take: run
// actions, evaluate JavaScript, read an element's text, save a screenshot.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

// newBrowser starts a headless Chromium for the test, stopped when it ends.
func newBrowser(t *testing.T, chromium string, timeout time.Duration) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return &browser{t: t, ctx: ctx, shots: screenshotDir(t)}
}

func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) eval(what, js string) any {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](js))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// shot saves a screenshot of the whole page in the screenshot folder.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// text reads what an element shows, in one step (a live part may be replaced between
// finding a node and reading it).
func (b *browser) text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(function(){ const e = document.querySelector(%q); return e ? e.innerText : "(no element " + %q + ")"; })()`, sel, sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return v
}

// wantText checks that an element shows each of wants.
func (b *browser) wantText(page, sel string, wants ...string) {
	b.t.Helper()
	got := b.text(sel)
	for _, w := range wants {
		if !strings.Contains(got, w) {
			b.t.Errorf("%s: %s shows %q; want %q in it", page, sel, clipText(got), w)
		}
	}
}

func TestBrowser(t *testing.T) {
	chromium := findChromium(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "examples", "pipelines", "sales"), filepath.Join(dir, "pipes"))
	// A file that does not validate shows on the pipelines page with its problem.
	if err := os.WriteFile(filepath.Join(dir, "pipes", "broken.yaml"), []byte("pipeline: broken\nschedul: daily\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A pipeline whose one stage loads 2 M rows in passes under a small memory budget:
	// long enough to follow its progress, and to cancel it.
	writeBigPipeline(t, filepath.Join(dir, "pipes"))
	srv := startServe(t, bin, filepath.Join(dir, "pipes"), nil, "--watch-every", "1s")
	base := "http://" + srv.addr
	b := newBrowser(t, chromium, 4*time.Minute)
	ctx, run, eval, shot, wantText := b.ctx, b.run, b.eval, b.shot, b.wantText

	// 1. The pipelines page: the schedule in words, no run yet, a Run now button.
	run("open the pipelines page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`button[data-run-now="sales"]`)))
	wantText("pipelines", "table.pipelines", "sales", "at 02:00 every day", "0 2 * * *", "Europe/Berlin", "never ran")
	wantText("pipelines", ".problems", "1 pipeline file failed to load", "broken.yaml", "schedul")
	shot("01-pipelines.png")

	// 2. Run now: the run page follows the run until it succeeds, with no reload.
	run("click Run now", chromedp.Click(chromedp.CSS(`button[data-run-now="sales"]`)), chromedp.WaitVisible(chromedp.CSS(`#run-status`)))
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(url, "/runs/sales@") {
		t.Fatalf("Run now led to %s, want a run page", url)
	}
	eval("mark the page", `window.__sameDocument = true`)
	deadline := time.Now().Add(2 * time.Minute)
	status := ""
	for time.Now().Before(deadline) {
		// Read in one step: the live part is replaced as the run goes on.
		status = strings.TrimSpace(fmt.Sprint(eval("read the run's status", `((document.getElementById('run-status') || {}).dataset || {}).status || ''`)))
		if status != "queued" && status != "running" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if status != "succeeded" {
		shot("02-run-failed.png")
		t.Fatalf("run page status %q, want succeeded; stderr:\n%s", status, srv.stderr)
	}
	if same := eval("check the page was not reloaded", `window.__sameDocument === true`); same != true {
		t.Error("the run page reloaded to show the run's end; want it updated in place")
	}
	if nodes := eval("count the graph's stages", `document.querySelectorAll('.dag .node.st-succeeded').length`); nodes != 5.0 {
		t.Errorf("run page graph: %v succeeded stages, want 5", nodes)
	}
	wantText("run", "table.stages", "ingest_sales", "merge_customers", "vacuum", "bronze.sales_transactions@v1", "sales.customer@v")
	shot("02-run.png")
	// The tables' freshness (read every second here) and the deadline show with the
	// runs: the sales tables fresh; big's table, never written, stale after its 2s.
	// The watch judges on its own ticks; under load its first stale verdict (and its
	// first look at the sales table the run wrote) may come a few ticks late, so the
	// page is reloaded until it shows both (or 30s pass).
	for staleBy := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		run("back to the pipelines", chromedp.Navigate(base+"/pipelines"), chromedp.WaitVisible(chromedp.CSS(`svg.strip rect.st-succeeded`)))
		judged := strings.Contains(b.text(`tr[data-pipeline="big"] [data-watch="raw.big"]`), "stale") &&
			strings.Contains(b.text(`tr[data-pipeline="sales"] [data-watch="bronze.sales_transactions"]`), "last data change v")
		if judged || time.Now().After(staleBy) {
			break
		}
	}
	wantText("pipelines", "table.pipelines", "succeeded", "manual")
	wantText("pipelines", `tr[data-pipeline="sales"] [data-watch="bronze.sales_transactions"]`, "fresh", "last data change v", "within 26h")
	wantText("pipelines", `tr[data-pipeline="sales"] [data-watch="deadline"]`, "deadline 45m")
	wantText("pipelines", `tr[data-pipeline="big"] [data-watch="raw.big"]`, "stale", "no data written since the watch began")
	if n := eval("count stale tags", `document.querySelectorAll('tr[data-pipeline="big"] .tag.w-breached').length`); n != 1.0 {
		t.Errorf("big's stale table: %v red tags, want 1", n)
	}
	shot("01-pipelines-after-a-run.png")
	run("back to the run", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`svg.gantt`)))
	if g := eval("read the timeline", `document.querySelector('svg.gantt').textContent`); !strings.Contains(fmt.Sprint(g), "ingest_sales") {
		t.Errorf("run page timeline: %q, want the stages", g)
	}

	// 3. A table: its schema, properties and change feed readers against retention.
	run("open the table page", chromedp.Navigate(base+"/tables/bronze.sales_transactions"), chromedp.WaitVisible(chromedp.CSS(`table.schema`)))
	wantText("table", "main", "transaction_id", "decimal(10,2)", "delta.enableChangeDataFeed", "Change feed readers", "capture_sales_history", "safe")
	wantText("table", "#freshness", "fresh", "last data change v", "within 26h")
	shot("03-table.png")

	// 4. Its history: every version with the run that wrote it.
	run("open the history", chromedp.Click(chromedp.CSS(`nav.tabs a[href$="/history"]`)), chromedp.WaitVisible(chromedp.CSS(`table.history`)))
	wantText("history", "table.history", "v2", "v1", "CREATE TABLE", "MERGE", "sales / ingest_sales", "sales@")
	shot("04-history.png")

	// 5. The table as of version 1, filtered and ordered.
	run("open the rows as of v1", chromedp.Navigate(base+"/tables/bronze.sales_transactions/rows?version=1&order_by=amount&desc=1"),
		chromedp.WaitVisible(chromedp.CSS(`#asof`)))
	wantText("rows", "#asof", "v1", "4 rows")
	wantText("rows", "table.data", "T-1002", "149.00", "grinder")
	run("filter the rows", chromedp.SetValue(chromedp.CSS(`input[name="where"]`), "customer_id = 'C-1'"),
		chromedp.Click(chromedp.CSS(`form.query button`)))
	waitRows := func(part string) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if u, err := chromedp.Run(ctx, chromedp.Location()); err == nil && strings.Contains(u, part) {
				run("wait for the page", chromedp.WaitVisible(chromedp.CSS(`#asof`)))
				return
			}
		}
		t.Fatalf("the page never went to a URL with %q", part)
	}
	waitRows("where=")
	wantText("rows", "#asof", "2 rows")
	wantText("rows", "table.data", "T-1001", "T-1003")
	shot("05-rows.png")

	// 6. The change feed: T-1002 corrected from 149.00 to 129.00, rows coloured by type.
	run("open the change feed", chromedp.Navigate(base+"/tables/bronze.sales_transactions/changes?from=0"), chromedp.WaitVisible(chromedp.CSS(`table.counts`)))
	wantText("changes", "table.changes", "update_preimage", "update_postimage", "129.00", "149.00")
	if coloured := eval("count coloured rows", `document.querySelectorAll('table.changes tr.ct-update-postimage').length`); coloured == 0.0 {
		t.Error("change feed: no row coloured as an update")
	}
	shot("06-changes.png")

	// 7. The diff of the last two versions, and the runs grid.
	run("open the diff", chromedp.Navigate(base+"/tables/sales.customer/diff"), chromedp.WaitVisible(chromedp.CSS(`#diffsum`)))
	wantText("diff", "#diffsum", "added", "changed")
	shot("07-diff.png")
	run("open the runs grid", chromedp.Navigate(base+"/pipelines/sales"), chromedp.WaitVisible(chromedp.CSS(`table.grid`)))
	wantText("grid", "table.grid", "manual", "succeeded")
	shot("08-pipeline.png")

	// The confirmations of Cancel, Roll back and Run slots are accepted, as a person would.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	waitStatus := func(want string) {
		t.Helper()
		got := ""
		for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			got = fmt.Sprint(eval("read the run's status", `((document.getElementById('run-status') || {}).dataset || {}).status || ''`))
			if got == want {
				return
			}
		}
		t.Fatalf("run status %q, want %q", got, want)
	}

	// 8. Roll the run back: its plan first, then the confirmation; the run then shows it.
	run("open the run", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`a[href$="/rollback"]`)))
	run("ask for a rollback", chromedp.Click(chromedp.CSS(`a[href$="/rollback"]`)), chromedp.WaitVisible(chromedp.CSS(`table.plan`)))
	wantText("rollback plan", "main", "bronze.sales_transactions", "restored to v0", "audit.sales_transactions_history", "kept",
		"capture_sales_history", "records the reversal", "I read the plan")
	shot("09-rollback-plan.png")
	run("confirm the rollback", chromedp.Click(chromedp.CSS(`input[name="confirm"]`)), chromedp.Click(chromedp.CSS(`form.confirm button.danger`)))
	waitURLFunc := func(what string, ok func(u string) bool) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if u, err := chromedp.Run(ctx, chromedp.Location()); err == nil && ok(u) {
				return
			}
		}
		t.Fatalf("the page never went to %s", what)
	}
	waitURL := func(part string) {
		t.Helper()
		waitURLFunc("a URL with "+part, func(u string) bool { return strings.Contains(u, part) })
	}
	waitURLFunc("the rollback's run", func(u string) bool {
		return strings.Contains(u, "/runs/sales@") && !strings.HasSuffix(u, "/rollback") && u != url
	})
	waitStatus("succeeded")
	wantText("rollback run", "main", "rollback of", "restore bronze.sales_transactions", "net changes")
	shot("10-rollback-run.png")
	run("back to the rolled back run", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`#run-status`)))
	wantText("rolled back run", "#run-status", "rolled back")
	shot("11-rolled-back.png")

	// 9. The runs of every pipeline, filtered.
	run("open the runs page", chromedp.Navigate(base+"/runs"), chromedp.WaitVisible(chromedp.CSS(`table.runs`)))
	wantText("runs", "table.runs", "sales@", "manual", "rollback", "rolled back")
	shot("12-runs.png")
	run("filter by trigger", chromedp.SetValue(chromedp.CSS(`select[name="trigger"]`), "rollback"), chromedp.Click(chromedp.CSS(`form.filters button`)))
	waitURL("trigger=rollback")
	run("wait for the filtered list", chromedp.WaitVisible(chromedp.CSS(`table.runs`)))
	if n := eval("count the rows", `document.querySelectorAll('table.runs tbody tr').length`); n != 1.0 {
		t.Errorf("runs with trigger rollback: %v rows, want 1", n)
	}
	shot("12-runs-filtered.png")
	run("filter by a time range without runs", chromedp.Navigate(base+"/runs?from=2001-01-01&to=2001-01-02"), chromedp.WaitVisible(chromedp.CSS(`p.empty`)))
	wantText("runs", "p.empty", "No run matches the filter")

	// 10. Pause the schedule, see it everywhere, resume it.
	run("open the pipeline", chromedp.Navigate(base+"/pipelines/sales"), chromedp.WaitVisible(chromedp.CSS(`form.pause`)))
	run("pause it", chromedp.SetValue(chromedp.CSS(`form.pause input[name="reason"]`), "source system migration"),
		chromedp.Click(chromedp.CSS(`form.pause button`)), chromedp.WaitVisible(chromedp.CSS(`p.paused`)))
	wantText("paused pipeline", "p.paused", "paused by web@127.0.0.1", "source system migration")
	shot("13-paused.png")
	run("see it on the pipelines page", chromedp.Navigate(base+"/pipelines"), chromedp.WaitVisible(chromedp.CSS(`.tag.paused`)))
	run("resume it", chromedp.Navigate(base+"/pipelines/sales"), chromedp.Click(chromedp.CSS(`form[action$="/resume"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`form.pause`)))

	// 11. A backfill lists its slots first, then runs them.
	run("open the backfill", chromedp.Click(chromedp.CSS(`a[href$="/backfill"]`)), chromedp.WaitVisible(chromedp.CSS(`input[name="from"]`)))
	day := time.Now().UTC().AddDate(0, 0, -3).Format("2006-01-02")
	day2 := time.Now().UTC().AddDate(0, 0, -2).Format("2006-01-02")
	run("list the slots", chromedp.SetValue(chromedp.CSS(`input[name="from"]`), day), chromedp.SetValue(chromedp.CSS(`input[name="to"]`), day2),
		chromedp.Click(chromedp.CSS(`form.filters button`)), chromedp.WaitVisible(chromedp.CSS(`table.slots`)))
	wantText("backfill", "main", "2 slots, 2 to run", "Run 2 slots")
	shot("14-backfill.png")
	run("run them", chromedp.Click(chromedp.CSS(`form.confirm button`)))
	waitURL("trigger=backfill")
	run("see them", chromedp.WaitVisible(chromedp.CSS(`table.runs`)))
	if n := eval("count the backfill runs", `document.querySelectorAll('table.runs tbody tr').length`); n != 2.0 {
		t.Errorf("backfill runs listed: %v, want 2", n)
	}

	// 12. A long run's progress moves on its page without a reload; cancelled, it shows
	// as cancelled, not as an error.
	run("start the long run", chromedp.Navigate(base+"/pipelines/big"), chromedp.Click(chromedp.CSS(`button[data-run-now="big"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status`)))
	eval("mark the page", `window.__sameDocument = true`)
	seen := map[string]bool{}
	for end := time.Now().Add(90 * time.Second); time.Now().Before(end) && len(seen) < 3; time.Sleep(150 * time.Millisecond) {
		if p := fmt.Sprint(eval("read the progress", `(document.querySelector('#detail-load .progress') || {}).innerText || ''`)); p != "" {
			if !seen[p] && len(seen) == 1 {
				shot("15-progress.png")
			}
			seen[p] = true
		}
	}
	if len(seen) < 2 {
		t.Errorf("the long run's progress: %v; want it to change on the page", seen)
	}
	if same := eval("check the page was not reloaded", `window.__sameDocument === true`); same != true {
		t.Error("the run page reloaded to show progress; want it updated in place")
	}
	run("cancel it", chromedp.Click(chromedp.CSS(`button.danger`)))
	waitStatus("cancelled")
	run("wait for the stage to end", chromedp.WaitVisible(chromedp.CSS(`#stage-load .badge.st-cancelled`)))
	if n := eval("count errors", `document.querySelectorAll('tr.detail .error, p.error').length`); n != 0.0 {
		t.Errorf("a cancelled run shows %v error boxes, want none", n)
	}
	if n := eval("count red bars", `document.querySelectorAll('svg.gantt rect.st-failed').length`); n != 0.0 {
		t.Errorf("a cancelled run's timeline has %v failed bars, want none", n)
	}
	wantText("cancelled run", "#stage-load", "cancelled")
	wantText("cancelled run", "#detail-load", "cancelled by web@127.0.0.1")
	shot("16-cancelled.png")
	t.Logf("screenshots in %s", b.shots)
	srv.term(t)
}

// writeBigPipeline writes the pipeline "big" into dir: ten CSV files of 200,000 rows
// loaded by key under a 16 MiB memory budget.
func writeBigPipeline(t *testing.T, dir string) {
	t.Helper()
	for f := range 10 {
		var b strings.Builder
		b.WriteString("id,name,city\n")
		for i := range 200_000 {
			fmt.Fprintf(&b, "k%02d%07d,name %d,city %d\n", f, i, i, i%97)
		}
		if err := os.MkdirAll(filepath.Join(dir, "big"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "big", fmt.Sprintf("%02d.csv", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yaml := `pipeline: big
description: Two million rows by key, under a small memory budget.
tables:
  raw.big:
    freshness: 2s
    columns: [{name: id, type: string}, {name: name, type: string}, {name: city, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: load, kind: ingest, source: big/*.csv, target: raw.big, mode: upsert, keys: [id], memory_budget: 16MiB}
`
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}

func clipText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		return s[:300] + fmt.Sprintf("… (%d chars)", len(s))
	}
	return s
}
