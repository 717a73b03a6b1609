package delta_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A MERGE on two key columns where some source and target rows have a NULL in the second
// one (which matches nothing without null-safe equality): every other row still finds
// its match, in whatever batch the NULL rows fall, so nothing is inserted twice.
func TestMergeCompositeKeyWithNulls(t *testing.T) {
	ctx := context.Background()
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	st, err := delta.ParseSchema(`{"type":"struct","fields":[
		{"name":"a","type":"string","nullable":true,"metadata":{}},
		{"name":"b","type":"string","nullable":true,"metadata":{}},
		{"name":"v","type":"long","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	// Row i has b NULL when i%5 == 2.
	build := func(n int, v int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		for i := range n {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("a%04d", i))
			if i%5 == 2 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("b%d", i%3))
			}
			b.Field(2).(*array.Int64Builder).Append(v)
		}
		return b.NewRecordBatch()
	}
	const n = 1000
	tbl, err := delta.Create(ctx, mem.New(mem.Config{}), "t", delta.CreateOptions{Schema: st}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	target := build(n, 1)
	defer target.Release()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{target}}); err != nil {
		t.Fatal(err)
	}
	source := build(n, 2)
	defer source.Release()
	res, err := tbl.Merge(ctx, delta.MergeOptions{
		Source:         []arrow.RecordBatch{source},
		On:             []string{"a", "b"},
		WhenMatched:    []delta.MergeClause{{Action: delta.MergeUpdate}},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
	})
	if err != nil {
		t.Fatal(err)
	}
	nulls := int64(n / 5) // rows with i%5 == 2
	if res.NumTargetRowsUpdated != n-nulls || res.NumTargetRowsInserted != nulls {
		t.Fatalf("updated %d, inserted %d; want %d updated and %d inserted (the NULL keys)", res.NumTargetRowsUpdated, res.NumTargetRowsInserted, n-nulls, nulls)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: []string{"v"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	count := map[int64]int64{}
	for sc.Next() {
		col := sc.RecordBatch().Column(0).(*array.Int64)
		for i := range col.Len() {
			count[col.Value(i)]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if want := map[int64]int64{1: nulls, 2: n}; !mapsEqual(count, want) {
		t.Fatalf("rows by v: %v, want %v", count, want)
	}
}

func mapsEqual(a, b map[int64]int64) bool {
	keys := func(m map[int64]int64) []int64 {
		var ks []int64
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if !slices.Equal(keys(a), keys(b)) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
