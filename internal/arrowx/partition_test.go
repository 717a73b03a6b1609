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

// Partition gives what Gather gives of the rows sorted by part (stable), for every
// column type it writes itself and those it gathers, with and without nulls, of
// records that are slices of larger ones, given as one record or cut in several (some
// without rows), over few and many parts (some empty), small records and records large
// enough to be worked column by column at once; and it leaks nothing.
func TestPartitionMatchesGather(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary},
		{Name: "same", Type: arrow.BinaryTypes.String},
		{Name: "d", Type: &arrow.Decimal128Type{Precision: 20, Scale: 2}, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	for round := range 40 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		n := rng.IntN(200)
		if round%4 == 3 {
			n = parallelGatherRows + rng.IntN(5000)
		}
		lead, trail := rng.IntN(70), rng.IntN(70)
		nulls := round%2 == 0
		rb := array.NewRecordBuilder(mem, sc)
		for i := range lead + n + trail {
			null := nulls && rng.IntN(5) == 0
			appendOr := func(b array.Builder, f func()) {
				if null {
					b.AppendNull()
				} else {
					f()
				}
			}
			appendOr(rb.Field(0), func() { rb.Field(0).(*array.Int64Builder).Append(rng.Int64()) })
			rb.Field(1).(*array.Int32Builder).Append(int32(i))
			appendOr(rb.Field(2), func() { rb.Field(2).(*array.Int16Builder).Append(int16(rng.IntN(1000))) })
			rb.Field(3).(*array.Uint8Builder).Append(uint8(i))
			appendOr(rb.Field(4), func() { rb.Field(4).(*array.BooleanBuilder).Append(rng.IntN(2) == 0) })
			appendOr(rb.Field(5), func() {
				v := fmt.Sprint("v", rng.IntN(1<<rng.IntN(20)))
				rb.Field(5).(*array.StringBuilder).Append(v[:min(len(v), rng.IntN(6))]) // (some empty)
			})
			rb.Field(6).(*array.BinaryBuilder).Append([]byte(fmt.Sprint(i)))
			rb.Field(7).(*array.StringBuilder).Append("one file")
			appendOr(rb.Field(8), func() { rb.Field(8).(*array.Decimal128Builder).Append(decimal128.FromI64(rng.Int64N(1e12))) })
			rb.Field(9).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
			lb := rb.Field(10).(*array.ListBuilder)
			appendOr(lb, func() {
				lb.Append(true)
				for range rng.IntN(3) {
					lb.ValueBuilder().(*array.Int32Builder).Append(rng.Int32())
				}
			})
		}
		whole := rb.NewRecordBatch()
		rb.Release()
		rec := whole.NewSlice(int64(lead), int64(lead+n))
		whole.Release()
		np := 1 + rng.IntN(300)
		parts := make([]uint16, n)
		for i := range parts {
			parts[i] = uint16(rng.IntN(np))
			if rng.IntN(3) == 0 { // (runs: some parts get rows in a row)
				parts[i] = parts[max(i-1, 0)]
			}
		}
		starts := make([]int, np+1)
		for _, p := range parts {
			starts[p+1]++
		}
		for p := 1; p <= np; p++ {
			starts[p] += starts[p-1]
		}
		// (the rows in one record, or cut in several, some without rows)
		var pieces []arrow.RecordBatch
		for lo := 0; lo < n || len(pieces) == 0; {
			hi := lo
			if round%3 != 0 {
				hi = min(n, lo+rng.IntN(n/2+2))
			} else {
				hi = n
			}
			pieces = append(pieces, rec.NewSlice(int64(lo), int64(hi)))
			lo = hi
		}
		got, err := Partition(context.Background(), mem, pieces, parts, starts)
		ReleaseRecords(pieces)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Gather(context.Background(), mem, rec, partOrder(parts, starts))
		if err != nil {
			t.Fatal(err)
		}
		for c := range sc.NumFields() {
			if !array.Equal(got.Column(c), want.Column(c)) {
				t.Fatalf("round %d (%d rows, %d parts): column %s differs from the gather\n got %v\nwant %v", round, n, np, sc.Field(c).Name, got.Column(c), want.Column(c))
			}
			if got.Column(c).NullN() != want.Column(c).NullN() {
				t.Fatalf("round %d: column %s has %d nulls, the gather %d", round, sc.Field(c).Name, got.Column(c).NullN(), want.Column(c).NullN())
			}
		}
		got.Release()
		want.Release()
		rec.Release()
	}
}

// A partition whose parts do not sum to the record's rows, or of records whose column
// types differ, is an error, not a panic or a column read as another type.
func TestPartitionWrongStarts(t *testing.T) {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2, 3}, nil)
	a := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{a}, 3)
	a.Release()
	defer rec.Release()
	if _, err := Partition(context.Background(), memory.DefaultAllocator, []arrow.RecordBatch{rec}, []uint16{0, 1, 1}, []int{0, 1, 2}); err == nil {
		t.Error("no error for parts summing to 2 of 3 rows")
	}
	ib := array.NewInt32Builder(memory.DefaultAllocator)
	ib.AppendValues([]int32{1, 2, 3}, nil)
	i32 := ib.NewArray()
	ib.Release()
	other := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32}}, nil), []arrow.Array{i32}, 3)
	i32.Release()
	defer other.Release()
	if _, err := Partition(context.Background(), memory.DefaultAllocator, []arrow.RecordBatch{rec, other}, make([]uint16, 6), []int{0, 6}); err == nil {
		t.Error("no error for an int64 column and an int32 column partitioned as one")
	}
}
