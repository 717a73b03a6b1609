package jobs

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// inferredTables are the customer tables with the dimension's placeholder flag, and a
// fact_load of the sales' change feed.
func inferredTables(t *testing.T) (staging, dim *Table, merge *SCD2Merge, load *FactLoad) {
	return inferredTablesOf(t, true)
}

// inferredTablesOf is inferredTables with the fact_load's source_changes.
func inferredTablesOf(t *testing.T, changes bool) (staging, dim *Table, merge *SCD2Merge, load *FactLoad) {
	staging, dim = customerTables(t)
	dim.Schema.Fields = append(dim.Schema.Fields, schemaOf(t, "is_inferred boolean").Fields...)
	mc := scd2Config()
	mc.Columns.Inferred = "is_inferred"
	mc.FirstValidFrom = SCDTime{Text: "1900-01-01"}
	fc := factConfig(changes, MissingInferred)
	fc.Lookups[0].SetDimensionColumns(mc.Columns)
	fc.Lookups[0].SetDimensionFirstValidFrom(mc.FirstValidFrom)
	return staging, dim, NewSCD2Merge("customers", mc), NewFactLoad("sales", fc)
}

// dimensionRows renders the dimension: customer, city, valid_from's date, flag; sk
// maps each surrogate key to its customer and city ("inferred" for a placeholder).
func dimensionRows(t *testing.T, env *Env, dim *Table) (rows []string, sk map[string]string) {
	sk = map[string]string{}
	for _, r := range tableRows(t, env, dim, "customer_sk", "customer_id", "city", "valid_from", "is_inferred") {
		f := strings.Split(r, "|")
		city := f[2]
		if f[4] == "true" {
			city = "inferred"
		}
		sk[f[0]] = f[1] + "/" + city
		rows = append(rows, f[1]+"|"+f[2]+"|"+f[3][:10]+"|"+f[4])
	}
	slices.Sort(rows)
	return rows, sk
}

