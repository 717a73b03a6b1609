package jobs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

func salesTables(t testing.TB) (raw, facts *Table) {
	raw = &Table{
		Name:       "staging.sales",
		Path:       "staging/sales",
		Schema:     schemaOf(t, "sale_id string", "customer_id string", "amount bigint", "sold_at timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
	facts = &Table{
		Name:       "sales.sales",
		Path:       "sales/sales",
		Schema:     schemaOf(t, "sale_id string", "customer_id string", "amount bigint", "sold_at timestamp", "customer_sk bigint"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
	return raw, facts
}

func factConfig(changes bool, missing string) *FactLoadConfig {
	return &FactLoadConfig{
		Source: "staging.sales", SourceChanges: changes, Target: "sales.sales", Keys: []string{"sale_id"},
		Lookups: []FactLookup{{Dimension: "sales.customer", On: map[string]string{"customer_id": "customer_id"}, At: "sold_at", Key: "customer_sk", Missing: missing}},
	}
}

// day returns a time on day n of January 2026.
func day(n int) time.Time { return time.Date(2026, 1, n, 12, 0, 0, 0, time.UTC) }

// The story: a customer moves; a sale arrives before its customer (the unknown member,
// then its real key once the customer arrives); a late event (the customer lived
// somewhere else for a while) splits a version and re-keys the sales in it, and only
// those.
func TestFactLoadKeysAsOfTime(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	merge := NewSCD2Merge("customers", scd2Config())
	load := NewFactLoad("sales", factConfig(true, ""))
	city := func(env *Env) map[string]string {
		out := map[string]string{}
		sks := map[string]string{}
		for _, r := range tableRows(t, env, dim, "customer_sk", "customer_id", "city") {
			sk, c, _ := strings.Cut(r, "|")
			if id, c, _ := strings.Cut(c, "|"); id == "NULL" {
				sks[sk] = "unknown"
			} else {
				sks[sk] = c
			}
		}
		for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
			id, sk, _ := strings.Cut(r, "|")
			out[id] = sks[sk]
		}
		return out
	}

	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, merge, env)
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", day(10)})
	runStage(t, merge, env)
	appendRows(t, env, raw,
		[]any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(12)},
		[]any{"S3", "C2", 30, day(6)}, []any{"S4", "C1", 40, day(8)})
	res := runStage(t, load, env)
	want := map[string]string{"S1": "Seattle", "S2": "Portland", "S3": "unknown", "S4": "Seattle"}
	if got := city(env); !maps.Equal(got, want) {
		t.Fatalf("first load: got %v, want %v", got, want)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "3 facts keyed to a version, 1 to the unknown member") }) {
		t.Errorf("notes %q do not count 3 real keys and 1 unknown", res.Notes)
	}
	// The fact commit's commitInfo carries the counts per lookup, for the table's page.
	lookups := func() []delta.LookupMetrics {
		tbl, _ := latest(t, env, facts)
		h, err := tbl.History(t.Context(), 1)
		if err != nil || len(h) != 1 || h[0].Lineage == nil {
			t.Fatalf("history: %v %v", h, err)
		}
		return h[0].Lineage.Lookups
	}
	if got, want := lookups(), []delta.LookupMetrics{{Key: "customer_sk", Dimension: "sales.customer", NumRealKeys: 3, NumUnknownKeys: 1}}; !slices.Equal(got, want) {
		t.Errorf("commitInfo lookups %+v, want %+v", got, want)
	}
	// Into an empty fact table the first load is an append (with its txns), not a MERGE.
	if tbl, _ := latest(t, env, facts); tbl != nil {
		h, err := tbl.History(t.Context(), 1)
		if err != nil || len(h) != 1 || h[0].Operation != "WRITE" || h[0].OperationParameters["mode"] != "Append" {
			t.Errorf("the first load's commit: %+v %v; want a WRITE in mode Append", h, err)
		}
	}
	// The unknown member row: created once, key -1, business key and attributes NULL,
	// valid from 1900 to the open end, current.
	wantMember := []string{"-1|NULL|NULL|1900-01-01T00:00:00Z|9999-12-31T00:00:00Z|true"}
	members := func() []string {
		var out []string
		for _, r := range tableRows(t, env, dim, "customer_sk", "customer_id", "city", "valid_from", "valid_to", "is_current") {
			if strings.HasPrefix(r, "-1|") {
				out = append(out, r)
			}
		}
		return out
	}
	if got := members(); !slices.Equal(got, wantMember) {
		t.Fatalf("unknown member rows:\n%s", diff(got, wantMember))
	}
	v := tableVersion(t, env, facts)
	if res := runStage(t, load, env); len(res.VersionsWritten) != 0 || tableVersion(t, env, facts) != v {
		t.Fatalf("a rerun with nothing new wrote %v", res.VersionsWritten)
	}

	// C2 arrives (valid from day 2: S3 on day 6 is its), and a late event: C1 lived in
	// Tacoma from day 7. S4 (day 8) moves to Tacoma; S1 (day 5) and S2 (day 12) keep theirs.
	appendRows(t, env, staging, []any{"C2", "Grace", "Boston", day(2)}, []any{"C1", "Ada", "Tacoma", day(7)})
	runStage(t, merge, env)
	before := tableRows(t, env, facts)
	res = runStage(t, load, env)
	want = map[string]string{"S1": "Seattle", "S2": "Portland", "S3": "Boston", "S4": "Tacoma"}
	if got := city(env); !maps.Equal(got, want) {
		t.Fatalf("after the late events: got %v, want %v", got, want)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "0 inserted, 2 updated") }) {
		t.Errorf("notes %q: want exactly the two re-keyed facts updated", res.Notes)
	}
	// S1 was looked up again too (its day falls in the split version) but kept its key:
	// the counts are of the facts whose key changed, S3 and S4.
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "2 facts keyed to a version, 0 to the unknown member") }) {
		t.Errorf("notes %q do not count the 2 re-keyed facts", res.Notes)
	}
	if got, want := lookups(), []delta.LookupMetrics{{Key: "customer_sk", Dimension: "sales.customer", NumRealKeys: 2}}; !slices.Equal(got, want) {
		t.Errorf("commitInfo lookups after re-keying %+v, want %+v", got, want)
	}
	after := tableRows(t, env, facts)
	changed := 0
	for _, r := range after {
		if !slices.Contains(before, r) {
			changed++
		}
	}
	if changed != 2 {
		t.Errorf("%d fact rows changed, want 2:\nbefore %v\nafter  %v", changed, before, after)
	}
	// The dimension's merges left the member row alone.
	if got := members(); !slices.Equal(got, wantMember) {
		t.Fatalf("unknown member rows after the merge:\n%s", diff(got, wantMember))
	}
}

