package arrowx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Gather gives the same record as Take (compute.Take) for every column kind it
// copies by hand, for columns that are slices of larger arrays, with and without
// nulls, and for index lists that are runs (a zero-copy slice), empty, or repeat rows,
// or long enough to be copied a column per goroutine.
func TestGatherRowsMatchesTake(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rnd := rand.New(rand.NewPCG(5, 6))
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true}, // through Take
		{Name: "one", Type: arrow.BinaryTypes.String, Nullable: true},                  // one value: a slice
	}, nil)
	for _, nulls := range []bool{false, true} {
		b := array.NewRecordBuilder(mem, sch)
		for i := 0; i < 300; i++ {
			if nulls && i%5 == 2 {
				for _, f := range b.Fields() {
					f.AppendNull()
				}
				continue
			}
			b.Field(0).(*array.Int64Builder).Append(rnd.Int64())
			b.Field(1).(*array.Int32Builder).Append(rnd.Int32())
			b.Field(2).(*array.Int16Builder).Append(int16(i))
			b.Field(3).(*array.Float64Builder).Append(rnd.Float64())
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(rnd.Int64()))
			b.Field(5).(*array.Date32Builder).Append(arrow.Date32(i))
			b.Field(6).(*array.Decimal128Builder).Append(decimal128.FromI64(rnd.Int64N(1e9)))
			b.Field(7).(*array.BooleanBuilder).Append(i%3 == 0)
			b.Field(8).(*array.StringBuilder).Append(fmt.Sprintf("s%d", rnd.IntN(1e6)))
			b.Field(9).(*array.BinaryBuilder).Append([]byte(fmt.Sprint(i)))
			lb := b.Field(10).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
			b.Field(11).(*array.StringBuilder).Append("/landing/day-1/accounts.csv")
		}
		full := b.NewRecordBatch()
		b.Release()
		rec := full.NewSlice(17, 290) // offsets into the buffers
		full.Release()
		n := int(rec.NumRows())
		cases := map[string][]int32{
			"empty":   {},
			"run":     {10, 11, 12, 13},
			"one":     {7},
			"repeats": {3, 3, 0, int32(n - 1), 3},
		}
		var sparse, all []int32
		for i := 0; i < n; i++ {
			all = append(all, int32(i))
			if rnd.IntN(3) > 0 {
				sparse = append(sparse, int32(i))
			}
		}
		cases["sparse"], cases["all"] = sparse, all
		var many []int32 // enough rows to copy the columns on several goroutines
		for range parallelGatherRows + 100 {
			many = append(many, int32(rnd.IntN(n)))
		}
		cases["many"] = many
		for name, rows := range cases {
			t.Run(fmt.Sprintf("nulls=%v/%s", nulls, name), func(t *testing.T) {
				ctx := context.Background()
				got, err := Gather(ctx, mem, rec, rows)
				if err != nil {
					t.Fatal(err)
				}
				defer got.Release()
				want, err := Take(ctx, mem, rec, rows)
				if err != nil {
					t.Fatal(err)
				}
				defer want.Release()
				if !array.RecordEqual(got, want) {
					t.Errorf("got\n%v\nwant\n%v", got, want)
				}
				for i, c := range got.Columns() {
					if c.NullN() != want.Column(i).NullN() {
						t.Errorf("column %s: %d nulls, want %d", got.ColumnName(i), c.NullN(), want.Column(i).NullN())
					}
				}
				// A column of one value and no nulls shares the source's bytes (as every
				// column of a run of rows does).
				if len(rows) > 1 {
					shares := got.Column(11).Data().Buffers()[2] == rec.Column(11).Data().Buffers()[2]
					if want := isConsecutive(rows) || !nulls && len(rows) <= n; shares != want {
						t.Errorf("column one shares the source's bytes: %v, want %v", shares, want)
					}
				}
			})
		}
		rec.Release()
	}
}