// A sale of a customer the dimension has not seen gets the key of a flagged placeholder
// version from first_valid_from; when the customer arrives, the merge fills that row in
// place (flag false, its key kept), so the sale keeps its key; a later version of the
// customer re-keys the sales after it. A second customer's placeholder is added by a
// run crashed at every store operation and rerun: exactly one placeholder, and every
// sale keyed as a clean run keys it.
func TestFactLoadInferredMembers(t *testing.T) {
	staging, dim, merge, load := inferredTables(t)
	raw, facts := salesTables(t)
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, staging, dim, raw, facts)
		appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
		runStage(t, merge, env)
		appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C2", 20, day(3)}, []any{"S3", "C2", 30, day(9)})
		runStage(t, load, env)
		return fs, env, facts
	}
	_, env, _ := setup()
	rows, sks := dimensionRows(t, env, dim)
	if want := []string{"C1|Seattle|1900-01-01|false", "C2|NULL|1900-01-01|true", "NULL|NULL|1900-01-01|false"}; !slices.Equal(rows, want) {
		t.Fatalf("dimension after the first load:\n%s", diff(rows, want))
	}
	placeholder := ""
	for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
		id, sk, _ := strings.Cut(r, "|")
		if want := map[string]string{"S1": "C1/Seattle", "S2": "C2/inferred", "S3": "C2/inferred"}[id]; sks[sk] != want {
			t.Fatalf("sale %s has key %s (%s), want %s", id, sk, sks[sk], want)
		}
		if id == "S2" {
			placeholder = sk
		}
	}
	// C2 arrives: lives in Boston from day 2, moves to Austin on day 7.
	appendRows(t, env, staging, []any{"C2", "Grace", "Boston", day(2)}, []any{"C2", "Grace", "Austin", day(7)})
	runStage(t, merge, env)
	rows, sks = dimensionRows(t, env, dim)
	if want := []string{"C1|Seattle|1900-01-01|false", "C2|Austin|2026-01-07|false", "C2|Boston|1900-01-01|false", "NULL|NULL|1900-01-01|false"}; !slices.Equal(rows, want) {
		t.Fatalf("dimension after C2 arrived:\n%s", diff(rows, want))
	}
	if sks[placeholder] != "C2/Boston" {
		t.Fatalf("the placeholder's key %s is %q now, want C2's first version (Boston)", placeholder, sks[placeholder])
	}
	res := runStage(t, load, env)
	for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
		id, sk, _ := strings.Cut(r, "|")
		want := map[string]string{"S1": "C1/Seattle", "S2": "C2/Boston", "S3": "C2/Austin"}[id]
		if sks[sk] != want || id == "S2" && sk != placeholder {
			t.Fatalf("after the fill, sale %s has key %s (%s), want %s (S2 keeping %s)", id, sk, sks[sk], want, placeholder)
		}
	}
	if res.RowsWritten != 1 {
		t.Fatalf("the re-keying run wrote %d facts, want 1 (S3 moved to Austin; S2 kept its key)", res.RowsWritten)
	}

	// A run that adds a placeholder, crashed at every store operation and rerun.
	crashSetup := func() (*faultstore.Store, *Env, *Table) {
		fs, env, facts := setup()
		appendRows(t, env, raw, []any{"S4", "C3", 40, day(8)}, []any{"S5", "C1", 50, day(8)})
		return fs, env, facts
	}
	observe := func(env *Env, tbl *Table) []string {
		out, sks := dimensionRows(t, env, dim)
		for _, r := range tableRows(t, env, tbl, "sale_id", "customer_sk") {
			id, sk, _ := strings.Cut(r, "|")
			out = append(out, id+"|"+sks[sk])
		}
		return out
	}
	want := crashAtEveryOperation(t, load, crashSetup, observe)
	if w := []string{"C1|Seattle|1900-01-01|false", "C2|NULL|1900-01-01|true", "C3|NULL|1900-01-01|true", "NULL|NULL|1900-01-01|false",
		"S1|C1/Seattle", "S2|C2/inferred", "S3|C2/inferred", "S4|C3/inferred", "S5|C1/Seattle"}; !slices.Equal(want, w) {
		t.Fatalf("clean run:\n%s", diff(want, w))
	}
}

// A snapshot source changed in place, read through its change feed: a fact updated to a
// customer the dimension has not seen gets that customer's placeholder; a fact added
// and deleted again within the feed needs none.
func TestFactLoadInferredFromSnapshotFeed(t *testing.T) {
	staging, dim, merge, load := inferredTablesOf(t, false)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	ctx := t.Context()
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, merge, env)
	appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)})
	runStage(t, load, env)
	src, _ := latest(t, env, raw)
	if _, err := src.Update(ctx, delta.UpdateOptions{Where: expr.Eq("sale_id", "S2"), Set: map[string]any{"customer_id": "C2"}}); err != nil {
		t.Fatal(err)
	}
	appendRows(t, env, raw, []any{"S3", "C3", 30, day(7)})
	if _, err := src.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("sale_id", "S3")}); err != nil {
		t.Fatal(err)
	}
	res := runStage(t, load, env)
	if !noted(res, "read its change feed") {
		t.Errorf("notes %q: want the source's change feed read", res.Notes)
	}
	rows, sks := dimensionRows(t, env, dim)
	if want := []string{"C1|Seattle|1900-01-01|false", "C2|NULL|1900-01-01|true", "NULL|NULL|1900-01-01|false"}; !slices.Equal(rows, want) {
		t.Fatalf("dimension after the feed's load (a placeholder of C2, none of C3):\n%s", diff(rows, want))
	}
	got := map[string]string{}
	for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
		id, sk, _ := strings.Cut(r, "|")
		got[id] = sks[sk]
	}
	if want := map[string]string{"S1": "C1/Seattle", "S2": "C2/inferred"}; !maps.Equal(got, want) {
		t.Fatalf("facts %v, want %v", got, want)
	}
}