// missing: fail stops the run naming the fact, the customer and the time, and writes nothing.
func TestFactLoadMissingFail(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(3)})
	runStage(t, NewSCD2Merge("customers", scd2Config()), env)
	appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(2)})
	_, err := NewFactLoad("sales", factConfig(true, MissingFail)).Run(t.Context(), env)
	if err == nil {
		t.Fatal("a sale before its customer's first version loaded with missing: fail")
	}
	for _, want := range []string{"fact S2", "sales.customer", "customer_id C1", "sold_at 2026-01-02"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if v := tableVersion(t, env, facts); v > 0 {
		t.Errorf("the failed run committed version %d of the fact table", v)
	}
}

// A snapshot source: each new version is every fact; facts it lacks are deleted.
func TestFactLoadSnapshotSource(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, NewSCD2Merge("customers", scd2Config()), env)
	load := NewFactLoad("sales", factConfig(false, ""))
	writeRows(t, env, raw, true, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)})
	runStage(t, load, env)
	writeRows(t, env, raw, true, []any{"S1", "C1", 11, day(5)}, []any{"S3", "C9", 30, day(6)})
	runStage(t, load, env)
	want := []string{"S1|11|1", "S3|30|-1"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts:\n%s", diff(got, want))
	}
}

// A snapshot source holding two facts with one key fails the run, naming the key, and
// writes nothing: the first load's append checks the keys as the MERGE did.
func TestFactLoadDuplicateFactKey(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, NewSCD2Merge("customers", scd2Config()), env)
	writeRows(t, env, raw, true, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)})
	appendRows(t, env, raw, []any{"S3", "C1", 30, day(7)}, []any{"S2", "C1", 21, day(8)})
	_, err := NewFactLoad("sales", factConfig(false, "")).Run(t.Context(), env)
	if err == nil || !strings.Contains(err.Error(), "holds two facts with key S2") {
		t.Fatalf("a source with key S2 twice: err %v, want one naming S2", err)
	}
	if v := tableVersion(t, env, facts); v > 0 {
		t.Errorf("the failed run committed version %d of the fact table", v)
	}
}

