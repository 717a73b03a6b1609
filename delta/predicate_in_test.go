package delta_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestScanWithLongInList checks IN lists long enough to be matched through a set: exactly
// the listed keys come back, for string and integer columns, with nulls never matching.
func TestScanWithLongInList(t *testing.T) {
	ctx := context.Background()
	schema := &delta.StructType{Fields: []*delta.StructField{
		{Name: "k", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true, Metadata: map[string]any{}},
		{Name: "n", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: true, Metadata: map[string]any{}},
	}}
	store := mem.New(mem.Config{})
	tbl, err := delta.Create(ctx, store, "t", delta.CreateOptions{Schema: schema}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	as, _ := delta.ArrowSchema(schema)
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	for i := range 1000 {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("key-%04d", i))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	b.Field(0).AppendNull()
	b.Field(1).AppendNull()
	rec := b.NewRecordBatch()
	snap, _ := tbl.Snapshot(ctx)
	adds, err := delta.WriteRecords(ctx, store, "t", schema, nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	var keys, nums []any
	for i := 0; i < 1000; i += 10 {
		keys = append(keys, fmt.Sprintf("key-%04d", i))
		nums = append(nums, int64(i+1))
	}
	keys = append(keys, "absent")
	for _, tc := range []struct {
		name string
		pred expr.Predicate
		want func(i int64) bool
	}{
		{"strings", expr.In("k", keys...), func(i int64) bool { return i%10 == 0 }},
		{"integers", expr.In("n", nums...), func(i int64) bool { return i%10 == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := snap.Scan(ctx, delta.ScanOptions{Filter: tc.pred})
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Release()
			got := 0
			for sc.Next() {
				r := sc.RecordBatch()
				n := r.Column(1).(*array.Int64)
				for i := range int(r.NumRows()) {
					if n.IsNull(i) || !tc.want(n.Value(i)) {
						t.Fatalf("row %d (n=%v) matched %s", i, n.ValueStr(i), tc.pred)
					}
					got++
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if got != 100 {
				t.Errorf("%d rows matched, want 100", got)
			}
		})
	}
}
