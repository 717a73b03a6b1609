package jobs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

var t0 = time.Date(2026, 1, 14, 9, 0, 0, 0, time.UTC)

func historyTables(t *testing.T) (src, dst *Table) {
	src = &Table{
		Name:       "bronze.sales",
		Path:       "bronze/sales",
		Schema:     schemaOf(t, "id string", "amount bigint"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
	dst = &Table{
		Name:   "audit.sales_history",
		Path:   "audit/sales_history",
		Schema: schemaOf(t, "id string", "amount bigint", "_change_type string", "_commit_version bigint", "_commit_timestamp timestamp"),
	}
	return src, dst
}

func runStage(t *testing.T, s Stage, env *Env) Result {
	t.Helper()
	res, err := s.Run(context.Background(), env)
	if err != nil {
		t.Fatalf("%s: %v", s.Name(), err)
	}
	return res
}

func TestCaptureHistory(t *testing.T) {
	for name, newStore := range map[string]func(t *testing.T) objectstore.Store{
		"mem":   func(t *testing.T) objectstore.Store { return mem.New(mem.Config{}) },
		"minio": func(t *testing.T) objectstore.Store { return testenv.S3Store(t) },
	} {
		t.Run(name, func(t *testing.T) {
			clock := &testClock{t: t0}
			src, dst := historyTables(t)
			env := newTestEnv(newStore(t), clock, src, dst)
			stage := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name})

			appendRows(t, env, src, []any{"T1", 10}, []any{"T2", 20}) // v1 (v0 creates)
			clock.Advance(time.Hour)
			appendRows(t, env, src, []any{"T3", 30}) // v2

			res := runStage(t, stage, env)
			if res.RowsWritten != 3 || len(res.VersionsWritten) != 1 {
				t.Fatalf("first run: %+v, want 3 rows in one commit", res)
			}
			want := []string{"T1|10|insert|1", "T2|20|insert|1", "T3|30|insert|2"}
			if got := tableRows(t, env, dst, "id", "amount", "_change_type", "_commit_version"); !slices.Equal(got, want) {
				t.Fatalf("history after first run:\n%s", diff(got, want))
			}

			// Rerun twice: nothing new, nothing written.
			before := tableVersion(t, env, dst)
			for range 2 {
				if res := runStage(t, stage, env); res.RowsWritten != 0 || len(res.VersionsWritten) != 0 {
					t.Fatalf("rerun wrote %+v, want nothing", res)
				}
			}
			if v := tableVersion(t, env, dst); v != before {
				t.Fatalf("rerun moved history table from version %d to %d", before, v)
			}

			// An overwrite shows as deletes of the old rows and inserts of the new.
			clock.Advance(time.Hour)
			writeRows(t, env, src, true, []any{"T1", 11}) // v3
			runStage(t, stage, env)
			want = append(want, "T1|10|delete|3", "T2|20|delete|3", "T3|30|delete|3", "T1|11|insert|3")
			slices.Sort(want)
			if got := tableRows(t, env, dst, "id", "amount", "_change_type", "_commit_version"); !slices.Equal(got, want) {
				t.Fatalf("history after overwrite:\n%s", diff(got, want))
			}
		})
	}
}

func TestCaptureHistoryIgnoreDeletesAndStartingVersion(t *testing.T) {
	clock := &testClock{t: t0}
	src, dst := historyTables(t)
	env := newTestEnv(mem.New(mem.Config{}), clock, src, dst)
	appendRows(t, env, src, []any{"T1", 10})      // v1
	appendRows(t, env, src, []any{"T2", 20})      // v2
	writeRows(t, env, src, true, []any{"T3", 30}) // v3
	start := int64(2)
	stage := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name, StartingVersion: &start, IgnoreDeletes: true})
	runStage(t, stage, env)
	want := []string{"T2|insert|2", "T3|insert|3"}
	if got := tableRows(t, env, dst, "id", "_change_type", "_commit_version"); !slices.Equal(got, want) {
		t.Fatalf("history:\n%s", diff(got, want))
	}
}