// A run that only re-keys updates the re-keyed facts where they are: on a fact table
// with deletion vectors it marks them and writes them anew, copying no other fact.
func TestFactLoadRekeyMarksRows(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	facts.Properties = map[string]string{"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	merge := NewSCD2Merge("customers", scd2Config())
	load := NewFactLoad("sales", factConfig(true, ""))
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C2", "Grace", "Boston", day(1)})
	runStage(t, merge, env)
	appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(12)},
		[]any{"S3", "C2", 30, day(6)}, []any{"S4", "C1", 40, day(8)}, []any{"S5", "C2", 50, day(9)})
	runStage(t, load, env)
	// C1 lived in Tacoma from day 7 (a late event): S4 and S2 move there.
	appendRows(t, env, staging, []any{"C1", "Ada", "Tacoma", day(7)})
	runStage(t, merge, env)
	runStage(t, load, env)
	sks := map[string]string{}
	for _, r := range tableRows(t, env, dim, "customer_sk", "city") {
		sk, city, _ := strings.Cut(r, "|")
		sks[sk] = city
	}
	got := map[string]string{}
	for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
		id, sk, _ := strings.Cut(r, "|")
		got[id] = sks[sk]
	}
	want := map[string]string{"S1": "Seattle", "S2": "Tacoma", "S3": "Boston", "S4": "Tacoma", "S5": "Boston"}
	if !maps.Equal(got, want) {
		t.Fatalf("facts: got %v, want %v", got, want)
	}
	tbl, _ := latest(t, env, facts)
	h, err := tbl.History(t.Context(), 1)
	if err != nil || len(h) != 1 {
		t.Fatalf("history: %v %v", h, err)
	}
	m := h[0].OperationMetrics
	for k, v := range map[string]string{"numTargetRowsUpdated": "2", "numTargetRowsCopied": "0", "numTargetDeletionVectorsAdded": "1"} {
		if fmt.Sprint(m[k]) != v {
			t.Errorf("re-keying commit: %s %v, want %s (metrics %v)", k, m[k], v, m)
		}
	}
}

// The append's key set keeps hashes only: when every key's hash collides, the keys are
// read again, and facts with distinct keys load while a duplicate still fails.
func TestFactLoadDuplicateFactKeyHashCollisions(t *testing.T) {
	defer func(h func([]byte) int64) { factKeyHash = h }(factKeyHash)
	factKeyHash = func([]byte) int64 { return 42 }
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, NewSCD2Merge("customers", scd2Config()), env)
	writeRows(t, env, raw, true, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)}, []any{"S3", "C1", 30, day(7)})
	runStage(t, NewFactLoad("sales", factConfig(false, "")), env)
	if got, want := tableRows(t, env, facts, "sale_id", "customer_sk"), []string{"S1|1", "S2|1", "S3|1"}; !slices.Equal(got, want) {
		t.Fatalf("facts:\n%s", diff(got, want))
	}
	facts2 := *facts
	facts2.Name, facts2.Path = "sales.sales2", "sales/sales2"
	env = newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, &facts2)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, NewSCD2Merge("customers", scd2Config()), env)
	writeRows(t, env, raw, true, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)}, []any{"S1", "C1", 30, day(7)})
	cfg := factConfig(false, "")
	cfg.Target = facts2.Name
	_, err := NewFactLoad("sales", cfg).Run(t.Context(), env)
	if err == nil || !strings.Contains(err.Error(), "holds two facts with key S1") {
		t.Fatalf("a source with key S1 twice: err %v, want one naming S1", err)
	}
}

