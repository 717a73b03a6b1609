package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// A dropped event never happened: over random batches of customer events (late ones
// among them), an SCD2 merge whose row check drops the events with city X leaves the
// same dimension as the merge of a source that never had them; and an SCD1 merge the
// same table.
func TestRowCheckDropIsAnEventThatNeverCame(t *testing.T) {
	drop := []Expectation{{Name: "no_x", Expect: "city <> 'X'", OnViolation: ActionDrop}}
	cities := []string{"A", "B", "C", "X"}
	dropped, kept := 0, 0
	defer func() {
		if dropped < 20 || kept < 20 {
			t.Errorf("the random batches had %d X events and %d others: too few to prove anything", dropped, kept)
		}
	}()
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		n := 4 + rng.IntN(12)
		hours := rng.Perm(n) // distinct times, out of order across batches: late events
		var batches [][][]any
		for i := 0; i < n; {
			size := 1 + rng.IntN(4)
			var b [][]any
			for ; size > 0 && i < n; size-- {
				b = append(b, []any{fmt.Sprintf("C%d", rng.IntN(4)), "n", cities[rng.IntN(len(cities))], d1.Add(time.Duration(hours[i]) * time.Hour)})
				if b[len(b)-1][2] == "X" {
					dropped++
				} else {
					kept++
				}
				i++
			}
			batches = append(batches, b)
		}
		run := func(filter bool, stage func(src, dst *Table) Stage, tables func(t *testing.T) (src, dst *Table), row func([]any) []any) []string {
			src, dst := tables(t)
			clock := &testClock{t: d1}
			env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, src, dst)
			if !filter {
				env.Expectations = drop
			}
			if _, err := env.openOrCreate(context.Background(), src); err != nil {
				t.Fatal(err)
			}
			for _, b := range batches {
				var rows [][]any
				for _, r := range b {
					if !filter || r[2] != "X" {
						rows = append(rows, row(r))
					}
				}
				if len(rows) > 0 {
					appendRows(t, env, src, rows...)
				}
				clock.Advance(time.Hour)
				runStage(t, stage(src, dst), env)
			}
			return tableRows(t, env, dst)
		}
		dim := func(t *testing.T) (*Table, *Table) {
			src, dst := customerTables(t)
			dst.Schema.Fields = dst.Schema.Fields[1:] // no surrogate key: versions compare by their values
			return src, dst
		}
		scd2NoSK := func(src, dst *Table) Stage {
			cfg := scd2Config()
			cfg.Columns.SurrogateKey = ""
			return NewSCD2Merge("merge", cfg)
		}
		same := func(r []any) []any { return r }
		got, want := run(false, scd2NoSK, dim, same), run(true, scd2NoSK, dim, same)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: scd2_merge dropping X events:\n%s", seed, diff(got, want))
		}
		scd1 := func(src, dst *Table) Stage {
			return NewSCD1Merge("accounts", &SCD1Config{Source: src.Name, SourceChanges: true, Target: dst.Name, Keys: []string{"id"}, SequenceBy: "updated_at"})
		}
		accounts := func(t *testing.T) (*Table, *Table) {
			src, dst := scd1Tables(t)
			src.Schema, dst.Schema = schemaOf(t, "id string", "city string", "updated_at timestamp"), schemaOf(t, "id string", "city string", "updated_at timestamp")
			return src, dst
		}
		account := func(r []any) []any { return []any{r[0], r[2], r[3]} }
		if got, want := run(false, scd1, accounts, account), run(true, scd1, accounts, account); !slices.Equal(got, want) {
			t.Fatalf("seed %d: scd1_merge dropping X events:\n%s", seed, diff(got, want))
		}
	}
}
