package jobs

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A snapshot source that was only appended to since the last load: the run reads just
// the files added (its note says so) and ends as a run reading the whole snapshot
// would, re-keying the facts loaded before where the dimension changed; a key an added
// file repeats fails the run, naming it, and writes nothing; a version that rewrote a
// file (an update) is read whole again, deleting what it lacks; so is one appended to
// after the lookup's settings changed.
func TestFactLoadSnapshotSourceAppended(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	merge := NewSCD2Merge("customers", scd2Config())
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)})
	runStage(t, merge, env)
	load := NewFactLoad("sales", factConfig(false, ""))
	writeRows(t, env, raw, true, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)})
	runStage(t, load, env)
	// C1 moved on day 6 (a late event) and new sales came, appended.
	clock.t = d2
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", day(6)})
	runStage(t, merge, env)
	appendRows(t, env, raw, []any{"S3", "C1", 30, day(7)}, []any{"S4", "C9", 40, day(7)})
	res := runStage(t, load, env)
	want := []string{"S1|10|1", "S2|20|2", "S3|30|2", "S4|40|-1"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts after an append and a late event:\n%s", diff(got, want))
	}
	if !noted(res, "only gained files since version") || res.RowsRead != 2 {
		t.Errorf("read %d rows, notes %q: want the 2 rows of the file added", res.RowsRead, res.Notes)
	}
	before := tableVersion(t, env, facts)
	appendRows(t, env, raw, []any{"S5", "C1", 50, day(8)}, []any{"S2", "C1", 21, day(8)})
	if _, err := load.Run(t.Context(), env); err == nil || !strings.Contains(err.Error(), "holds two facts with key S2") {
		t.Fatalf("an appended file repeating S2: err %v, want one naming S2", err)
	}
	if v := tableVersion(t, env, facts); v != before {
		t.Errorf("the failed run committed version %d of the fact table", v)
	}
	// The source rewritten (S2's repeat gone, S3 changed, S1 gone): read whole.
	writeRows(t, env, raw, true, []any{"S2", "C1", 20, day(6)}, []any{"S3", "C1", 33, day(7)}, []any{"S4", "C9", 40, day(7)}, []any{"S5", "C1", 50, day(8)})
	res = runStage(t, load, env)
	want = []string{"S2|20|2", "S3|33|2", "S4|40|-1", "S5|50|2"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts after the source was rewritten:\n%s", diff(got, want))
	}
	if res.RowsRead != 4 {
		t.Errorf("read %d rows of the rewritten source, want all 4", res.RowsRead)
	}
	// The lookup's settings changed (another unknown key): the next run, though the
	// source was only appended to, reads it whole and keys every fact anew.
	cfg := factConfig(false, "")
	other := int64(-2)
	cfg.Lookups[0].UnknownKey = &other
	appendRows(t, env, raw, []any{"S6", "C1", 60, day(9)})
	res = runStage(t, NewFactLoad("sales", cfg), env)
	want = []string{"S2|20|2", "S3|33|2", "S4|40|-2", "S5|50|2", "S6|60|2"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts after the unknown key changed:\n%s", diff(got, want))
	}
	if res.RowsRead != 5 {
		t.Errorf("read %d rows after the lookup changed, want all 5", res.RowsRead)
	}
}

