package jobs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

func scd1Tables(t *testing.T) (src, dst *Table) {
	src = &Table{Name: "staging.accounts", Path: "staging/accounts",
		Schema:     schemaOf(t, "id string", "owner string", "updated_at timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
	dst = &Table{Name: "core.accounts", Path: "core/accounts",
		Schema:     schemaOf(t, "id string", "owner string", "updated_at timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
	return src, dst
}

func TestSCD1FromChangeFeed(t *testing.T) {
	ctx := context.Background()
	src, dst := scd1Tables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, src, dst)
	stage := NewSCD1Merge("accounts", &SCD1Config{Source: src.Name, SourceChanges: true, Target: dst.Name, Keys: []string{"id"}, SequenceBy: "updated_at", Deletes: "delete"})

	// Two events for A1 in one batch: the later one wins.
	appendRows(t, env, src, []any{"A1", "ann", d1}, []any{"A1", "anna", d1.Add(time.Hour)}, []any{"A2", "bob", d1})
	runStage(t, stage, env)
	if got, want := tableRows(t, env, dst, "id", "owner"), []string{"A1|anna", "A2|bob"}; !slices.Equal(got, want) {
		t.Fatalf("after batch 1:\n%s", diff(got, want))
	}
	// A2 changes, A1 is deleted at the source, an unchanged A3 arrives twice.
	clock.Advance(24 * time.Hour)
	appendRows(t, env, src, []any{"A2", "bobby", d2}, []any{"A3", "cy", d2})
	tbl, _ := env.openTable(ctx, src)
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", "A1")}); err != nil {
		t.Fatal(err)
	}
	res := runStage(t, stage, env)
	if got, want := tableRows(t, env, dst, "id", "owner"), []string{"A2|bobby", "A3|cy"}; !slices.Equal(got, want) {
		t.Fatalf("after batch 2:\n%s", diff(got, want))
	}
	if res.RowsWritten != 3 {
		t.Errorf("rows written %d, want 3 (1 update, 1 insert, 1 delete)", res.RowsWritten)
	}
	v := tableVersion(t, env, dst)
	runStage(t, stage, env)
	if got := tableVersion(t, env, dst); got != v {
		t.Errorf("rerun moved the table from %d to %d", v, got)
	}
}

func TestSCD1FromSnapshotSkipsUnchangedRows(t *testing.T) {
	src, dst := scd1Tables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, src, dst)
	stage := NewSCD1Merge("accounts", &SCD1Config{Source: src.Name, Target: dst.Name, Keys: []string{"id"}, Deletes: "delete"})
	appendRows(t, env, src, []any{"A1", "ann", d1}, []any{"A2", "bob", d1})
	runStage(t, stage, env)
	writeRows(t, env, src, true, []any{"A1", "ann", d1}, []any{"A3", "cy", d1})
	res := runStage(t, stage, env)
	if got, want := tableRows(t, env, dst, "id", "owner"), []string{"A1|ann", "A3|cy"}; !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
	if res.RowsWritten != 2 {
		t.Errorf("rows written %d, want 2 (A3 inserted, A2 deleted; A1 unchanged)", res.RowsWritten)
	}
}

// A crash at any store operation of an SCD1 merge, then reruns, gives exactly the table an
// uninterrupted merge gives.
func TestSCD1CrashAtEveryOperation(t *testing.T) {
	for _, budget := range []ByteSize{0, tinyBudget} {
		t.Run("budget="+budget.String(), func(t *testing.T) { scd1CrashAtEveryOperation(t, budget) })
	}
}

func scd1CrashAtEveryOperation(t *testing.T, budget ByteSize) {
	setup := func() (*faultstore.Store, *Env, *Table) {
		src, dst := scd1Tables(t)
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, src, dst)
		env.MemoryBudget = budget
		appendRows(t, env, src, []any{"A1", "ann", d1}, []any{"A2", "bob", d1})
		runStage(t, scd1Stage(src, dst), env)
		clock.Advance(24 * time.Hour)
		appendRows(t, env, src, []any{"A2", "bobby", d2}, []any{"A3", "cy", d2})
		return fs, env, dst
	}
	src, dst := scd1Tables(t)
	spills := 0
	want := crashAtEveryOperation(t, spillProbe{scd1Stage(src, dst), &spills}, setup, rowsOf(t, "id", "owner"))
	if !slices.Equal(want, []string{"A1|ann", "A2|bobby", "A3|cy"}) {
		t.Fatalf("clean run: %v", want)
	}
	if budget > 0 && spills == 0 {
		t.Fatalf("with a budget of %s, no merge worked over spill files", budget)
	}
}

