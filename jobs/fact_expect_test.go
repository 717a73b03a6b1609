package jobs

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A fact_load's quarantine check sets a new fact that violates it aside (with the
// expectation's name, the source version, the column and value, the fact as JSON) and
// keeps it out of the fact table: a fact loaded before whose change violates leaves the
// table. A crash at any store operation of the run, then a rerun, leaves the facts and
// the quarantine as an uninterrupted run does: each violator quarantined once.
func TestFactLoadRowCheckQuarantineCrashAtEveryOperation(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	rejects := rejectsTable(t)
	cfg := factConfig(true, "")
	cfg.QuarantineTable = rejects.Name
	exps := []Expectation{{Name: "positive", Expect: "amount > 0", OnViolation: ActionQuarantine}}
	if errs := ValidateExpectations(cfg, exps); len(errs) > 0 {
		t.Fatal(errs)
	}
	load := NewFactLoad("sales", cfg)
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, staging, dim, raw, facts, rejects)
		appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
		runStage(t, NewSCD2Merge("customers", scd2Config()), env)
		env.Expectations = exps // the fact load's
		appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", -20, day(5)})
		res := runStage(t, load, env) // an append: the fact table was empty
		if res.RowsSkipped != 1 || len(res.Expectations) != 1 || res.Expectations[0].Rows != 2 || res.Expectations[0].Failed != 1 {
			t.Fatalf("first load: skipped %d, checks %+v; want S2 of 2 facts quarantined", res.RowsSkipped, res.Expectations)
		}
		// S1 changes to a negative amount (the newest change of the fact wins), S3 is new.
		appendRows(t, env, raw, []any{"S1", "C1", -10, day(5)}, []any{"S3", "C1", 30, day(6)})
		return fs, env, facts
	}
	observe := func(env *Env, tbl *Table) []string {
		out := tableRows(t, env, tbl, "sale_id", "amount", "customer_sk")
		for _, r := range tableRows(t, env, rejects, "expectation", "source_file", "line", "column", "value", "error", "record") {
			out = append(out, "quarantined: "+r)
		}
		return out
	}
	want := crashAtEveryOperation(t, load, setup, observe)
	w := []string{
		"S3|30|1",
		`quarantined: positive|staging.sales@v1|NULL|amount|-20|a fact from staging.sales@v1 (key S2): expectation positive violated: amount > 0|{"sale_id":"S2","customer_id":"C1","amount":-20,"sold_at":"2026-01-05T12:00:00Z","customer_sk":1}`,
		`quarantined: positive|staging.sales@v2|NULL|amount|-10|a fact from staging.sales@v2 (key S1): expectation positive violated: amount > 0|{"sale_id":"S1","customer_id":"C1","amount":-10,"sold_at":"2026-01-05T12:00:00Z","customer_sk":1}`,
	}
	slices.Sort(want[1:])
	if !slices.Equal(want, w) {
		t.Fatalf("clean run:\n%s", diff(want, w))
	}
}

// drop leaves a violating new fact out of the fact table (an earlier version of it
// leaves too), for a change feed and a snapshot source alike; a re-keying does not
// bring it back, and a re-keyed fact is judged by warn and fail only (drop leaves it
// with its new key: its stale key would be wrong).
func TestFactLoadRowCheckDrop(t *testing.T) {
	for _, changes := range []bool{true, false} {
		name := "snapshot"
		if changes {
			name = "changes"
		}
		t.Run(name, func(t *testing.T) {
			staging, dim := customerTables(t)
			raw, facts := salesTables(t)
			clock := &testClock{t: d1}
			env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
			merge := NewSCD2Merge("customers", scd2Config())
			load := NewFactLoad("sales", factConfig(changes, ""))
			appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C2", "Grace", "Boston", day(1)})
			runStage(t, merge, env)
			// S9 is loaded before the check exists: it stays, and keeps being re-keyed.
			appendRows(t, env, raw, []any{"S9", "C2", -9, day(5)})
			runStage(t, load, env)
			env.Expectations = []Expectation{{Name: "positive", Expect: "amount > 0", OnViolation: ActionDrop}}
			appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", -20, day(5)})
			res := runStage(t, load, env)
			// A snapshot source's facts are all judged again: S9 too, and it leaves.
			wantFacts, wantChecked, wantFailed := []string{"S1|10|1", "S9|-9|2"}, int64(2), int64(1)
			if !changes {
				wantFacts, wantChecked, wantFailed = []string{"S1|10|1"}, 3, 2
			}
			if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, wantFacts) {
				t.Fatalf("after S2 dropped:\n%s", diff(got, wantFacts))
			}
			if c := res.Expectations; res.RowsSkipped != wantFailed || len(c) != 1 || c[0].Rows != wantChecked || c[0].Failed != wantFailed || c[0].Action != ActionDrop {
				t.Fatalf("skipped %d, checks %+v; want %d of %d dropped", res.RowsSkipped, c, wantFailed, wantChecked)
			}
			if !changes {
				return
			}
			// S1 turns negative: it leaves the table; C1 and C2 move (a re-keying of S9,
			// not dropped, and nothing brings S1 or S2 back).
			appendRows(t, env, raw, []any{"S1", "C1", -1, day(5)})
			clock.t = d2
			appendRows(t, env, staging, []any{"C1", "Ada", "Portland", day(4)}, []any{"C2", "Grace", "Austin", day(4)})
			exps := env.Expectations
			env.Expectations = nil // (the fact load's)
			runStage(t, merge, env)
			env.Expectations = exps
			res = runStage(t, load, env)
			got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk")
			if len(got) != 1 || !strings.HasPrefix(got[0], "S9|-9|") || got[0] == "S9|-9|2" {
				t.Fatalf("after S1 turned negative and C2 moved: %v, want S9 alone, re-keyed", got)
			}
			if c := res.Expectations; res.RowsSkipped != 1 || c[0].Rows != 1 || c[0].Failed != 1 {
				t.Fatalf("skipped %d, checks %+v; want S1 (the re-keyed S9 not judged by drop)", res.RowsSkipped, c)
			}
		})
	}
}