// Re-keying reads only the fact files whose statistics may hold a changed key at a
// changed time: a late event in early January leaves the file of later sales unread.
func TestFactLoadRekeySkipsFiles(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	merge := NewSCD2Merge("customers", scd2Config())
	load := NewFactLoad("sales", factConfig(true, ""))
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C1", "Ada", "Portland", day(10)})
	runStage(t, merge, env)
	appendRows(t, env, raw, []any{"S1", "C1", 10, day(3)}, []any{"S2", "C1", 20, day(5)})
	runStage(t, load, env)
	appendRows(t, env, raw, []any{"S3", "C1", 30, day(15)}, []any{"S4", "C1", 40, day(16)})
	runStage(t, load, env)
	// Ada lived in Tacoma from day 4 to day 10: S2 moves there.
	appendRows(t, env, staging, []any{"C1", "Ada", "Tacoma", day(4)})
	runStage(t, merge, env)
	res := runStage(t, load, env)
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "re-keying read 1 of the fact table's 2 files") }) {
		t.Errorf("notes %q: want the re-keying to read 1 of the 2 fact files", res.Notes)
	}
	sks := map[string]string{}
	for _, r := range tableRows(t, env, dim, "customer_sk", "city") {
		sk, city, _ := strings.Cut(r, "|")
		sks[sk] = city
	}
	got := map[string]string{}
	for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
		id, sk, _ := strings.Cut(r, "|")
		got[id] = sks[sk]
	}
	if want := map[string]string{"S1": "Seattle", "S2": "Tacoma", "S3": "Portland", "S4": "Portland"}; !maps.Equal(got, want) {
		t.Fatalf("facts: got %v, want %v", got, want)
	}
}

// A dimension that moves while the fact table is still empty (no facts yet) only
// moves the run's dimension txn: nothing to re-key, nothing written but the txns.
func TestFactLoadDimensionMovesBeforeFacts(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	merge := NewSCD2Merge("customers", scd2Config())
	load := NewFactLoad("sales", factConfig(true, ""))
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, merge, env)
	writeRows(t, env, raw, true)
	runStage(t, load, env)
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", day(10)})
	runStage(t, merge, env)
	runStage(t, load, env)
	appendRows(t, env, raw, []any{"S1", "C1", 10, day(12)})
	runStage(t, load, env)
	if got, want := tableRows(t, env, facts, "sale_id", "customer_sk"), []string{"S1|2"}; !slices.Equal(got, want) {
		t.Fatalf("facts:\n%s", diff(got, want))
	}
}

// A crash at any store operation of a load that re-keys, then reruns: exactly the facts
// an uninterrupted run gives.
func TestFactLoadCrashAtEveryOperation(t *testing.T) {
	// (A snapshot source only appended to: its second run reads the file added; one
	// also changed in place: its change feed.)
	for _, c := range []struct{ changes, inPlace bool }{{true, false}, {false, false}, {false, true}} {
		t.Run(fmt.Sprintf("source_changes=%v,in_place=%v", c.changes, c.inPlace), func(t *testing.T) { factLoadCrashAtEveryOperation(t, c.changes, c.inPlace) })
	}
}

func factLoadCrashAtEveryOperation(t *testing.T, changes, inPlace bool) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	load := NewFactLoad("sales", factConfig(changes, ""))
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, staging, dim, raw, facts)
		merge := NewSCD2Merge("customers", scd2Config())
		appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C1", "Ada", "Portland", day(10)})
		runStage(t, merge, env)
		appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(12)}, []any{"S3", "C2", 30, day(6)})
		runStage(t, load, env)
		appendRows(t, env, staging, []any{"C2", "Grace", "Boston", day(2)}, []any{"C1", "Ada", "Tacoma", day(4)})
		runStage(t, merge, env)
		appendRows(t, env, raw, []any{"S4", "C1", 40, day(8)})
		if inPlace { // S3 was C1's sale
			tbl, _ := latest(t, env, raw)
			if _, err := tbl.Update(t.Context(), delta.UpdateOptions{Where: expr.Eq("sale_id", "S3"), Set: map[string]any{"customer_id": "C1"}}); err != nil {
				t.Fatal(err)
			}
		}
		return fs, env, facts
	}
	observe := func(env *Env, tbl *Table) []string {
		sks := map[string]string{"-1": "unknown"}
		for _, r := range tableRows(t, env, dim, "customer_sk", "city") {
			sk, c, _ := strings.Cut(r, "|")
			sks[sk] = c
		}
		var out []string
		for _, r := range tableRows(t, env, tbl, "sale_id", "customer_sk") {
			id, sk, _ := strings.Cut(r, "|")
			out = append(out, id+"|"+sks[sk])
		}
		return out
	}
	want := crashAtEveryOperation(t, load, setup, observe)
	w := []string{"S1|Tacoma", "S2|Portland", "S3|Boston", "S4|Tacoma"}
	if inPlace {
		w[2] = "S3|Tacoma"
	}
	if !slices.Equal(want, w) {
		t.Fatalf("clean run:\n%s", diff(want, w))
	}
}

