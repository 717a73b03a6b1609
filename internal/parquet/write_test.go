package parquet

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// writeProps are the writer settings delta writes data files with (Snappy, decimals as
// integers, statistics, dictionaries on, timestamps as INT64 microseconds).
func writeProps() (*pq.WriterProperties, pqarrow.ArrowWriterProperties) {
	RegisterFastSnappy()
	return pq.NewWriterProperties(
			pq.WithCompression(compress.Codecs.Snappy),
			pq.WithStoreDecimalAsInteger(true),
			pq.WithStats(true),
			pq.WithDictionaryDefault(true),
		), pqarrow.NewArrowWriterProperties(
			pqarrow.WithCoerceTimestamps(arrow.Microsecond),
			pqarrow.WithTruncatedTimestamps(true),
		)
}

// flatBytes writes batches with a FlatWriter, closing a row group after every rowGroup
// batches (0: one row group).
func flatBytes(t *testing.T, batches []arrow.RecordBatch, rowGroup int) []byte {
	t.Helper()
	props, aprops := writeProps()
	var buf bytes.Buffer
	fw, err := NewFlatWriter(batches[0].Schema(), &buf, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range batches {
		if err := fw.WriteBuffered(b); err != nil {
			t.Fatal(err)
		}
		if rowGroup > 0 && (i+1)%rowGroup == 0 {
			if err := fw.NewBufferedRowGroupChecked(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pqarrowBytes writes batches with pqarrow's FileWriter under the same properties, in
// one row group: the file a FlatWriter must equal.
func pqarrowBytes(t *testing.T, batches []arrow.RecordBatch) []byte {
	t.Helper()
	props, aprops := writeProps()
	var buf bytes.Buffer
	pw, err := pqarrow.NewFileWriter(batches[0].Schema(), &buf, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := pw.WriteBuffered(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkRows reads the file data back and compares its rows with batches'.
func checkRows(t *testing.T, data []byte, batches []arrow.RecordBatch) {
	t.Helper()
	got, err := readColumns(t, data, nil, 0, true, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i := range batches[0].Schema().NumFields() {
		parts := make([]arrow.Array, len(batches))
		for k, b := range batches {
			parts[k] = b.Column(i)
		}
		want, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(got.Column(i), want) {
			t.Errorf("column %s: the rows read back differ from those written", got.ColumnName(i))
		}
		want.Release()
	}
}

// TestParallelColumnsSameBytes writes the same batches with the columns of each batch
// encoded one after another and concurrently: the files are byte for byte the same
// (dictionary, plain and constant string columns, nulls, several row groups).
func TestParallelColumnsSameBytes(t *testing.T) {
	defer PoisonPageBuffers()() // (a page's block given back while still in use shows)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "key", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "file", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	var batches []arrow.RecordBatch
	for b := range 6 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for i := range 9000 {
			id := b*9000 + i
			rb.Field(0).(*array.Int64Builder).Append(int64(id))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("K-%08d", id*7919%100003))
			if id%13 == 0 {
				rb.Field(2).AppendNull()
			} else {
				rb.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("city-%d", id%500))
			}
			rb.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("s3://landing/part-%d.csv", b/2))
			rb.Field(4).(*array.Float64Builder).Append(float64(id) / 7)
			rb.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(id%17)*1000))
			rb.Field(6).(*array.BooleanBuilder).Append(id%3 == 0)
		}
		batches = append(batches, rb.NewRecordBatch())
		rb.Release()
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	write := func(parallel bool) []byte {
		t.Helper()
		if parallel {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
		} else {
			encodingBatches.Add(1 << 20) // every core counts as busy
			defer encodingBatches.Add(-1 << 20)
		}
		return flatBytes(t, batches, 2)
	}
	seq, par := write(false), write(true)
	if !bytes.Equal(seq, par) {
		t.Errorf("concurrent columns: file of %d bytes differs from the sequential one of %d bytes", len(par), len(seq))
	}
	pf, err := file.NewParquetReader(bytes.NewReader(seq))
	if err != nil {
		t.Fatal(err)
	}
	if n := pf.NumRowGroups(); n != 3 {
		t.Errorf("%d row groups, want 3", n)
	}
	pf.Close()
	checkRows(t, seq, batches)
}

// TestOwnDictionaryMatchesPqarrow writes string and binary columns whose dictionaries
// the FlatWriter builds itself and compares the file with pqarrow's from the same
// batches: batches of odd sizes, nulls, a constant column, a column with an empty value,
// and (fallback) one whose dictionary outgrows the dictionary page limit halfway, where
// arrow-go falls back to plain pages at the same value. Without a fallback the files are
// byte for byte the same; with one, arrow-go itself lists a chunk's page encodings in
// map order, so the test compares the bytes' length, every chunk's size, encodings and
// statistics, and the rows.
func TestOwnDictionaryMatchesPqarrow(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprint("fallback=", fallback), func(t *testing.T) { testOwnDictionary(t, fallback) })
	}
}

func testOwnDictionary(t *testing.T, fallback bool) {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "file", Type: arrow.BinaryTypes.String},
		{Name: "maybe_empty", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "grows", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	var batches []arrow.RecordBatch
	id := 0
	for b, n := range []int{1, 700, 3000, 1025, 5000, 9000, 20000, 20000, 333} {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for range n {
			rb.Field(0).(*array.Int64Builder).Append(int64(id))
			if id%11 == 0 {
				rb.Field(1).AppendNull()
			} else {
				rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("city-%d", id%300))
			}
			rb.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("s3://landing/part-%d.csv", b/3))
			rb.Field(3).(*array.StringBuilder).Append([]string{"x", "", "yy"}[id%3])
			if b < 5 || !fallback { // few values first (the first batch decides dictionary encoding)
				rb.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("g-%d", id%5))
			} else {
				rb.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("grown-%040d", id))
			}
			rb.Field(5).(*array.BinaryBuilder).Append([]byte{byte(id % 7), 1})
			id++
		}
		batches = append(batches, rb.NewRecordBatch())
		rb.Release()
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	ours := flatBytes(t, batches, 0)
	theirs := pqarrowBytes(t, batches)

	// chunks describes every column chunk: size, encodings per page type, statistics.
	chunks := func(raw []byte) []string {
		f, err := file.NewParquetReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.NumRowGroups() != 1 {
			t.Fatalf("%d row groups, want 1", f.NumRowGroups())
		}
		var out []string
		rg := f.MetaData().RowGroup(0)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			var encs []string
			for _, e := range cc.EncodingStats() {
				encs = append(encs, fmt.Sprint(e.PageType, "/", e.Encoding))
			}
			slices.Sort(encs)
			st, err := cc.Statistics()
			if err != nil {
				t.Fatal(err)
			}
			enc, err := st.Encode()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s: %d bytes, dictionary page %v, pages %v, nulls %d, min %q, max %q",
				cc.PathInSchema(), cc.TotalCompressedSize(), cc.HasDictionaryPage(), encs, st.NullCount(), enc.Min, enc.Max))
		}
		return out
	}
	got, want := chunks(ours), chunks(theirs)
	if !slices.Equal(got, want) {
		t.Errorf("column chunks:\n got  %q\n want %q", got, want)
	}
	if !fallback && !bytes.Equal(ours, theirs) {
		t.Errorf("file of %d bytes differs from pqarrow's %d bytes", len(ours), len(theirs))
	}
	if len(ours) != len(theirs) {
		t.Errorf("file of %d bytes, pqarrow's %d bytes", len(ours), len(theirs))
	}
	plainPages := strings.Contains(got[4], "DATA_PAGE/PLAIN")
	if plainPages != fallback {
		t.Errorf("grows: %s; want plain data pages %v", got[4], fallback)
	}
	checkRows(t, ours, batches)
}

// A record that holds one array in two columns (a stage writing one source column to two
// target columns), a slice whose null count is still unknown, is written on several
// goroutines at once (with -race: no goroutine writes the count another reads) and reads
// back as written in both columns.
func TestWriteOneArrayInTwoColumns(t *testing.T) {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range 3 * minParallelRows {
		if i%7 == 0 {
			b.AppendNull()
		} else {
			b.Append(int64(i))
		}
	}
	whole := b.NewArray()
	defer whole.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	// (rounds: the race detector sees a race of two goroutines only when their
	// accesses fall close enough in time; one round shows it one time in five)
	for round := range 20 {
		col := array.NewSlice(whole, int64(1+round), int64(whole.Len()))
		if col.Data().NullN() != array.UnknownNullCount {
			t.Fatal("the slice's null count is known already: the test shows nothing")
		}
		rec := array.NewRecordBatch(sc, []arrow.Array{col, col}, int64(col.Len()))
		got, err := readColumns(t, flatBytes(t, []arrow.RecordBatch{rec}, 0), nil, 1<<20, false, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if !array.Equal(got.Column(i), col) {
				t.Errorf("round %d: column %d reads back other than written", round, i)
			}
		}
		got.Release()
		rec.Release()
		col.Release()
	}
}
