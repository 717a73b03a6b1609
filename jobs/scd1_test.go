package jobs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
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
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: delta.Eq("id", "A1")}); err != nil {
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
	setup := func() (*faultstore.Store, *Env, *Table) {
		src, dst := scd1Tables(t)
		clock := &testClock{t: d1}
		fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(fs, clock, src, dst)
		appendRows(t, env, src, []any{"A1", "ann", d1}, []any{"A2", "bob", d1})
		runStage(t, scd1Stage(src, dst), env)
		clock.Advance(24 * time.Hour)
		appendRows(t, env, src, []any{"A2", "bobby", d2}, []any{"A3", "cy", d2})
		return fs, env, dst
	}
	src, dst := scd1Tables(t)
	want := crashAtEveryOperation(t, scd1Stage(src, dst), setup, rowsOf(t, "id", "owner"))
	if !slices.Equal(want, []string{"A1|ann", "A2|bobby", "A3|cy"}) {
		t.Fatalf("clean run: %v", want)
	}
}

func scd1Stage(src, dst *Table) *SCD1Merge {
	return NewSCD1Merge("accounts", &SCD1Config{Source: src.Name, SourceChanges: true, Target: dst.Name, Keys: []string{"id"}, SequenceBy: "updated_at", Deletes: "delete"})
}
