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

// The source of a history table changes its schema between captures — a type widened,
// a column renamed, one added, one dropped — with rows written between the changes. The
// history table follows it (schema_evolution): widened and renamed with it, the new
// column added, the dropped one kept with its values up to the drop and NULL after;
// every change row is there exactly once, whether one capture reads across all the
// changes or one runs after each.
func TestCaptureHistoryFollowsSourceSchema(t *testing.T) {
	for _, perStep := range []bool{false, true} {
		name := "one capture across the changes"
		if perStep {
			name = "a capture after each change"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := &testClock{t: t0}
			mapped := map[string]string{"delta.enableChangeDataFeed": "true", "delta.columnMapping.mode": "name"}
			src := &Table{Name: "bronze.sales", Path: "bronze/sales", Properties: mapped,
				Schema: schemaOf(t, "id string", "qty int", "amount bigint", "note string")}
			dst := &Table{Name: "audit.sales_history", Path: "audit/sales_history", SchemaEvolution: true,
				Schema: schemaOf(t, "id string", "qty int", "amount bigint", "note string", "_change_type string", "_commit_version bigint", "_commit_timestamp timestamp")}
			env := newTestEnv(mem.New(mem.Config{}), clock, src, dst)
			stage := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name, SchemaEvolution: true})
			step := func() {
				clock.Advance(time.Hour)
				if perStep {
					runStage(t, stage, env)
				}
			}
			appendRows(t, env, src, []any{"A", 1, 10, "n1"}) // v1
			step()
			src.Schema = schemaOf(t, "id string", "qty bigint", "amount bigint", "note string")
			appendRows(t, env, src, []any{"B", int64(5_000_000_000), 20, "n2"}) // v2 widen, v3
			step()
			src.Schema = schemaOf(t, "id string", "qty bigint", "total bigint", "note string")
			src.RenamedFrom = map[string]string{"total": "amount"}
			appendRows(t, env, src, []any{"C", 3, 30, "n3"}) // v4 rename, v5
			step()
			src.Schema = schemaOf(t, "id string", "qty bigint", "total bigint", "note string", "channel string")
			appendRows(t, env, src, []any{"D", 4, 40, "n4", "web"}) // v6 add, v7
			step()
			tbl, snap := latest(t, env, src)
			if _, err := tbl.DropColumns(ctx, snap, []string{"note"}, env.lineage()); err != nil { // v8
				t.Fatal(err)
			}
			src.Schema = schemaOf(t, "id string", "qty bigint", "total bigint", "channel string")
			appendRows(t, env, src, []any{"E", 5, 50, "shop"}) // v9
			clock.Advance(time.Hour)
			runStage(t, stage, env)

			_, hs := latest(t, env, dst)
			var cols []string
			for _, f := range hs.Schema().Fields {
				cols = append(cols, f.Name+" "+f.Type.String())
			}
			wantCols := []string{"id string", "qty long", "total long", "note string", "_change_type string", "_commit_version long", "_commit_timestamp timestamp", "channel string"}
			if !slices.Equal(cols, wantCols) {
				t.Fatalf("history columns %v, want %v", cols, wantCols)
			}
			want := []string{
				"A|1|10|n1|NULL|insert|1",
				"B|5000000000|20|n2|NULL|insert|3",
				"C|3|30|n3|NULL|insert|5",
				"D|4|40|n4|web|insert|7",
				"E|5|50|NULL|shop|insert|9",
			}
			if got := tableRows(t, env, dst, "id", "qty", "total", "note", "channel", "_change_type", "_commit_version"); !slices.Equal(got, want) {
				t.Fatalf("history rows:\n%s", diff(got, want))
			}
			// A rerun finds nothing new and changes nothing; the declaration (the
			// history's first columns) still holds.
			v := tableVersion(t, env, dst)
			if res := runStage(t, stage, env); res.RowsWritten != 0 || tableVersion(t, env, dst) != v {
				t.Fatalf("rerun wrote %d rows, version %d -> %d", res.RowsWritten, v, tableVersion(t, env, dst))
			}
		})
	}
}