// A snapshot source changed in place (updated, deleted from, appended to) with its
// change feed on: a run reads the feed since the last load, not the snapshot, and ends
// as reading the snapshot would. A feed in which a key was in the source twice at some
// version leaves the run to read the whole snapshot (which fails on a key twice).
func TestFactLoadSnapshotSourceChangeFeed(t *testing.T) {
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	ctx := t.Context()
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C2", "Grace", "Boston", day(1)})
	runStage(t, NewSCD2Merge("customers", scd2Config()), env)
	load := NewFactLoad("sales", factConfig(false, ""))
	writeRows(t, env, raw, true, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)}, []any{"S3", "C2", 30, day(6)})
	runStage(t, load, env)
	src, err := env.openTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	// S1 moves to C2, S3 is deleted, S4 comes: three commits, one of them an append.
	if _, err := src.Update(ctx, delta.UpdateOptions{Where: expr.Eq("sale_id", "S1"), Set: map[string]any{"customer_id": "C2", "amount": int64(11)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("sale_id", "S3")}); err != nil {
		t.Fatal(err)
	}
	appendRows(t, env, raw, []any{"S4", "C9", 40, day(7)})
	res := runStage(t, load, env)
	want := []string{"S1|11|2", "S2|20|1", "S4|40|-1"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts after an update, a delete and an append:\n%s", diff(got, want))
	}
	if !noted(res, "read its change feed (4 changes of 3 facts)") || res.RowsRead != 4 {
		t.Errorf("read %d rows, notes %q: want the feed's 4 changes (S1's two images, S3's delete, S4)", res.RowsRead, res.Notes)
	}
	// S2 added again (with S5), then the one loaded deleted: the snapshot holds S2 once
	// (the new one), but at one version twice, so the run reads the snapshot. (The
	// newest change of S2 is a delete: the feed alone would delete it.)
	appendRows(t, env, raw, []any{"S2", "C1", 21, day(8)}, []any{"S5", "C1", 50, day(8)})
	if _, err := src.Delete(ctx, delta.DeleteOptions{Where: expr.And(expr.Eq("sale_id", "S2"), expr.Eq("amount", int64(20)))}); err != nil {
		t.Fatal(err)
	}
	res = runStage(t, load, env)
	want = []string{"S1|11|2", "S2|21|1", "S4|40|-1", "S5|50|1"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts after S2 was the source's twice for a version:\n%s", diff(got, want))
	}
	if !noted(res, "holds a fact key twice at some version") || res.RowsRead != 4 {
		t.Errorf("read %d rows, notes %q: want the whole snapshot's 4", res.RowsRead, res.Notes)
	}
	// S4 updated and S1 added again: the snapshot holds S1 twice, a failed run.
	if _, err := src.Update(ctx, delta.UpdateOptions{Where: expr.Eq("sale_id", "S4"), Set: map[string]any{"amount": int64(41)}}); err != nil {
		t.Fatal(err)
	}
	appendRows(t, env, raw, []any{"S1", "C1", 12, day(9)})
	before := tableVersion(t, env, facts)
	if _, err := load.Run(ctx, env); err == nil || !strings.Contains(err.Error(), "two facts with key S1") {
		t.Fatalf("a source with S1 twice: err %v, want one naming S1", err)
	}
	if v := tableVersion(t, env, facts); v != before {
		t.Errorf("the failed run committed version %d of the fact table", v)
	}
	// S1's copy deleted, and the feed's files vacuumed (no reader of it is declared):
	// the run reads the whole snapshot.
	if _, err := src.Delete(ctx, delta.DeleteOptions{Where: expr.And(expr.Eq("sale_id", "S1"), expr.Eq("amount", int64(12)))}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(time.Hour)
	zero := time.Duration(0)
	if vr, err := src.Vacuum(ctx, delta.VacuumOptions{Retain: &zero, Force: true}); err != nil || len(vr.FilesDeleted) == 0 {
		t.Fatalf("vacuum of the source: %+v, %v", vr, err)
	}
	res = runStage(t, load, env)
	want = []string{"S1|11|2", "S2|21|1", "S4|41|-1", "S5|50|1"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts after the source's feed was vacuumed:\n%s", diff(got, want))
	}
	if res.RowsRead != 4 || noted(res, "change feed") {
		t.Errorf("read %d rows, notes %q: want the whole snapshot's 4", res.RowsRead, res.Notes)
	}
	// The source overwritten: its feed (every row deleted and inserted) holds more
	// changes than a quarter of its rows, so the run reads the snapshot.
	defer func(l int64) { feedMinLimit = l }(feedMinLimit)
	feedMinLimit = 1
	writeRows(t, env, raw, true, []any{"S1", "C1", 13, day(5)}, []any{"S2", "C1", 21, day(8)}, []any{"S4", "C9", 41, day(7)}, []any{"S5", "C2", 50, day(8)})
	res = runStage(t, load, env)
	want = []string{"S1|13|1", "S2|21|1", "S4|41|-1", "S5|50|2"}
	if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
		t.Fatalf("facts after the source was overwritten:\n%s", diff(got, want))
	}
	if !noted(res, "more changes than a quarter of its rows") || res.RowsRead != 4 {
		t.Errorf("read %d rows, notes %q: want the whole snapshot's 4", res.RowsRead, res.Notes)
	}
}

// A vacuum keeps a snapshot source's change feed for the fact_load that reads it (a
// Snapshot consumer): after the source changed in place and was vacuumed with no
// retention, the next run still reads the feed alone, and its facts are exact. Without
// the consumer the same vacuum deletes the feed, and the run reads the whole snapshot.
func TestVacuumKeepsSnapshotSourceFeedForFactLoad(t *testing.T) {
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("consumer=%v", declared), func(t *testing.T) {
			staging, dim := customerTables(t)
			raw, facts := salesTables(t)
			clock := &testClock{t: d1}
			env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
			appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C2", "Grace", "Boston", day(1)})
			runStage(t, NewSCD2Merge("customers", scd2Config()), env)
			load := NewFactLoad("sales", factConfig(false, ""))
			writeRows(t, env, raw, true, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(6)}, []any{"S3", "C2", 30, day(6)})
			runStage(t, load, env)
			src, err := env.openTable(t.Context(), raw)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := src.Update(t.Context(), delta.UpdateOptions{Where: expr.Eq("sale_id", "S1"), Set: map[string]any{"customer_id": "C2", "amount": int64(11)}}); err != nil {
				t.Fatal(err)
			}
			var consumers []Consumer
			if declared {
				consumers = []Consumer{{Pipeline: "sales", Stage: "sales", Source: raw, History: facts, AppID: load.AppID(), Snapshot: true}}
			}
			clock.t = clock.t.Add(time.Hour)
			zero := Duration(0)
			vac := NewVacuum("vacuum", &VacuumConfig{TableNames: []string{raw.Name}, Retain: &zero, Force: true}, consumers)
			res := runStage(t, vac, env)
			if kept := strings.Contains(strings.Join(res.Notes, "\n"), `still needs from version 1`); kept != declared {
				t.Errorf("vacuum notes %q: want a file kept from version 1 (the one the stage last loaded) %v", res.Notes, declared)
			}
			res = runStage(t, load, env)
			want := []string{"S1|11|2", "S2|20|1", "S3|30|2"}
			if got := tableRows(t, env, facts, "sale_id", "amount", "customer_sk"); !slices.Equal(got, want) {
				t.Fatalf("facts after the update and the vacuum:\n%s", diff(got, want))
			}
			if feed := noted(res, "read its change feed (2 changes of 1 facts)"); feed != declared || declared && res.RowsRead != 2 {
				t.Errorf("read %d rows, notes %q: want the feed's 2 changes %v (else the whole snapshot)", res.RowsRead, res.Notes, declared)
			}
		})
	}
}