func scd1Stage(src, dst *Table) *SCD1Merge {
	return NewSCD1Merge("accounts", &SCD1Config{Source: src.Name, SourceChanges: true, Target: dst.Name, Keys: []string{"id"}, SequenceBy: "updated_at", Deletes: "delete"})
}

// Two runs of one SCD1 merge at once (a retried task, say): the second run commits
// while the first reads the source; the first run's commit then conflicts, it merges
// again, finds the batch merged and writes nothing, so the change feed shows each change
// once.
func TestSCD1ConcurrentRunsMergeOnce(t *testing.T) {
	src, dst := scd1Tables(t)
	clock := &testClock{t: d1}
	inner := mem.New(mem.Config{Now: clock.Now})
	store := &interposer{Store: inner, prefix: src.Path + "/part-", onGet: true}
	env := newTestEnv(store, clock, src, dst)
	cfg := &SCD1Config{Source: src.Name, SourceChanges: true, Target: dst.Name, Keys: []string{"id"}, SequenceBy: "updated_at", Deletes: "delete"}
	stage := NewSCD1Merge("accounts", cfg)
	appendRows(t, env, src, []any{"A1", "ann", d1}, []any{"A2", "bob", d1})
	runStage(t, stage, env)

	clock.Advance(24 * time.Hour)
	appendRows(t, env, src, []any{"A1", "anna", d2}, []any{"A3", "cy", d2})
	other := newTestEnv(inner, clock, src, dst)
	store.hook = func() { runStage(t, NewSCD1Merge("accounts", cfg), other) }
	before := tableVersion(t, env, dst)
	res := runStage(t, stage, env)
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "ran again after 1 concurrent commits") }) {
		t.Errorf("notes %q do not say the merge ran again", res.Notes)
	}
	if got := tableVersion(t, env, dst); got != before+1 {
		t.Errorf("two runs of one batch moved the table from version %d to %d; want one commit", before, got)
	}
	if got, want := tableRows(t, env, dst, "id", "owner"), []string{"A1|anna", "A2|bob", "A3|cy"}; !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s", diff(got, want))
	}
	tbl, err := env.openTable(t.Context(), dst)
	if err != nil {
		t.Fatal(err)
	}
	feed := changeRows(t, tbl, before+1)
	if len(feed) != 3 { // A1 update_preimage and update_postimage, A3 insert
		t.Errorf("change feed of the merge:\n%s", strings.Join(feed, "\n"))
	}
}

// TestCollatedKeyRefused: a source whose key column has a collation other than the byte
// order (Spark's UTF8_LCASE, where 'A1' and 'a1' are one key) is refused by the merges,
// naming the column and the collation, before anything is written.
func TestCollatedKeyRefused(t *testing.T) {
	src, dst := scd1Tables(t)
	src.Schema.Fields[0].Metadata = map[string]any{"__COLLATIONS": map[string]any{"id": "spark.UTF8_LCASE"}}
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, src, dst)
	appendRows(t, env, src, []any{"A1", "ann", d1}, []any{"a1", "bob", d1})
	for _, stage := range []Stage{
		NewSCD1Merge("accounts", &SCD1Config{Source: src.Name, SourceChanges: true, Target: dst.Name, Keys: []string{"id"}, SequenceBy: "updated_at"}),
		NewSCD2Merge("accounts", &SCD2Config{Source: src.Name, SourceChanges: true, Target: dst.Name, Keys: []string{"id"}, SequenceBy: "updated_at"}),
	} {
		_, err := stage.Run(context.Background(), env)
		if err == nil || !strings.Contains(err.Error(), "key column id has collation spark.UTF8_LCASE") {
			t.Fatalf("%s: error %v, want a refusal naming the key column and its collation", stage.Kind(), err)
		}
		if v := tableVersion(t, env, dst); v > 0 {
			t.Fatalf("%s: the target moved to version %d", stage.Kind(), v)
		}
	}
}
