package delta_test

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestRestoreKeepsIdentityHighWaterMark: RESTORE brings back old rows, not old identity
// values. START 100 STEP 10; two appends hand out 100..130; restoring version 1 keeps the
// high-water mark 130, so the next append gets 140, as in Delta Spark.
func TestRestoreKeepsIdentityHighWaterMark(t *testing.T) {
	ctx := context.Background()
	schema := &delta.StructType{Fields: []*delta.StructField{
		{Name: "id", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Metadata: map[string]any{
			delta.IdentityStart: int64(100), delta.IdentityStep: int64(10), delta.IdentityAllowExplicitInsert: false}},
		{Name: "name", Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true, Metadata: map[string]any{}},
	}}
	tbl, err := delta.Create(ctx, mem.New(mem.Config{}), "t", delta.CreateOptions{Schema: schema}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendNames := func(names ...string) {
		t.Helper()
		as := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, as)
		b.Field(0).(*array.StringBuilder).AppendValues(names, nil)
		if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{b.NewRecordBatch()}}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() []int64 {
		t.Helper()
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Release()
		var out []int64
		for sc.Next() {
			out = append(out, sc.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
		}
		slices.Sort(out)
		return out
	}
	appendNames("a", "b") // v1: 100, 110
	appendNames("c", "d") // v2: 120, 130
	v1 := int64(1)
	if _, _, err := tbl.Restore(ctx, delta.RestoreOptions{Version: &v1}); err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	col, _, err := delta.IdentityField(snap.Schema().Field("id"))
	if err != nil || col.HighWaterMark == nil || *col.HighWaterMark != 130 {
		t.Fatalf("high-water mark after restore = %v (err %v), want 130", col.HighWaterMark, err)
	}
	appendNames("e")
	if got, want := ids(), []int64{100, 110, 140}; !slices.Equal(got, want) {
		t.Fatalf("ids after restore and append = %v, want %v", got, want)
	}
}
