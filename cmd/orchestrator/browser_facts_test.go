package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserFacts: the sales-facts example after its two runs (the first, then the
// late customer events), as a person sees it in a real Chromium: the fact table's
// history shows, on each fact_load version, how many facts of that run got a real,
// unknown (or inferred) key per lookup, linking the dimension; the dimension's rows show
// the "Unknown" member row the stage added, once. Screenshots 30-31.
func TestBrowserFacts(t *testing.T) {
	chromium := findChromium(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "examples", "pipelines", "sales-facts"), dir)
	env := []string{"ORCH_WAREHOUSE="}
	orch := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, commandEnv(env)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("orchestrator %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	orch("run", "pipeline.yaml")
	late, err := os.ReadFile(filepath.Join(dir, "late", "2026-02-01.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "landing", "customers", "2026-02-01.csv"), late, 0o644); err != nil {
		t.Fatal(err)
	}
	orch("run", "pipeline.yaml")
	if err := os.RemoveAll(filepath.Join(dir, "late")); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, bin, dir, env)
	base := "http://" + srv.addr
	b := newBrowser(t, chromium, 2*time.Minute)
	ctx, run, shot, text, wantText := b.ctx, b.run, b.shot, b.text, b.wantText

	// 1. The fact table's history: per fact_load version, the counts per lookup.
	run("open the fact table's history", chromedp.Navigate(base+"/tables/sales.sales/history"), chromedp.WaitVisible(chromedp.CSS(`table.history`)))
	// Newest first: the re-keying run changed the keys of 3 facts, all to real
	// versions (C-1's two sales of the Tacoma days, and Grace's sale, no longer
	// unknown); the first keyed 4 to a version and Grace's sale to the unknown member.
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('table.history .lookup')).map(e => e.textContent.trim()).join(' | ')`)); err != nil ||
		got != "customer_sk: 3 real · 0 unknown | customer_sk: 4 real · 1 unknown" {
		t.Errorf("lookup lines %q (%v), want the counts of the two fact_load runs", got, err)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelectorAll('table.history .lookup[data-lookup="customer_sk"] a[href="/tables/sales.customer"]').length`)); err != nil || n != 2 {
		t.Errorf("lookup lines linking the dimension: %v (%v), want one per fact_load version (2)", n, err)
	}
	shot("30-fact-history-lookups.png")

	// 2. The dimension's rows: the unknown member row, once, NULL key, since 1900.
	run("open the dimension's rows", chromedp.Navigate(base+"/tables/sales.customer/rows?where=customer_sk+%3D+-1"), chromedp.WaitVisible(chromedp.CSS(`table.data`)))
	wantText("dimension rows", "table.data", "-1", "1900-01-01", "9999-12-31", "true")
	if got := text("table.data tbody"); strings.Count(got, "1900-01-01") != 1 {
		t.Errorf("unknown member rows: %s; want one", clipText(got))
	}
	shot("31-dimension-unknown-member.png")

	// 3. The dimension's page names the fact load among its writers (it added the
	// unknown member) and among its change feed's readers (re-keying reads it).
	run("open the dimension", chromedp.Navigate(base+"/tables/sales.customer"), chromedp.WaitVisible(chromedp.CSS(`table.consumers`)))
	if got := text("main"); !strings.Contains(got, "Written by stages customer_history, sales_facts.") {
		t.Errorf("dimension page: %s; want it written by customer_history and sales_facts", clipText(got))
	}
	wantText("the dimension's feed readers", "table.consumers", "sales_facts", "fact_load", "sales.sales", "safe")
	shot("32-dimension-readers.png")
	t.Logf("screenshots in %s", b.shots)
	srv.term(t)
}

