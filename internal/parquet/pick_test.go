package parquet

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// pickTestSchema adds to the string columns fixed-width ones of every kind picked
// (nullable and not, few values and many) and two read whole and gathered (booleans, a
// list).
var pickTestSchema = arrow.NewSchema(append(stringsTestSchema.Fields(),
	arrow.Field{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	arrow.Field{Name: "few", Type: arrow.PrimitiveTypes.Int64},
	arrow.Field{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
	arrow.Field{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	arrow.Field{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
), nil)

func pickTestRecord(t *testing.T, n int, seed uint64) arrow.RecordBatch {
	t.Helper()
	strs := stringsTestRecord(t, n, seed)
	defer strs.Release()
	rnd := rand.New(rand.NewPCG(seed, 11))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, pickTestSchema)
	defer rb.Release()
	for i := range n {
		for j := range strs.NumCols() {
			c := strs.Column(int(j))
			if c.IsNull(i) {
				rb.Field(int(j)).AppendNull()
				continue
			}
			switch b := rb.Field(int(j)).(type) {
			case *array.Int64Builder:
				b.Append(c.(*array.Int64).Value(i))
			case *array.StringBuilder:
				b.Append(c.(*array.String).Value(i))
			case *array.BinaryBuilder:
				b.Append(c.(*array.Binary).Value(i))
			}
		}
		null := func() bool { return rnd.IntN(7) == 0 }
		if null() {
			rb.Field(5).AppendNull()
		} else {
			rb.Field(5).(*array.Int32Builder).Append(rnd.Int32() - 1<<30)
		}
		rb.Field(6).(*array.Int64Builder).Append(int64(rnd.IntN(5)))
		if null() {
			rb.Field(7).AppendNull()
		} else {
			rb.Field(7).(*array.Date32Builder).Append(arrow.Date32(18000 + rnd.IntN(40)))
		}
		if null() {
			rb.Field(8).AppendNull()
		} else {
			rb.Field(8).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + rnd.Int64N(1e12)))
		}
		rb.Field(9).(*array.Float32Builder).Append(rnd.Float32())
		if null() {
			rb.Field(10).AppendNull()
		} else {
			rb.Field(10).(*array.Float64Builder).Append(float64(rnd.IntN(3)) / 3)
		}
		if null() {
			rb.Field(11).AppendNull()
		} else {
			rb.Field(11).(*array.BooleanBuilder).Append(rnd.IntN(2) == 0)
		}
		if null() {
			rb.Field(12).AppendNull()
		} else {
			lb := rb.Field(12).(*array.ListBuilder)
			lb.Append(true)
			for range rnd.IntN(3) {
				lb.ValueBuilder().(*array.Int64Builder).Append(rnd.Int64N(100))
			}
		}
	}
	return rb.NewRecordBatch()
}

// Picking gives, for every column and any rows of any batch, what reading the batch
// whole and gathering those rows gives: files with and without dictionaries, pages of
// several sizes, data pages v1 and v2, compressed or not, several row groups, batches
// across them, columns read in any order or skipped.
func TestPickMatchesWholeRead(t *testing.T) {
	const n = 6000
	for seed := range uint64(6) {
		rec := pickTestRecord(t, n, seed)
		rnd := rand.New(rand.NewPCG(seed, 3))
		props := []pq.WriterProperty{
			pq.WithDictionaryDefault(seed%2 == 0),
			pq.WithDataPageSize(int64(256 << rnd.IntN(8))),
			pq.WithDataPageVersion(pq.DataPageVersion(seed / 2 % 2)),
			pq.WithCompression([]compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd}[seed%3]),
		}
		if seed == 4 {
			props = append(props, pq.WithDictionaryPageSizeLimit(1024)) // dictionaries that fall back to PLAIN
		}
		data := parquetBytes(t, rec, int64(500+rnd.IntN(3000)), props...)
		alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
		for _, batch := range []int64{13, 97, 1024, n} {
			t.Run(fmt.Sprintf("seed%d/batch%d", seed, batch), func(t *testing.T) {
				want, err := readColumns(t, data, nil, batch, true, alloc)
				if err != nil {
					t.Fatal(err)
				}
				defer want.Release()
				fr, closeFile := openFile(t, data, alloc)
				defer closeFile()
				fields := make([]int, len(fr.Manifest.Fields))
				for i := range fields {
					fields[i] = i
				}
				c, err := OpenColumnsToPick(t.Context(), fr, alloc, fields, nil, batch, "f.parquet")
				if err != nil {
					t.Fatal(err)
				}
				defer c.Release()
				if c.cols[6].str == nil || c.cols[8].str == nil {
					t.Fatal("fixed-width columns are not picked by our reader")
				}
				at := int64(0)
				for {
					m := c.Begin()
					if m == 0 {
						break
					}
					for _, j := range rnd.Perm(len(fields)) {
						if rnd.IntN(6) == 0 {
							continue // skipped: the next Begin moves past it
						}
						var rows []int32
						switch rnd.IntN(4) {
						case 0: // every row
						case 1:
							rows = []int32{}
						default:
							for r := range int32(m) {
								if rnd.IntN(5) == 0 {
									rows = append(rows, r)
								}
							}
						}
						got, err := c.ReadColumn(j, rows)
						if err != nil {
							t.Fatalf("column %d: %v", j, err)
						}
						whole := array.NewSlice(want.Column(j), at, at+m)
						exp := whole
						if rows != nil {
							one := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "c", Type: whole.DataType(), Nullable: true}}, nil), []arrow.Array{whole}, m)
							k, err := arrowx.Take(t.Context(), memory.DefaultAllocator, one, rows)
							if err != nil {
								t.Fatal(err)
							}
							exp = k.Column(0)
							exp.Retain()
							k.Release()
							one.Release()
							whole.Release()
						}
						if !array.Equal(got, exp) {
							t.Fatalf("rows %d..%d of column %s, %d rows picked: got %v, want %v", at, at+m, want.ColumnName(j), len(rows), got, exp)
						}
						got.Release()
						exp.Release()
						if _, err := c.ReadColumn(j, nil); err == nil {
							t.Fatal("a column read twice in a batch is not refused")
						}
					}
					at += m
				}
				if err := c.Err(); err != nil {
					t.Fatal(err)
				}
				if at != n {
					t.Fatalf("read %d rows of %d", at, n)
				}
			})
		}
		rec.Release()
		alloc.AssertSize(t, 0)
	}
}
