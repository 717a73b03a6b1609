package parquet

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkColumnsStrings reads a 1M-row string column (customer names, one in 97
// null), written as delta writes it, through OpenColumns: decoded by byteArrayReader
// and, to compare, by pqarrow.
func BenchmarkColumnsStrings(b *testing.B) {
	const rows, batch = 1 << 20, 64 << 10
	sch := arrow.NewSchema([]arrow.Field{{Name: "customer", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	props, aprops := writeProps()
	var buf bytesBuffer
	fw, err := NewFlatWriter(sch, &buf, props, aprops)
	if err != nil {
		b.Fatal(err)
	}
	for start := 0; start < rows; start += batch {
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		for i := start; i < start+batch; i++ {
			if i%97 == 0 {
				sb.AppendNull()
			} else {
				sb.Append(fmt.Sprintf("customer-%07d", (i*7919)%500000))
			}
		}
		col := sb.NewArray()
		rec := array.NewRecordBatch(sch, []arrow.Array{col}, batch)
		if err := fw.WriteBuffered(rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
		col.Release()
		sb.Release()
	}
	if err := fw.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.b
	for _, bc := range []struct {
		name  string
		plain bool
	}{{"ours", true}, {"pqarrow", false}} {
		b.Run(bc.name, func(b *testing.B) {
			defer func(was bool) { plainStrings = was }(plainStrings)
			plainStrings = bc.plain
			for b.Loop() {
				fr, closeFile := openFile(b, data, memory.DefaultAllocator)
				c, err := OpenColumns(context.Background(), fr, memory.DefaultAllocator, []int{0}, nil, batch, "bench")
				if err != nil {
					b.Fatal(err)
				}
				n := int64(0)
				for c.Next() {
					n += c.RecordBatch().NumRows()
				}
				if err := c.Err(); err != nil || n != rows {
					b.Fatalf("%d rows, %v", n, err)
				}
				c.Release()
				closeFile()
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// BenchmarkBytesDict adds 100,000 distinct ids (then each again) to a string column's
// dictionary, as a row group of a key column does until its dictionary falls back.
func BenchmarkBytesDict(b *testing.B) {
	vals := make([][]byte, 100_000)
	for i := range vals {
		vals[i] = fmt.Appendf(nil, "A%09d", i*7919%1_000_003)
	}
	d := &bytesDict{}
	var idx []int32
	b.ReportAllocs()
	for b.Loop() {
		d.reset()
		idx = idx[:0]
		for range 2 {
			for _, v := range vals {
				idx = d.add(idx, v)
			}
		}
	}
}