// validate refuses what a fact_load cannot drop or quarantine soundly.
func TestFactLoadRowCheckValidate(t *testing.T) {
	for _, c := range []struct {
		changes bool
		table   string
		exp     Expectation
		want    string
	}{
		{false, "audit.rejects", Expectation{Name: "p", Expect: "amount > 0", OnViolation: ActionQuarantine}, "a fact load quarantines the new facts of its source's change feed (source_changes: true)"},
		{true, "", Expectation{Name: "p", Expect: "amount > 0", OnViolation: ActionQuarantine}, "quarantine needs the stage's quarantine_table"},
		{true, "", Expectation{Name: "p", Expect: "customer_sk <> -1", OnViolation: ActionDrop}, "the predicate reads customer_sk, a key the lookups compute"},
		{true, "", Expectation{Name: "p", Expect: "customer_sk <> -1", OnViolation: ActionWarn}, ""},
		{false, "", Expectation{Name: "p", Expect: "amount > 0", OnViolation: ActionDrop}, ""},
	} {
		cfg := factConfig(c.changes, "")
		cfg.QuarantineTable = c.table
		errs := ValidateExpectations(cfg, []Expectation{c.exp})
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%+v: %v, want none", c.exp, errs)
		case c.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Msg, c.want)):
			t.Errorf("%+v (source_changes %v): %v, want %q", c.exp, c.changes, errs, c.want)
		}
	}
}

// A crash between the quarantine's commit and the fact table's, then a new source
// version before the rerun: the rerun reads the crashed run's versions again with the
// new one, and quarantines only the facts of versions the quarantine does not hold yet.
func TestFactLoadQuarantineCrashThenSourceMoves(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	rejects := rejectsTable(t)
	cfg := factConfig(true, MissingQuarantine)
	cfg.QuarantineTable = rejects.Name
	exps := []Expectation{{Name: "positive", Expect: "amount > 0", OnViolation: ActionQuarantine}}
	load := NewFactLoad("sales", cfg)
	setup := func() (*faultstore.Store, *Env) {
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, staging, dim, raw, facts, rejects)
		appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
		runStage(t, NewSCD2Merge("customers", scd2Config()), env)
		env.Expectations = exps
		appendRows(t, env, raw, []any{"S1", "C1", 10, day(5)})
		runStage(t, load, env)
		// A violator and a miss (C7 has no version).
		appendRows(t, env, raw, []any{"S2", "C1", -20, day(5)}, []any{"S3", "C7", 30, day(6)})
		return fs, env
	}
	observe := func(env *Env) []string {
		out := tableRows(t, env, facts, "sale_id")
		for _, r := range tableRows(t, env, rejects, "source_file", "expectation", "column") {
			out = append(out, "quarantined: "+r)
		}
		return out
	}
	fs, env := setup()
	fs.FailNth(0, false, false)
	runStage(t, load, env)
	ops := fs.Count()
	appendRows(t, env, raw, []any{"S4", "C1", -4, day(7)})
	runStage(t, load, env)
	want := observe(env)
	w := []string{"S1", "quarantined: staging.sales@v2|NULL|customer_id", "quarantined: staging.sales@v2|positive|amount", "quarantined: staging.sales@v3|positive|amount"}
	if !slices.Equal(want, w) {
		t.Fatalf("clean runs:\n%s", diff(want, w))
	}
	for n := 1; n <= ops; n++ {
		fs, env := setup()
		fs.FailNth(n, true, false)
		if _, err := load.Run(context.Background(), env); err == nil && fs.Injected() {
			t.Fatalf("crash at op %d: run reported success", n)
		}
		fs.Heal()
		appendRows(t, env, raw, []any{"S4", "C1", -4, day(7)})
		runStage(t, load, env)
		runStage(t, load, env)
		if got := observe(env); !slices.Equal(got, want) {
			t.Fatalf("crash at op %d, the source moved, reruns:\n%s", n, diff(got, want))
		}
	}
}
