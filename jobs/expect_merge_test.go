package jobs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// rejectsTable is a quarantine table for the merges' row checks.
func rejectsTable(t *testing.T) *Table {
	return &Table{Name: "audit.rejects", Path: "audit/rejects",
		Schema: schemaOf(t, "source_file string", "line bigint", "column string", "value string", "error string", "record string", "expectation string", "load_timestamp timestamp")}
}

// withRejects observes a stage's target and its quarantine table (their rows, the
// quarantine's prefixed with "quarantine:").
func withRejects(t *testing.T, rejects *Table) func(*Env, *Table) []string {
	return func(env *Env, table *Table) []string {
		out := tableRows(t, env, table)
		for _, r := range tableRows(t, env, rejects, "expectation", "column", "value", "source_file") {
			out = append(out, "quarantine:"+r)
		}
		return out
	}
}

// A crash at any store operation of an SCD2 merge that quarantines an event (the
// quarantine's commit, then the merge's), then reruns, gives the dimension and the
// quarantine an uninterrupted run gives: the event set aside once, never merged.
func TestSCD2QuarantineCrashAtEveryOperation(t *testing.T) {
	rejects := rejectsTable(t)
	exps := []Expectation{{Name: "not_london", Expect: "city <> 'London'", OnViolation: ActionQuarantine}}
	cfg := scd2Config()
	cfg.QuarantineTable = rejects.Name
	setup := func() (*faultstore.Store, *Env, *Table) {
		staging, dim := customerTables(t)
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, staging, dim, rejects)
		env.Expectations = exps
		appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1}, []any{"C2", "Grace", "Boston", d1})
		runStage(t, NewSCD2Merge("merge", cfg), env)
		clock.t = d2
		appendRows(t, env, staging, []any{"C1", "Ada", "Portland", d2}, []any{"C3", "Alan", "London", d2})
		return fs, env, dim
	}
	want := crashAtEveryOperation(t, NewSCD2Merge("merge", cfg), setup, withRejects(t, rejects))
	quarantined := slices.DeleteFunc(slices.Clone(want), func(r string) bool { return !strings.HasPrefix(r, "quarantine:") })
	if len(quarantined) != 1 || !strings.HasPrefix(quarantined[0], "quarantine:not_london|city|London|staging.customers version 2") {
		t.Fatalf("clean run quarantined %q, want C3's London event of version 2", quarantined)
	}
	if slices.ContainsFunc(want, func(r string) bool { return strings.Contains(r, "C3") && !strings.HasPrefix(r, "quarantine:") }) {
		t.Fatalf("clean run merged the quarantined C3: %q", want)
	}
	if len(want) != 4 { // C1 Seattle (closed), C1 Portland, C2 Boston, the quarantined row
		t.Fatalf("clean run: %q", want)
	}
}

// The same for an SCD1 merge.
func TestSCD1QuarantineCrashAtEveryOperation(t *testing.T) {
	rejects := rejectsTable(t)
	exps := []Expectation{{Name: "named", Expect: "owner <> ''", OnViolation: ActionQuarantine}}
	setup := func() (*faultstore.Store, *Env, *Table) {
		src, dst := scd1Tables(t)
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, src, dst, rejects)
		env.Expectations = exps
		appendRows(t, env, src, []any{"A1", "ann", d1}, []any{"A2", "bob", d1})
		stage := scd1Stage(src, dst)
		stage.cfg.QuarantineTable = rejects.Name
		runStage(t, stage, env)
		clock.Advance(24 * time.Hour)
		appendRows(t, env, src, []any{"A2", "", d2}, []any{"A3", "cy", d2})
		return fs, env, dst
	}
	src, dst := scd1Tables(t)
	stage := scd1Stage(src, dst)
	stage.cfg.QuarantineTable = rejects.Name
	want := crashAtEveryOperation(t, stage, setup, withRejects(t, rejects))
	if len(want) != 4 || !strings.HasPrefix(want[3], "quarantine:named|owner||staging.accounts version 2") || !strings.HasPrefix(want[1], "A2|bob|") {
		t.Fatalf("clean run: %q, want A2 kept as bob and its empty owner quarantined", want)
	}
}

// A merge that fills its event log from the change feed it merged before (a dimension
// older than its log) does not judge those events again: they are in the dimension,
// so they go to the log, whatever today's row checks say; only the new batch is judged.
func TestSCD2RowChecksSkipTheLogFill(t *testing.T) {
	ctx := context.Background()
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	store := mem.New(mem.Config{Now: clock.Now})
	env := newTestEnv(store, clock, staging, dim)
	appendRows(t, env, staging, []any{"C1", "Ada", "London", d1}, []any{"C2", "Grace", "Boston", d1})
	cfg := scd2Config()
	runStage(t, NewSCD2Merge("merge", cfg), env)
	// The dimension forgets its log, as one merged before logs existed.
	objs, err := store.List(ctx, cfg.EventLog()+"/", "")
	if err != nil || len(objs) == 0 {
		t.Fatalf("event log objects: %v, %v", objs, err)
	}
	for _, o := range objs {
		if err := store.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	clock.t = d2
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", d2})
	env.Expectations = []Expectation{{Name: "not_london", Expect: "city <> 'London'", OnViolation: ActionFail}}
	res := runStage(t, NewSCD2Merge("merge", cfg), env)
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "filled with the 2 events merged before") }) {
		t.Fatalf("notes %q: the log was not filled from the change feed", res.Notes)
	}
	if len(res.Expectations) != 1 || res.Expectations[0].Rows != 1 || res.Expectations[0].Failed != 0 {
		t.Errorf("row checks %+v, want the new batch's 1 event judged, passing", res.Expectations)
	}
	if got := tableRows(t, env, dim, "customer_id", "city", "is_current"); !slices.Equal(got, []string{"C1|London|false", "C1|Portland|true", "C2|Boston|true"}) {
		t.Errorf("dimension %q", got)
	}
}
