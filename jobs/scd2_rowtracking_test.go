package jobs

import (
	"fmt"
	"maps"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// dimRowTracking maps each dimension row ("customer_id|city") to its row id and row
// commit version.
func dimRowTracking(t *testing.T, env *Env, dim *Table) (map[string]delta.RowTracking, int64) {
	t.Helper()
	tbl, err := env.openTable(t.Context(), dim)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]delta.RowTracking{}
	err = snap.ScanRowTracking(t.Context(), func(rec arrow.RecordBatch, rt []delta.RowTracking) error {
		ids := rec.Column(snap.Schema().FieldIndex("customer_id")).(*array.String)
		cities := rec.Column(snap.Schema().FieldIndex("city")).(*array.String)
		for i, r := range rt {
			out[ids.Value(i)+"|"+cities.Value(i)] = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, snap.Version()
}

// The SCD2 stage on a row-tracking dimension keeps the row ids of the versions it
// leaves alone or closes: an untouched version keeps its row commit version, a closed
// one gets the merge's; new versions get fresh ids. With deletion vectors on and off.
func TestSCD2KeepsRowIDs(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(fmt.Sprintf("dv=%v", dv), func(t *testing.T) {
			staging, dim := customerTables(t)
			dim.Properties = maps.Clone(dim.Properties)
			dim.Properties[delta.PropEnableRowTracking] = "true"
			dim.Properties[delta.PropEnableDeletionVectors] = fmt.Sprint(dv)
			clock := &testClock{t: d1}
			env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
			stage := NewSCD2Merge("merge", scd2Config())
			appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1}, []any{"C2", "Grace", "Boston", d1})
			runStage(t, stage, env)
			before, _ := dimRowTracking(t, env, dim)
			if len(before) != 2 || before["C1|Seattle"].RowID == before["C2|Boston"].RowID {
				t.Fatalf("first load's row ids %v", before)
			}
			clock.t = d2
			appendRows(t, env, staging, []any{"C1", "Ada", "Portland", d2}, []any{"C3", "Alan", "London", d2})
			runStage(t, stage, env)
			after, v := dimRowTracking(t, env, dim)
			want := map[string]delta.RowTracking{
				"C1|Seattle": {RowID: before["C1|Seattle"].RowID, RowCommitVersion: v}, // closed
				"C2|Boston":  before["C2|Boston"],                                      // untouched
			}
			for _, k := range []string{"C1|Portland", "C3|London"} { // new versions
				r, ok := after[k]
				if !ok || r.RowCommitVersion != v || r.RowID == before["C1|Seattle"].RowID || r.RowID == before["C2|Boston"].RowID {
					t.Errorf("new version %s: %+v (present %v), want a fresh id @%d", k, r, ok, v)
				}
				want[k] = r
			}
			if !maps.Equal(after, want) {
				t.Errorf("row ids and versions\ngot  %v\nwant %v", after, want)
			}
			if after["C1|Portland"].RowID == after["C3|London"].RowID {
				t.Errorf("new versions share a row id: %v", after)
			}
		})
	}
}
