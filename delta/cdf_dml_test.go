package delta_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// The change feed's acceptance scenario: a table with the change feed goes through inserts,
// an UPDATE, a DELETE, a MERGE (update, insert, delete by source) and an overwrite; the
// feed over every sub-range of versions is exactly those changes, pre/post images
// included, and copied rows never appear.
func TestChangeDataFeedAfterDML(t *testing.T) {
	for _, kind := range []string{"mem", "fs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := &manualClock{t: time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)}
			cs := newClockedStore(t, kind, c)
			if cs == nil {
				return
			}
			tbl, err := delta.Create(ctx, cs.Store, "wh/dml", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
				Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, delta.Options{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64][]string{}
			r1, r2, r3, r4 := row{1, "a", "x"}, row{2, "b", "x"}, row{3, "c", "y"}, row{4, "d", "y"}
			v := commitChange(t, tbl, "WRITE", nil, []row{r1, r2, r3, r4}, nil, nil)
			want[v] = []string{change(r1, "insert", v), change(r2, "insert", v), change(r3, "insert", v), change(r4, "insert", v)}

			up, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", int64(2)), Set: map[string]any{"name": "B"}})
			if err != nil {
				t.Fatal(err)
			}
			r2b := row{2, "B", "x"}
			want[up.Version] = []string{change(r2, "update_preimage", up.Version), change(r2b, "update_postimage", up.Version)}

			del, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", int64(3))})
			if err != nil {
				t.Fatal(err)
			}
			want[del.Version] = []string{change(r3, "delete", del.Version)}

			snap, _ := tbl.Snapshot(ctx)
			r1b, r5 := row{1, "A", "x"}, row{5, "e", "z"}
			src := record(t, snap.Schema(), []row{r1b, r5}, nil)
			defer src.Release()
			m, err := tbl.Merge(ctx, delta.MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"},
				WhenMatched:            []delta.MergeClause{{Action: delta.MergeUpdate}},
				WhenNotMatched:         []delta.MergeClause{{Action: delta.MergeInsert}},
				WhenNotMatchedBySource: []delta.MergeClause{{Cond: expr.Eq("id", int64(4)), Action: delta.MergeDelete}},
			})
			if err != nil {
				t.Fatal(err)
			}
			mv := m.Version
			want[mv] = []string{change(r1, "update_preimage", mv), change(r1b, "update_postimage", mv), change(r5, "insert", mv), change(r4, "delete", mv)}

			snap, _ = tbl.Snapshot(ctx)
			r9 := row{9, "z", "x"}
			v = commitChange(t, tbl, "WRITE", fileNames(snap.Files()), []row{r9}, nil, nil)
			want[v] = []string{change(r1b, "delete", v), change(r2b, "delete", v), change(r5, "delete", v), change(r9, "insert", v)}
			latest := v

			for s := int64(0); s <= latest; s++ {
				for e := s; e <= latest; e++ {
					var exp []string
					for x := s; x <= e; x++ {
						exp = append(exp, want[x]...)
					}
					slices.Sort(exp)
					r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(s), EndVersion: ptr(e)})
					if err != nil {
						t.Fatalf("%d..%d: %v", s, e, err)
					}
					if got := ownChangeRows(t, r); !slices.Equal(got, exp) {
						t.Errorf("%d..%d:\ngot  %v\nwant %v", s, e, got, exp)
					}
				}
			}
		})
	}
}
