package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserSchema: a table whose schema evolved (a column renamed and two widened,
// one added and then dropped by table alter) as a person sees it in a real Chromium:
// the schema tab's timeline names each change and who made it, a version picked on it
// shows that version's columns; the rows of an old version say how the schema changed
// since; the change feed is split where the schema changed, each part in its own
// columns; the diff pairs the renamed column with itself. Screenshots 20-24.
func TestBrowserSchema(t *testing.T) {
	chromium := findChromium(t)
	bin := buildBinary(t)
	s := evolvedShop(t)
	srv := startServe(t, bin, s.dir, nil)
	base := "http://" + srv.addr
	b := newBrowser(t, chromium, 2*time.Minute)
	ctx, run, shot, text, wantText := b.ctx, b.run, b.shot, b.text, b.wantText

	// 1. The schema tab: the latest columns and the timeline of every change.
	run("open the table", chromedp.Navigate(base+"/tables/shop.orders"), chromedp.WaitVisible(chromedp.CSS(`nav.tabs a[href$="/schema"]`)))
	run("open the schema tab", chromedp.Click(chromedp.CSS(`nav.tabs a[href$="/schema"]`)), chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)))
	wantText("schema", "ol.timeline", "v0", "Created with order_id, customer, qty, amount",
		"renamed customer to customer_name", "widened qty from integer to long", "widened amount from decimal(10,2) to decimal(14,2)",
		"added channel (string)", "dropped channel", "shop / ingest_orders, run shop@", "outside a run (a command such as table alter)")
	wantText("schema", "table.versioned", "customer_name", "integer to long", "col-")
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelectorAll('ol.timeline li').length`)); err != nil || n != 4 {
		t.Errorf("timeline entries: %v (%v), want 4: created, evolved, channel added, channel dropped", n, err)
	}
	shot("20-schema.png")

	// 2. Pick version 0 on the timeline: its own columns.
	run("pick v0", chromedp.Click(chromedp.CSS(`ol.timeline li[data-version="0"] .when a`)), chromedp.WaitVisible(chromedp.CSS(`ol.timeline li.on[data-version="0"]`)))
	wantText("schema v0", "#schemaof", "Columns at v0")
	wantText("schema v0", "table.versioned", "customer", "integer", "decimal(10,2)")
	if got := text("table.versioned"); strings.Contains(got, "customer_name") || strings.Contains(got, "channel") {
		t.Errorf("v0's columns show a later column: %s", clipText(got))
	}
	shot("21-schema-v0.png")

	// 3. The rows of version 1, in its own schema, saying what changed since.
	run("open the rows of v1", chromedp.Navigate(base+"/tables/shop.orders/rows?version=1"), chromedp.WaitVisible(chromedp.CSS(`#ownschema`)))
	wantText("rows v1", "table.data", "customer", "ann", "1.50")
	wantText("rows v1", "#ownschema", "own schema", "renamed customer to customer_name", "widened qty from integer to long")
	shot("22-rows-own-schema.png")

	// 4. The change feed from the start: one part per schema.
	run("open the change feed", chromedp.Navigate(base+"/tables/shop.orders/changes?from=0"), chromedp.WaitVisible(chromedp.CSS(`h3.part`)))
	wantText("changes", "main", "each part below shows its versions' rows in their own schema", "schema changed at v2 (CHANGE COLUMNS)",
		"renamed customer to customer_name", "dropped channel")
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelectorAll('table.changes').length`)); err != nil || n < 3 {
		t.Errorf("change feed tables: %v (%v), want one per schema with rows (at least 3)", n, err)
	}
	first := text("table.changes thead")
	if !strings.Contains(first, "customer") || strings.Contains(first, "customer_name") {
		t.Errorf("the first part's columns %q: want v0's customer", first)
	}
	shot("23-changes-parts.png")

	// 5. The diff of v1 and the latest: customer is customer_name, not a dropped column.
	run("open the diff", chromedp.Navigate(base+"/tables/shop.orders/diff?from=1&key=order_id"), chromedp.WaitVisible(chromedp.CSS(`#diffsum`)))
	wantText("diff", "#diffsum", "customer renamed to customer_name", "added", "changed")
	if got := text("#diffsum"); strings.Contains(got, "dropped columns customer") {
		t.Errorf("diff: %s; want customer paired with customer_name", clipText(got))
	}
	shot("24-diff-renamed.png")
	t.Logf("screenshots in %s", b.shots)
	srv.term(t)
}

// evolvedShop is the shop pipeline after TestTableSchemaAndAlter's evolution: a column
// renamed and two widened, channel added and then dropped with table alter, and a row
// updated after each step.
func evolvedShop(t *testing.T) *shop {
	t.Helper()
	s := newShop(t)
	s.declare("{name: order_id, type: string, nullable: false}", "{name: customer, type: string}", "{name: qty, type: int}", "{name: amount, type: \"decimal(10,2)\"}")
	s.land("1.csv", "order_id,customer,qty,amount\nA,ann,1,1.50\nB,bob,2,20.00\n")
	s.run()
	s.declare("{name: order_id, type: string, nullable: false}", "{name: customer_name, type: string, renamed_from: customer}", "{name: qty, type: bigint}", "{name: amount, type: \"decimal(14,2)\"}")
	s.land("2.csv", "order_id,customer_name,qty,amount\nB,bob,3000000000,123456789.99\n")
	s.run()
	s.declare("{name: order_id, type: string, nullable: false}", "{name: customer_name, type: string}", "{name: qty, type: bigint}", "{name: amount, type: \"decimal(14,2)\"}", "{name: channel, type: string}")
	s.land("3.csv", "order_id,customer_name,qty,amount,channel\nC,cy,4,4.00,web\n")
	s.run()
	s.declare("{name: order_id, type: string, nullable: false}", "{name: customer_name, type: string}", "{name: qty, type: bigint}", "{name: amount, type: \"decimal(14,2)\"}")
	s.cli(0, "table", "alter", "--drop-column", "channel")
	s.land("4.csv", "order_id,customer_name,qty,amount\nA,ann,5,1.50\n")
	s.run()
	return s
}