// TestBrowserInferredMembers: the sales-facts example with missing: inferred (its
// dimension flags placeholders in is_inferred and starts first versions at 1900-01-01),
// as a person sees it. After the first run, Grace's sale (C-2, before the CRM knows her)
// is keyed to an inferred member, which the dimension's page lists and the fact table's
// history counts; after the late file brings her record, the list is empty (the merge
// filled the placeholder in place) and her sale still has that key. Screenshots 32-33.
func TestBrowserInferredMembers(t *testing.T) {
	chromium := findChromium(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "examples", "pipelines", "sales-facts"), dir)
	path := filepath.Join(dir, "pipeline.yaml")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	yaml := string(text)
	for _, r := range [][2]string{
		{"      - {name: is_current, type: boolean}\n", "      - {name: is_current, type: boolean}\n      - {name: is_inferred, type: boolean}\n"},
		{"    columns: {surrogate_key: customer_sk}\n", "    columns: {surrogate_key: customer_sk, inferred: is_inferred}\n    first_valid_from: 1900-01-01\n"},
		{"        missing: unknown\n", "        missing: inferred\n"},
	} {
		if !strings.Contains(yaml, r[0]) {
			t.Fatalf("%q not in the example", r[0])
		}
		yaml = strings.Replace(yaml, r[0], r[1], 1)
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	late, err := os.ReadFile(filepath.Join(dir, "late", "2026-02-01.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "late")); err != nil {
		t.Fatal(err)
	}
	env := []string{"ORCH_WAREHOUSE="}
	orch := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, commandEnv(env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("orchestrator %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	orch("run", "pipeline.yaml")
	b := newBrowser(t, chromium, 2*time.Minute)
	ctx, run, shot, text2, wantText := b.ctx, b.run, b.shot, b.text, b.wantText
	lookups := func() string {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('table.history .lookup')).map(e => e.textContent.trim()).join(' | ')`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	sk := func() string {
		out := orch("table", "show", "--pipeline", "pipeline.yaml", "sales.sales", "--where", "sale_id = 'T-5'", "--columns", "customer_sk")
		return strings.TrimSpace(out)
	}

	srv := startServe(t, bin, dir, env)
	base := "http://" + srv.addr
	run("open the dimension", chromedp.Navigate(base+"/tables/sales.customer"), chromedp.WaitVisible(chromedp.CSS(`table.inferred`)))
	wantText("inferred members", "table.inferred", "customer_id", "C-2")
	if got := text2("table.inferred tbody"); strings.Count(got, "C-") != 1 {
		t.Errorf("inferred members %q, want C-2 alone", clipText(got))
	}
	shot("32-dimension-inferred-members.png")
	run("open the fact table's history", chromedp.Navigate(base+"/tables/sales.sales/history"), chromedp.WaitVisible(chromedp.CSS(`table.history`)))
	if got := lookups(); got != "customer_sk: 4 real · 0 unknown · 1 inferred" {
		t.Errorf("lookup lines %q, want Grace's sale keyed to an inferred member", got)
	}
	srv.term(t)
	before := sk()

	if err := os.WriteFile(filepath.Join(dir, "landing", "customers", "2026-02-01.csv"), late, 0o644); err != nil {
		t.Fatal(err)
	}
	orch("run", "pipeline.yaml")
	if after := sk(); after != before {
		t.Errorf("Grace's sale: %s after her record arrived, %s before; want the placeholder's key kept", after, before)
	}
	srv = startServe(t, bin, dir, env)
	base = "http://" + srv.addr
	run("open the dimension again", chromedp.Navigate(base+"/tables/sales.customer"), chromedp.WaitVisible(chromedp.CSS(`main`)))
	wantText("no inferred member left", "main", "Inferred members", "None waiting")
	shot("33-dimension-inferred-filled.png")
	run("open the fact table's history again", chromedp.Navigate(base+"/tables/sales.sales/history"), chromedp.WaitVisible(chromedp.CSS(`table.history`)))
	if got := lookups(); got != "customer_sk: 2 real · 0 unknown | customer_sk: 4 real · 0 unknown · 1 inferred" {
		t.Errorf("lookup lines %q, want the re-keying run's two Tacoma-day sales, Grace's kept", got)
	}
	t.Logf("screenshots in %s", b.shots)
	srv.term(t)
}