// A change feed source whose facts are updated, re-keyed by their own key, deleted, and
// overwritten (a delete and an insert of one key in one version): the fact table follows,
// and a fact whose key changed leaves nothing behind.
func TestFactLoadSourceChanges(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, NewSCD2Merge("customers", scd2Config()), env)
	load := NewFactLoad("sales", factConfig(true, ""))
	appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)}, []any{"S3", "C1", 30, day(7)})
	runStage(t, load, env)

	tbl, _ := latest(t, env, raw)
	if _, err := tbl.Update(t.Context(), delta.UpdateOptions{Where: expr.Eq("sale_id", "S1"), Set: map[string]any{"sale_id": "S9", "amount": int64(11)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Delete(t.Context(), delta.DeleteOptions{Where: expr.Eq("sale_id", "S2")}); err != nil {
		t.Fatal(err)
	}
	runStage(t, load, env)
	want := []string{"S3|30|1", "S9|11|1"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("after an update of a key and a delete:\n%s", diff(got, want))
	}

	writeRows(t, env, raw, true, []any{"S3", "C1", 33, day(7)}, []any{"S4", "C0", 40, day(8)})
	runStage(t, load, env)
	want = []string{"S3|33|1", "S4|40|-1"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("after an overwrite of the source:\n%s", diff(got, want))
	}
}

// missing: quarantine sends a new fact with no version at its time to the quarantine
// table (naming the fact, the customer and the time) instead of the fact table, once
// across crashes and reruns; a loaded fact that loses its version later gets the unknown key.
func TestFactLoadQuarantine(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	quarantine := &Table{Name: "sales.sales_quarantine", Path: "sales/sales_quarantine",
		Schema: schemaOf(t, "source_file string", "line bigint", "column string", "value string", "error string", "record string", "load_timestamp timestamp")}
	cfg := factConfig(true, MissingQuarantine)
	cfg.QuarantineTable = quarantine.Name
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	load := NewFactLoad("sales", cfg)
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, staging, dim, raw, facts, quarantine)
		appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(3)})
		runStage(t, NewSCD2Merge("customers", scd2Config()), env)
		appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(2)}, []any{"S3", "C7", 30, day(6)})
		return fs, env, facts
	}
	observe := func(env *Env, tbl *Table) []string {
		out := tableRows(t, env, tbl, "sale_id", "customer_sk")
		for _, r := range tableRows(t, env, quarantine, "source_file", "column", "value", "error") {
			out = append(out, "quarantined: "+r)
		}
		return out
	}
	want := crashAtEveryOperation(t, load, setup, observe)
	w := []string{
		"S1|1",
		"quarantined: staging.sales@v1|customer_id|C1|fact S2: dimension sales.customer has no version of customer_id C1 at sold_at 2026-01-02T12:00:00Z (lookups[0] has missing: quarantine)",
		"quarantined: staging.sales@v1|customer_id|C7|fact S3: dimension sales.customer has no version of customer_id C7 at sold_at 2026-01-06T12:00:00Z (lookups[0] has missing: quarantine)",
	}
	if !slices.Equal(want, w) {
		t.Fatalf("clean run:\n%s", diff(want, w))
	}
	if cfg := factConfig(true, MissingQuarantine); len(cfg.Validate()) != 1 || cfg.Validate()[0].Field != "quarantine_table" {
		t.Errorf("missing: quarantine without a quarantine_table: %v", cfg.Validate())
	}
}

