package delta_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// pipelineRows is more than two scan batches (delta.DefaultScanBatchSize), so that a
// file of them is merged record by record, some while others are still being read.
const pipelineRows = 2*delta.DefaultScanBatchSize + 20_000

// A file read as several records is rewritten whole wherever its first change is: in
// its first record, only in its last, or in every one; unchanged rows keep their order.
func TestMergeMultiRecordFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []int64
	}{
		{"first record", []int64{3}},
		{"last record only", []int64{pipelineRows - 5}},
		{"every record", []int64{10, delta.DefaultScanBatchSize + 7, pipelineRows - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tbl := flatTable(t, mem.New(mem.Config{}), 1, pipelineRows)
			var rows []row
			var ops []string
			for _, id := range tc.ids {
				rows, ops = append(rows, row{id, "changed", "p"}), append(ops, "U")
			}
			src := sourceRecord(rows, ops)
			defer src.Release()
			res, err := tbl.Merge(ctx, upsertOptions(src))
			if err != nil {
				t.Fatal(err)
			}
			n := int64(len(tc.ids))
			if res.NumTargetRowsUpdated != n || res.NumTargetRowsCopied != pipelineRows-n || res.NumTargetFilesRemoved != 1 {
				t.Errorf("result %+v", res)
			}
			got := latestRows(t, tbl)
			if len(got) != pipelineRows {
				t.Fatalf("%d rows, want %d", len(got), pipelineRows)
			}
			for _, r := range rows {
				if !slices.Contains(got, r.String()) {
					t.Errorf("row %s missing", r)
				}
			}
			if want := (row{tc.ids[0] + 1, fmt.Sprintf("n%d", tc.ids[0]+1), "p"}); tc.ids[0]+1 < pipelineRows && !slices.Contains(got, want.String()) {
				t.Errorf("unchanged row %s missing", want)
			}
			if feed := versionChanges(t, tbl, res.Version); len(feed) != 2*len(tc.ids) {
				t.Errorf("feed has %d rows, want %d: %v", len(feed), 2*len(tc.ids), feed)
			}
		})
	}
}

// A failure while a later record is planned or applied, after earlier records of the
// file were written, fails the merge and leaves the table as it was.
func TestMergeMultiRecordFileFails(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		ids     []int64
		set     func(calls *int) map[string]any
		wantErr error
	}{
		{"assignment fails in the second record", []int64{1, delta.DefaultScanBatchSize + 1}, func(calls *int) map[string]any {
			return map[string]any{"name": expr.ExprFunc(func(rows arrow.RecordBatch) (arrow.Array, error) {
				if *calls++; *calls == 2 {
					return nil, boom
				}
				c := rows.Column(rows.Schema().FieldIndices("source.name")[0])
				c.Retain()
				return c, nil
			})}
		}, boom},
		{"duplicate source key in the last record", []int64{1, pipelineRows - 2, pipelineRows - 2}, nil, delta.ErrMultipleSourceRowsMatched},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tbl := flatTable(t, mem.New(mem.Config{}), 1, pipelineRows)
			before, _ := tbl.Snapshot(ctx)
			var rows []row
			var ops []string
			for _, id := range tc.ids {
				rows, ops = append(rows, row{id, "changed", "p"}), append(ops, "U")
			}
			src := sourceRecord(rows, ops)
			defer src.Release()
			opts := upsertOptions(src)
			if tc.set != nil {
				calls := 0
				opts.WhenMatched = []delta.MergeClause{{Action: delta.MergeUpdate, Set: tc.set(&calls)}}
			}
			_, err := tbl.Merge(ctx, opts)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			after, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.Version() != before.Version() {
				t.Errorf("version %d after a failed merge, want %d", after.Version(), before.Version())
			}
		})
	}
}
