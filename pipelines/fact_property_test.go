package pipelines

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

const factPipeline = `pipeline: facts
tables:
  bronze.customer_events:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: op, type: string}
      - {name: event_ts, type: timestamp}
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
  bronze.sales:
    columns:
      - {name: sale_id, type: string, nullable: false}
      - {name: customer_id, type: string}
      - {name: amount, type: bigint}
      - {name: sold_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties: {delta.enableChangeDataFeed: true}
  fact.sales:
    columns:
      - {name: sale_id, type: string, nullable: false}
      - {name: customer_id, type: string}
      - {name: amount, type: bigint}
      - {name: sold_at, type: timestamp}
      - {name: customer_sk, type: bigint}
stages:
  - name: load_customers
    kind: ingest
    source: landing/customers/*.csv
    target: bronze.customer_events
  - name: customers
    kind: scd2_merge
    depends_on: [load_customers]
    source: bronze.customer_events
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city]
    sequence_by: event_ts
    delete_when: "op = 'D'"
    deletes: close
    columns: {surrogate_key: customer_sk}
  - name: load_sales
    kind: ingest
    source: landing/sales/*.csv
    target: bronze.sales
  - name: sales
    kind: fact_load
    depends_on: [customers, load_sales]
    source: bronze.sales
    source_changes: true
    target: fact.sales
    keys: [sale_id]
    lookups:
      - dimension: dim.customer
        on: {customer_id: customer_id}
        at: sold_at
        key: customer_sk
`

// custEvent is one customer event of the property test: a city from ts on, or a delete.
type custEvent struct {
	id   string
	city string // "" for a delete
	ts   time.Time
}

type sale struct {
	id, customer string
	at           time.Time
}

// TestFactLoadProperty runs random customer event streams and sales, split into files
// at random and delivered over several runs in random order, through ingest,
// scd2_merge and fact_load; after every run each loaded sale must carry the key of the
// dimension version whose city is the city of its customer's latest event at or
// before the sale (the unknown member, -1, when there is none or it is a delete): the
// reference replays the events delivered so far, whatever their order. The sales are
// read from the bronze table's change feed, or from its snapshot; every other trial's
// fact table has deletion vectors on. With the dimension's open_end (null, a sentinel)
// and first_valid_from: 1900-01-01, a sale before its customer's first upsert gets that
// first version; with missing: inferred too, a sale of a customer with no upsert yet
// gets the customer's placeholder, whose key it keeps once the placeholder is filled.
func TestFactLoadProperty(t *testing.T) {
	trials := 12
	if testing.Short() {
		trials = 3
	}
	for _, changes := range []bool{true, false} {
		for trial := range trials {
			t.Run(fmt.Sprintf("source_changes=%v/%d", changes, trial), func(t *testing.T) { factProperty(t, testenv.PropertySeed(uint64(trial)), changes, factDimDefault) })
		}
	}
	for _, o := range []factDimOptions{
		{yaml: "    open_end: null\n    first_valid_from: 1900-01-01\n", memberTo: "NULL", firstConst: true},
		{yaml: "    open_end: 2999-12-31\n", memberTo: "2999-12-31T00:00:00Z"},
		{yaml: "    first_valid_from: 1900-01-01\n", memberTo: "9999-12-31T00:00:00Z", firstConst: true, inferred: true},
	} {
		n := max(2, trials/3)
		if o.inferred {
			n = 2 * trials // (a placeholder is filled in about one trial of three)
		}
		for trial := range n {
			name := strings.ReplaceAll(strings.TrimSpace(o.yaml), "\n    ", ",")
			if o.inferred {
				name += ",missing=inferred"
			}
			// (missing: inferred from the sales' snapshot too, every other trial)
			changes := !o.inferred || trial%2 == 0
			t.Run(fmt.Sprintf("%s,source_changes=%v/%d", name, changes, trial), func(t *testing.T) { factProperty(t, testenv.PropertySeed(uint64(trial)), changes, o) })
		}
	}
}

// factDimOptions are the dimension merge's options of a fact property run: yaml goes
// into its stage; the unknown member row ends at memberTo; with firstConst a key's
// first version starts at 1900-01-01; with inferred the lookup has missing: inferred
// (the dimension flags placeholders in is_inferred).
type factDimOptions struct {
	yaml, memberTo       string
	firstConst, inferred bool
}

