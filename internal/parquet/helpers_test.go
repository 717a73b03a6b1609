package parquet

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// stringsTestSchema has a long id, a nullable and a required string, a nullable binary
// column, and a nullable string column of long runs of one value (a load's file name).
var stringsTestSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "r", Type: arrow.BinaryTypes.String},
	{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "f", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// stringsTestRecord has rows of short repeated strings, empty strings, nulls and now and
// then a long value.
func stringsTestRecord(t *testing.T, n int, seed uint64) arrow.RecordBatch {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 7))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, stringsTestSchema)
	defer rb.Release()
	word := func() string {
		switch k := rnd.IntN(100); {
		case k < 5:
			return ""
		case k < 7:
			return strings.Repeat(fmt.Sprint(k), 700+rnd.IntN(900))
		case k < 60:
			return fmt.Sprintf("city-%d", rnd.IntN(40))
		default:
			return fmt.Sprintf("customer-%07d", rnd.IntN(1_000_000))
		}
	}
	for i := range n {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		if rnd.IntN(10) == 0 {
			rb.Field(1).AppendNull()
		} else {
			rb.Field(1).(*array.StringBuilder).Append(word())
		}
		rb.Field(2).(*array.StringBuilder).Append(word())
		if rnd.IntN(3) == 0 {
			rb.Field(3).AppendNull()
		} else {
			rb.Field(3).(*array.BinaryBuilder).Append([]byte(word()))
		}
		switch {
		case i%5000 >= 4990:
			rb.Field(4).AppendNull()
		case i < n*3/5:
			rb.Field(4).(*array.StringBuilder).Append("/landing/day-1/accounts-of-the-day.csv")
		default:
			rb.Field(4).(*array.StringBuilder).Append("/landing/day-2/accounts.csv")
		}
	}
	return rb.NewRecordBatch()
}

// parquetBytes writes rec as one Parquet file with props, rowGroup rows per row group.
func parquetBytes(t testing.TB, rec arrow.RecordBatch, rowGroup int64, props ...pq.WriterProperty) []byte {
	t.Helper()
	tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	defer tbl.Release()
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(tbl, &buf, rowGroup, pq.NewWriterProperties(props...), pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// openFile opens the Parquet file data for Arrow reads as delta opens data files. The
// returned func closes it.
func openFile(t testing.TB, data []byte, mem memory.Allocator) (*pqarrow.FileReader, func()) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(pq.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{PreAllocBinaryData: true}, mem)
	if err != nil {
		pf.Close()
		t.Fatal(err)
	}
	return fr, func() { pf.Close() }
}

// readColumns reads every top-level field of the file data over rowGroups (nil: all)
// through OpenColumns in batches of batch rows, with or without byteArrayReader (plain),
// and returns the rows as one record, or the error that ended reading.
func readColumns(t testing.TB, data []byte, rowGroups []int, batch int64, plain bool, mem memory.Allocator) (arrow.RecordBatch, error) {
	t.Helper()
	defer func(was bool) { plainStrings = was }(plainStrings)
	plainStrings = plain
	fr, closeFile := openFile(t, data, mem)
	defer closeFile()
	fields := make([]int, len(fr.Manifest.Fields))
	for i := range fields {
		fields[i] = i
	}
	c, err := OpenColumns(context.Background(), fr, mem, fields, rowGroups, batch, "f.parquet")
	if err != nil {
		return nil, err
	}
	defer c.Release()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var sch *arrow.Schema
	for c.Next() {
		r := c.RecordBatch()
		r.Retain()
		recs = append(recs, r)
		sch = r.Schema()
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("no rows read")
	}
	cols := make([]arrow.Array, sch.NumFields())
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for k, r := range recs {
			parts[k] = r.Column(i)
		}
		col, err := array.Concatenate(parts, mem)
		if err != nil {
			t.Fatal(err)
		}
		defer col.Release()
		cols[i] = col
	}
	return array.NewRecordBatch(sch, cols, int64(cols[0].Len())), nil
}