// memberRows are the dimension's rows with a NULL business key (customer_id).
func memberRows(t *testing.T, env *Env, dim *Table) []string {
	var out []string
	for _, r := range tableRows(t, env, dim, "customer_id", "customer_sk", "valid_from", "valid_to", "is_current") {
		if strings.HasPrefix(r, "NULL|") {
			out = append(out, r)
		}
	}
	return out
}

// The unknown member row is created once, by the run that first needs it, whatever
// store operation a run crashes at: the facts and the dimension end as an uninterrupted
// run leaves them (one member row, facts keyed to it).
func TestFactLoadUnknownMemberCrashAtEveryOperation(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	load := NewFactLoad("sales", factConfig(true, ""))
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, staging, dim, raw, facts)
		appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
		runStage(t, NewSCD2Merge("customers", scd2Config()), env)
		appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C9", 20, day(6)})
		return fs, env, facts
	}
	observe := func(env *Env, tbl *Table) []string {
		return append(tableRows(t, env, tbl, "sale_id", "customer_sk"), memberRows(t, env, dim)...)
	}
	want := crashAtEveryOperation(t, load, setup, observe)
	if w := []string{"S1|1", "S2|-1", "NULL|-1|1900-01-01T00:00:00Z|9999-12-31T00:00:00Z|true"}; !slices.Equal(want, w) {
		t.Fatalf("clean run:\n%s", diff(want, w))
	}
}

// The scd2_merge never closes, versions or doubles the unknown member row: not from a
// change feed, not from a snapshot extract that lacks it (deletes: close or tombstone);
// the table checks scd2_invariants and unique (on the surrogate key) pass with it; a
// second fact_load with the same unknown key does not add another; a positive
// unknown_key is refused (the identity column hands those out).
func TestFactLoadUnknownMemberLeftAlone(t *testing.T) {
	for _, deletes := range []string{"close", "tombstone"} {
		t.Run(deletes, func(t *testing.T) {
			staging, dim := customerTables(t)
			raw, facts := salesTables(t)
			clock := &testClock{t: d1}
			env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
			cfg := scd2Config()
			cfg.SourceChanges, cfg.Deletes = false, deletes
			merge := NewSCD2Merge("customers", cfg)
			writeRows(t, env, staging, true, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C2", "Grace", "Boston", day(1)})
			runStage(t, merge, env)
			appendRows(t, env, raw, []any{"S1", "C3", 10, day(5)})
			runStage(t, NewFactLoad("sales", factConfig(true, "")), env)
			other := factConfig(true, "")
			other.Target = "sales.other"
			otherFacts := *facts
			otherFacts.Name, otherFacts.Path = "sales.other", "sales/other"
			env.Tables["sales.other"] = &otherFacts
			runStage(t, NewFactLoad("other", other), env)
			// The next extract lacks C2 and the member; C1 moves.
			clock.t = clock.t.Add(time.Hour)
			writeRows(t, env, staging, true, []any{"C1", "Ada", "Portland", day(9)})
			runStage(t, merge, env)
			writeRows(t, env, staging, true, []any{"C1", "Ada", "Tacoma", day(10)})
			runStage(t, merge, env)
			want := []string{"NULL|-1|1900-01-01T00:00:00Z|9999-12-31T00:00:00Z|true"}
			if got := memberRows(t, env, dim); !slices.Equal(got, want) {
				t.Fatalf("member rows after snapshot merges:\n%s", diff(got, want))
			}
			_, snap := latest(t, env, dim)
			r := &ExpectationResult{}
			if err := checkSCD2(t.Context(), snap, cfg, r); err != nil || r.Failed != 0 {
				t.Errorf("scd2_invariants: %v, %d failed: %s", err, r.Failed, r.Detail)
			}
			r = &ExpectationResult{}
			if err := checkUnique(t.Context(), snap, []string{"customer_sk"}, r); err != nil || r.Failed != 0 {
				t.Errorf("unique customer_sk: %v, %d failed: %s", err, r.Failed, r.Detail)
			}
		})
	}
	cfg := factConfig(true, "")
	k := int64(7)
	cfg.Lookups[0].UnknownKey = &k
	if errs := cfg.Validate(); len(errs) != 1 || errs[0].Field != "lookups[0].unknown_key" {
		t.Errorf("unknown_key 7: %v", errs)
	}
}