var factDimDefault = factDimOptions{memberTo: "9999-12-31T00:00:00Z"}

func factProperty(t *testing.T, seed uint64, sourceChanges bool, opts factDimOptions) {
	rng := rand.New(rand.NewPCG(seed, 37))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cities := []string{"Seattle", "Portland", "Boston", "Austin"}
	var events []custEvent
	for c := range 4 {
		id := fmt.Sprintf("C%d", c)
		hours := rng.Perm(60)[:1+rng.IntN(5)] // distinct times per customer
		for _, h := range hours {
			e := custEvent{id: id, city: cities[rng.IntN(len(cities))], ts: base.Add(time.Duration(h) * time.Hour)}
			if rng.IntN(6) == 0 {
				e.city = ""
			}
			events = append(events, e)
		}
	}
	var sales []sale
	for i := range 8 + rng.IntN(10) {
		sales = append(sales, sale{id: fmt.Sprintf("S%02d", i), customer: fmt.Sprintf("C%d", rng.IntN(5)), at: base.Add(time.Duration(rng.IntN(62)) * time.Hour)})
	}
	// Files: random splits in random order, delivered over random runs.
	type file struct {
		dir, name, body string
		custs           []custEvent
		sales           []sale
	}
	var files []file
	for i, part := range splitRandom(rng, len(events)) {
		var b strings.Builder
		b.WriteString("customer_id,city,op,event_ts\n")
		var evs []custEvent
		for _, j := range part {
			e := events[j]
			op := "U"
			if e.city == "" {
				op = "D"
			}
			fmt.Fprintf(&b, "%s,%s,%s,%s\n", e.id, e.city, op, e.ts.Format(time.RFC3339))
			evs = append(evs, e)
		}
		files = append(files, file{dir: "customers", name: fmt.Sprintf("c%03d.csv", i), body: b.String(), custs: evs})
	}
	for i, part := range splitRandom(rng, len(sales)) {
		var b strings.Builder
		b.WriteString("sale_id,customer_id,amount,sold_at\n")
		var ss []sale
		for _, j := range part {
			s := sales[j]
			fmt.Fprintf(&b, "%s,%s,%d,%s\n", s.id, s.customer, 10+j, s.at.Format(time.RFC3339))
			ss = append(ss, s)
		}
		files = append(files, file{dir: "sales", name: fmt.Sprintf("s%03d.csv", i), body: b.String(), sales: ss})
	}
	rng.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })

	dir := t.TempDir()
	for _, d := range []string{"customers", "sales"} {
		if err := os.MkdirAll(filepath.Join(dir, "landing", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "pipeline.yaml")
	text := factPipeline
	if !sourceChanges { // the sales table's snapshot: every fact, each run
		i := strings.LastIndex(text, "    source_changes: true\n")
		text = text[:i] + text[i+len("    source_changes: true\n"):]
		if seed%4 >= 2 { // without its change feed: a source changed in place is read whole
			feed := "      - {name: load_timestamp, type: timestamp}\n    properties: {delta.enableChangeDataFeed: true}\n  fact.sales:"
			if !strings.Contains(text, feed) {
				t.Fatal("the sales table's declaration was not found")
			}
			text = strings.Replace(text, feed, strings.Replace(feed, "    properties: {delta.enableChangeDataFeed: true}\n", "", 1), 1)
		}
	}
	if seed%2 == 1 { // a fact table with deletion vectors: re-keying marks rows, not files
		end := "      - {name: customer_sk, type: bigint}\nstages:"
		text = strings.Replace(text, end, strings.Replace(end, "\nstages:", "\n    properties: {delta.enableDeletionVectors: true}\nstages:", 1), 1)
		if !strings.Contains(text, "enableDeletionVectors") {
			t.Fatal("the fact table's declaration was not found")
		}
	}
	text = strings.Replace(text, "    columns: {surrogate_key: customer_sk}\n", "    columns: {surrogate_key: customer_sk}\n"+opts.yaml, 1)
	if opts.inferred {
		for _, r := range [][2]string{
			{"      - {name: is_current, type: boolean}\n    properties: {delta.enableChangeDataFeed: true}\n  bronze.sales:", "      - {name: is_current, type: boolean}\n      - {name: is_inferred, type: boolean}\n    properties: {delta.enableChangeDataFeed: true}\n  bronze.sales:"},
			{"    columns: {surrogate_key: customer_sk}\n", "    columns: {surrogate_key: customer_sk, inferred: is_inferred}\n"},
			{"        key: customer_sk\n", "        key: customer_sk\n        missing: inferred\n"},
		} {
			if !strings.Contains(text, r[0]) {
				t.Fatalf("%q not found in the pipeline", r[0])
			}
			text = strings.Replace(text, r[0], r[1], 1)
		}
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wh := t.TempDir()
	warehouse, err := fs.New(fs.Config{Dir: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer warehouse.Close()
	open := func(ctx context.Context, loc string) (objectstore.Store, string, error) {
		st, err := fs.New(fs.Config{Dir: loc})
		return st, "", err
	}
	var delivered []custEvent
	var loaded []sale
	placeholderOf := map[string]string{} // sale -> the placeholder key it had
	for run := 0; len(files) > 0; run++ {
		n := 1 + rng.IntN(min(3, len(files)))
		ingested := len(loaded) // the sales in bronze.sales before this run
		for _, f := range files[:n] {
			if err := os.WriteFile(filepath.Join(dir, "landing", f.dir, f.name), []byte(f.body), 0o644); err != nil {
				t.Fatal(err)
			}
			delivered = append(delivered, f.custs...)
			loaded = append(loaded, f.sales...)
		}
		files = files[n:]
		if !sourceChanges && ingested > 0 && rng.IntN(3) == 0 {
			// The sales table changed in place (one sale's file written anew: the sale's
			// amount, which the reference does not read, changed, or the sale deleted):
			// the next load reads the source's change feed since the last load (or, the
			// feed off, its whole snapshot), where one of a table that was only appended
			// to reads just the files added.
			ctx, p := context.Background(), spec.Table("bronze.sales").Path
			tbl, err := delta.Open(ctx, warehouse, p, delta.Options{})
			if err == nil && rng.IntN(2) == 0 {
				_, err = tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("sale_id", loaded[0].id), Set: map[string]any{"amount": int64(0)}})
			} else if err == nil {
				_, err = tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("sale_id", loaded[0].id)})
				loaded = loaded[1:]
			}
			if err != nil {
				t.Fatalf("change bronze.sales: %v", err)
			}
		}
		g, err := LocalGraph(spec, LocalRuntime{Warehouse: warehouse, OpenLocation: open, Delta: delta.Options{UserName: "test"}, RunID: fmt.Sprint("run-", run)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dag.Run(context.Background(), g, dag.Options{}); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		checkFacts(t, run, warehouse, spec, delivered, loaded, opts, placeholderOf)
	}
}

// checkFacts compares the fact table with the reference: per loaded sale, the city of
// its customer at its time among the delivered events.
//
// With missing: inferred, a sale of a customer without any upsert delivered carries the
// key of the customer's placeholder (one current row, flagged, from 1900-01-01, NULL
// city); once the customer's first upsert arrives, the placeholder row is that first
// version: a sale that had the placeholder's key and falls in the first version keeps
// the key (placeholderOf remembers them across runs).
func checkFacts(t *testing.T, run int, wh objectstore.Store, spec *Spec, events []custEvent, sales []sale, opts factDimOptions, placeholderOf map[string]string) {
	t.Helper()
	cols := []string{"customer_sk", "customer_id", "city", "valid_from", "valid_to", "is_current"}
	if opts.inferred {
		cols = append(cols, "is_inferred")
	}
	dimRows := scanTable(t, wh, spec.Table("dim.customer").Path, cols...)
	// The unknown member row: once, key -1, NULL key and city, valid over all time, current.
	owner := map[string][2]string{}
	from := map[string]string{}
	var members []string
	placeholders := map[string]int{}
	for _, r := range dimRows {
		owner[r[0]] = [2]string{r[1], r[2]}
		from[r[0]] = r[3]
		if opts.inferred && r[6] == "true" && r[1] != "NULL" {
			placeholders[r[1]]++
			owner[r[0]] = [2]string{r[1], "inferred"}
			if want := "NULL|1900-01-01T00:00:00Z|9999-12-31T00:00:00Z|true"; strings.Join(r[2:6], "|") != want {
				t.Fatalf("after run %d: placeholder row %v, want city, interval and is_current %s", run, r, want)
			}
		}
		if opts.inferred && r[6] == "NULL" {
			t.Fatalf("after run %d: dimension row %v has a NULL is_inferred", run, r)
		}
		if r[1] == "NULL" {
			members = append(members, strings.Join(r[:6], "|"))
		}
	}
	for c, n := range placeholders {
		if n > 1 {
			t.Fatalf("after run %d: customer %s has %d placeholders", run, c, n)
		}
	}
	if want := []string{"-1|NULL|NULL|1900-01-01T00:00:00Z|" + opts.memberTo + "|true"}; !slices.Equal(members, want) {
		t.Fatalf("after run %d: unknown member rows %q, want %q", run, members, want)
	}
	var want, got []string
	for _, s := range sales {
		city := "unknown"
		var latest time.Time
		upsertBefore := false
		var first *custEvent // the customer's first upsert
		for i, e := range events {
			if e.id == s.customer && e.city != "" && (first == nil || e.ts.Before(first.ts)) {
				first = &events[i]
			}
			if e.id == s.customer && !e.ts.After(s.at) && !e.ts.Before(latest) {
				latest, city = e.ts, e.city
				if city == "" {
					city = "unknown"
				}
			}
		}
		for _, e := range events {
			upsertBefore = upsertBefore || e.id == s.customer && e.city != "" && !e.ts.After(s.at)
		}
		if opts.firstConst && !upsertBefore && first != nil {
			city = first.city // the first version runs from 1900-01-01
		}
		if opts.inferred && first == nil {
			city = "inferred" // no upsert of the customer yet: its placeholder
		}
		if city != "unknown" {
			city = s.customer + "/" + city
		}
		want = append(want, s.id+"|"+city)
	}
	for _, r := range scanTable(t, wh, spec.Table("fact.sales").Path, "sale_id", "customer_sk") {
		if p, ok := placeholderOf[r[0]]; ok && owner[r[1]][0] != "NULL" && from[r[1]] == "1900-01-01T00:00:00Z" && r[1] != p {
			t.Fatalf("after run %d: sale %s had the placeholder key %s and is in its customer's first version now, but has key %s", run, r[0], p, r[1])
		}
		if o, ok := owner[r[1]]; ok && o[1] == "inferred" {
			placeholderOf[r[0]] = r[1]
		}
		o, ok := owner[r[1]]
		city := "no such version " + r[1]
		switch {
		case ok && o[0] == "NULL" && r[1] == "-1":
			city = "unknown"
		case ok:
			city = o[0] + "/" + o[1]
		}
		got = append(got, r[0]+"|"+city)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		var dim []string
		for _, r := range dimRows {
			dim = append(dim, strings.Join(r, "|"))
		}
		t.Fatalf("after run %d (events %v):\ngot  %v\nwant %v\ndimension:\n  %s", run, events, got, want, strings.Join(dim, "\n  "))
	}
}

// splitRandom splits the indexes 0..n-1, shuffled, into 1..4 random parts.
func splitRandom(rng *rand.Rand, n int) [][]int {
	idx := rng.Perm(n)
	parts := 1 + rng.IntN(min(4, max(n, 1)))
	out := make([][]int, parts)
	for i, j := range idx {
		p := i % parts
		if rng.IntN(3) == 0 {
			p = rng.IntN(parts)
		}
		out[p] = append(out[p], j)
	}
	return slices.DeleteFunc(out, func(p []int) bool { return len(p) == 0 })
}

// scanTable reads the named columns of the table at path, as strings ("NULL" for null).
func scanTable(t *testing.T, wh objectstore.Store, path string, cols ...string) [][]string {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.Open(ctx, wh, path, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out [][]string
	for sc.Next() {
		rec := sc.RecordBatch()
		for r := range int(rec.NumRows()) {
			row := make([]string, len(cols))
			for c := range cols {
				if rec.Column(c).IsNull(r) {
					row[c] = "NULL"
				} else {
					row[c] = rec.Column(c).ValueStr(r)
				}
			}
			out = append(out, row)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