// Without schema_evolution a history table that does not follow its source's rename is
// an error naming the declaration to make.
func TestCaptureHistoryRenameNeedsDeclaration(t *testing.T) {
	clock := &testClock{t: t0}
	mapped := map[string]string{"delta.enableChangeDataFeed": "true", "delta.columnMapping.mode": "name"}
	src := &Table{Name: "bronze.sales", Path: "bronze/sales", Properties: mapped, Schema: schemaOf(t, "id string", "amount bigint")}
	dst := &Table{Name: "audit.sales_history", Path: "audit/sales_history",
		Schema: schemaOf(t, "id string", "amount bigint", "_change_type string", "_commit_version bigint", "_commit_timestamp timestamp")}
	env := newTestEnv(mem.New(mem.Config{}), clock, src, dst)
	stage := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name})
	appendRows(t, env, src, []any{"A", 10})
	runStage(t, stage, env)
	src.Schema = schemaOf(t, "id string", "total bigint")
	src.RenamedFrom = map[string]string{"total": "amount"}
	appendRows(t, env, src, []any{"B", 20})
	v := tableVersion(t, env, dst)
	_, err := stage.Run(context.Background(), env)
	if err == nil || !strings.Contains(err.Error(), "source column amount was renamed total (declare {name: total, ..., renamed_from: amount} on the history table") {
		t.Fatalf("capture after a rename: %v, want the declaration to make", err)
	}
	if tableVersion(t, env, dst) != v {
		t.Fatal("the failed capture committed")
	}
}

// A crash at any store operation of a run that evolves its tables (the history table
// following a source that widened, renamed, added and dropped columns), then reruns:
// the history and its schema are exactly those of an uninterrupted run, and the schema
// changes are committed once.
func TestEvolvingCaptureCrashAtEveryOperation(t *testing.T) {
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: t0}
		mapped := map[string]string{"delta.enableChangeDataFeed": "true", "delta.columnMapping.mode": "name"}
		src := &Table{Name: "bronze.sales", Path: "bronze/sales", Properties: mapped,
			Schema: schemaOf(t, "id string", "qty int", "amount bigint", "note string")}
		dst := &Table{Name: "audit.sales_history", Path: "audit/sales_history", SchemaEvolution: true,
			Schema: schemaOf(t, "id string", "qty int", "amount bigint", "note string", "_change_type string", "_commit_version bigint", "_commit_timestamp timestamp")}
		fs := faultstore.New(mem.New(mem.Config{}))
		env := newTestEnv(fs, clock, src, dst)
		appendRows(t, env, src, []any{"A", 1, 10, "n1"})
		runStage(t, NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name, SchemaEvolution: true}), env)
		src.Schema = schemaOf(t, "id string", "qty bigint", "total bigint", "note string", "channel string")
		src.RenamedFrom = map[string]string{"total": "amount"}
		appendRows(t, env, src, []any{"B", 2, 20, "n2", "web"})
		tbl, snap := latest(t, env, src)
		if _, err := tbl.DropColumns(context.Background(), snap, []string{"note"}, env.lineage()); err != nil {
			t.Fatal(err)
		}
		src.Schema = schemaOf(t, "id string", "qty bigint", "total bigint", "channel string")
		appendRows(t, env, src, []any{"C", 3, 30, "shop"})
		return fs, env, dst
	}
	stage := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: "bronze.sales", Target: "audit.sales_history", SchemaEvolution: true})
	observe := func(env *Env, dst *Table) []string {
		tbl, snap := latest(t, env, dst)
		out := []string{"schema " + snap.Schema().String()}
		h, err := tbl.History(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range h {
			out = append(out, "op "+c.Operation)
		}
		return append(out, tableRows(t, env, dst, "id", "qty", "total", "note", "channel", "_commit_version")...)
	}
	want := crashAtEveryOperation(t, stage, setup, observe)
	if !slices.Contains(want, "C|3|30|NULL|shop|5") || !slices.Contains(want, "B|2|20|n2|web|3") {
		t.Fatalf("clean run: %v", want)
	}
}

// With schema_evolution, a history table declared with the source's columns only gains
// the change feed's columns too.
func TestCaptureHistoryEvolutionAddsChangeColumns(t *testing.T) {
	src, dst := historyTables(t)
	dst.Schema = schemaOf(t, "id string", "amount bigint")
	dst.SchemaEvolution = true
	env := newTestEnv(mem.New(mem.Config{}), &testClock{t: t0}, src, dst)
	appendRows(t, env, src, []any{"T1", 10})
	runStage(t, NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name, SchemaEvolution: true}), env)
	if got := tableRows(t, env, dst, "id", "amount", "_change_type", "_commit_version"); !slices.Equal(got, []string{"T1|10|insert|1"}) {
		t.Fatalf("history rows %v", got)
	}
}