// A crash at any store operation, followed by a rerun, gives exactly the history an
// uninterrupted run gives: no lost and no doubled change rows.
func TestCaptureHistoryCrashAtEveryOperation(t *testing.T) {
	setup := func() (*faultstore.Store, *Env, *Table) {
		clock := &testClock{t: t0}
		src, dst := historyTables(t)
		fs := faultstore.New(mem.New(mem.Config{}))
		env := newTestEnv(fs, clock, src, dst)
		appendRows(t, env, src, []any{"T1", 10}, []any{"T2", 20})
		appendRows(t, env, src, []any{"T3", 30})
		return fs, env, dst
	}
	stage := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: "bronze.sales", Target: "audit.sales_history"})

	want := crashAtEveryOperation(t, stage, setup, rowsOf(t, "id", "amount", "_change_type", "_commit_version"))
	if len(want) != 3 {
		t.Fatalf("clean run: %d rows, want 3", len(want))
	}
}

func TestCaptureHistoryErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("history table lacks a source column", func(t *testing.T) {
		src, dst := historyTables(t)
		dst.Schema = schemaOf(t, "id string", "_change_type string", "_commit_version bigint", "_commit_timestamp timestamp")
		env := newTestEnv(mem.New(mem.Config{}), &testClock{t: t0}, src, dst)
		appendRows(t, env, src, []any{"T1", 10})
		_, err := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name}).Run(ctx, env)
		if err == nil || !strings.Contains(err.Error(), "source column amount (long) is missing from the history table") {
			t.Fatalf("err = %v, want the missing column named", err)
		}
		if v := tableVersion(t, env, dst); v != -1 {
			t.Errorf("history table at version %d, want none (the failed first run removes the table it created)", v)
		}
		// With schema evolution the column is added (and the declaration says the table
		// may gain columns, as pipelines marks a schema_evolution target).
		dst.SchemaEvolution = true
		_, err = NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name, SchemaEvolution: true}).Run(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tableRows(t, env, dst, "id", "amount", "_change_type"), []string{"T1|10|insert"}; !slices.Equal(got, want) {
			t.Fatalf("evolved history:\n%s", diff(got, want))
		}
	})
	t.Run("source without change feed", func(t *testing.T) {
		src, dst := historyTables(t)
		src.Properties = map[string]string{}
		env := newTestEnv(mem.New(mem.Config{}), &testClock{t: t0}, src, dst)
		appendRows(t, env, src, []any{"T1", 10})
		_, err := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name}).Run(ctx, env)
		if !errors.Is(err, delta.ErrChangeDataFeedDisabled) {
			t.Fatalf("err = %v, want ErrChangeDataFeedDisabled", err)
		}
	})
	t.Run("source missing", func(t *testing.T) {
		src, dst := historyTables(t)
		env := newTestEnv(mem.New(mem.Config{}), &testClock{t: t0}, src, dst)
		_, err := NewCaptureHistory("capture", &CaptureHistoryConfig{Source: src.Name, Target: dst.Name}).Run(ctx, env)
		if err == nil || !strings.Contains(err.Error(), "table bronze.sales does not exist yet") {
			t.Fatalf("err = %v", err)
		}
	})
}

// Two runs of one capture at once: the second commits while the first reads the change
// feed; the first run's commit conflicts, it runs again and finds nothing new, so every
// change is captured once.
func TestCaptureHistoryConcurrentRunsCaptureOnce(t *testing.T) {
	clock := &testClock{t: t0}
	src, dst := historyTables(t)
	inner := mem.New(mem.Config{Now: clock.Now})
	spy := &interposer{Store: inner, prefix: src.Path + "/part-", onGet: true}
	env := newTestEnv(spy, clock, src, dst)
	cfg := &CaptureHistoryConfig{Source: src.Name, Target: dst.Name}
	appendRows(t, newTestEnv(inner, clock, src), src, []any{"T1", 10}, []any{"T2", 20})
	spy.hook = func() { runStage(t, NewCaptureHistory("capture", cfg), newTestEnv(inner, clock, src, dst)) }
	res := runStage(t, NewCaptureHistory("capture", cfg), env)
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "ran again after 1 concurrent commits") }) {
		t.Errorf("notes %q do not say the capture ran again", res.Notes)
	}
	if got, want := tableRows(t, env, dst, "id", "amount", "_change_type", "_commit_version"), []string{"T1|10|insert|1", "T2|20|insert|1"}; !slices.Equal(got, want) {
		t.Fatalf("history:\n%s", diff(got, want))
	}
}
