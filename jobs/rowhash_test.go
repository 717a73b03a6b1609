package jobs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The hashes of rows encoded a column at a time equal those of rows encoded a row at a
// time, for every type hashed by column, with nulls, on sliced records, on both halves
// of a record, with the columns in either order (a short string last in its row, too);
// distinct rows hash apart.
func TestRowHasherColumnsEqualRows(t *testing.T) {
	rec := hashTestRecord(t, 3000)
	defer rec.Release()
	cols := allColumns(int(rec.NumCols()))
	reversed := slices.Clone(cols)
	slices.Reverse(reversed)
	for _, sl := range [][2]int64{{0, 3000}, {17, 2500}, {5, 2900}} {
		if sl[0] == 5 {
			cols = reversed
		}
		part := rec.NewSlice(sl[0], sl[1])
		n := int(part.NumRows())
		want := [2][]uint64{make([]uint64, n), make([]uint64, n)}
		byRow := rowHasher{cols: cols, rowTypes: true}
		byRow.hash(part, 0, n, want[0], want[1])
		got := [2][]uint64{make([]uint64, n), make([]uint64, n)}
		var h rowHasher
		h.reset(part, cols)
		if h.rowTypes {
			t.Fatal("a record of flat columns is hashed by row")
		}
		h.hash(part, 0, n/3, got[0], got[1])
		h.hash(part, n/3, n, got[0], got[1])
		seen := map[[2]uint64]int{}
		for i := range n {
			if got[0][i] != want[0][i] || got[1][i] != want[1][i] {
				t.Fatalf("slice %v row %d: by column %x%x, by row %x%x", sl, i, got[1][i], got[0][i], want[1][i], want[0][i])
			}
			if j, dup := seen[[2]uint64{got[0][i], got[1][i]}]; dup {
				t.Fatalf("slice %v rows %d and %d hash alike", sl, j, i)
			}
			seen[[2]uint64{got[0][i], got[1][i]}] = i
		}
		part.Release()
	}
}

// hashTestRecord is n distinct rows (by their first column) of every column-hashed
// type, each column with nulls at its own rows.
func hashTestRecord(t *testing.T, n int) arrow.RecordBatch {
	t.Helper()
	mem := memory.DefaultAllocator
	r := rand.New(rand.NewPCG(1, 2))
	null := func(c, i int) bool { return i > 0 && (i*7+c)%11 == 0 }
	dec := &arrow.Decimal128Type{Precision: 12, Scale: 2}
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	types := []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.String, arrow.BinaryTypes.Binary,
		arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int8,
		arrow.FixedWidthTypes.Date32, ts, arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Float32,
		arrow.FixedWidthTypes.Boolean, dec}
	fields := make([]arrow.Field, len(types))
	cols := make([]arrow.Array, len(types))
	for c, typ := range types {
		fields[c] = arrow.Field{Name: fmt.Sprintf("c%d", c), Type: typ, Nullable: true}
		b := array.NewBuilder(mem, typ)
		for i := range n {
			if c > 0 && null(c, i) {
				b.AppendNull()
				continue
			}
			switch b := b.(type) {
			case *array.StringBuilder:
				if c == 0 {
					b.Append(fmt.Sprintf("key-%d", i))
				} else {
					b.Append(string(make([]byte, r.IntN(200)))) // lengths past one varint byte
				}
			case *array.BinaryBuilder:
				b.Append([]byte{byte(r.IntN(256))})
			case *array.Int64Builder:
				b.Append(r.Int64() - r.Int64())
			case *array.Int32Builder:
				b.Append(r.Int32() - r.Int32())
			case *array.Int16Builder:
				b.Append(int16(r.IntN(1 << 16)))
			case *array.Int8Builder:
				b.Append(int8(r.IntN(256)))
			case *array.Date32Builder:
				b.Append(arrow.Date32(r.IntN(40000)))
			case *array.TimestampBuilder:
				b.Append(arrow.Timestamp(r.Int64N(1 << 52)))
			case *array.Float64Builder:
				b.Append(r.NormFloat64())
			case *array.Float32Builder:
				b.Append(float32(r.NormFloat64()))
			case *array.BooleanBuilder:
				b.Append(r.IntN(2) == 1)
			case *array.Decimal128Builder:
				b.Append(decimal128.FromI64(r.Int64N(1 << 40)))
			}
		}
		cols[c] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}
