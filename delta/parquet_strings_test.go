package delta

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
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

const stringsTestSchema = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"r","type":"string","nullable":false,"metadata":{}},
 {"name":"b","type":"binary","nullable":true,"metadata":{}}]}`

// stringsTestRecord has rows of short repeated strings, empty strings, nulls and now and
// then a long value.
func stringsTestRecord(t *testing.T, n int, seed uint64) arrow.RecordBatch {
	t.Helper()
	asch, err := ArrowSchema(mustSchema(t, stringsTestSchema))
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(seed, 7))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
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
	}
	return rb.NewRecordBatch()
}

// TestScanPlainStringsMatchesPqarrow writes string columns in each layout a writer may
// choose (dictionary or plain, a dictionary that overflows into plain pages, data page v1
// or v2, compressed or not, many pages and row groups, all nulls) and checks that
// byteArrayReader returns exactly what pqarrow does, at batch sizes that cut pages and
// row groups anywhere, with and without row groups pruned.
func TestScanPlainStringsMatchesPqarrow(t *testing.T) {
	ctx := context.Background()
	rec := stringsTestRecord(t, 20_000, 1)
	defer rec.Release()
	sch := mustSchema(t, stringsTestSchema)
	base := []parquet.WriterProperty{parquet.WithMaxRowGroupLength(6_000), parquet.WithDataPageSize(4 << 10), parquet.WithStats(true)}
	for _, c := range []struct {
		name   string
		props  []parquet.WriterProperty
		pqOnly bool // an encoding byteArrayReader leaves to pqarrow
	}{
		{"dictionary-v1-snappy", []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy)}, false},
		{"plain-v1-uncompressed", []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}, false},
		{"dictionary-overflow", []parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(2 << 10)}, false},
		{"v2-zstd", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithCompression(compress.Codecs.Zstd)}, false},
		{"v2-plain-uncompressed", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDictionaryDefault(false)}, false},
		{"one-big-page", []parquet.WriterProperty{parquet.WithDataPageSize(64 << 20), parquet.WithMaxRowGroupLength(1 << 20)}, false},
		{"delta-length", []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithEncodingFor("s", parquet.Encodings.DeltaLengthByteArray), parquet.WithEncodingFor("r", parquet.Encodings.DeltaLengthByteArray), parquet.WithEncodingFor("b", parquet.Encodings.DeltaLengthByteArray)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := parquetBytes(t, rec, 6_000, append(append([]parquet.WriterProperty{}, base...), c.props...)...)
			st := mem.New(mem.Config{})
			if err := st.Put(ctx, "t/f.parquet", bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			adds := []*Add{{Path: "f.parquet", Size: int64(len(data)), PartitionValues: map[string]*string{}}}

			// The fast path is taken for the string columns, unless the encoding is
			// one it leaves to pqarrow.
			pf, err := file.NewParquetReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			all := make([]int, pf.NumRowGroups())
			for rg := range all {
				all[rg] = rg
			}
			for i, name := range []string{"id", "s", "r", "b"} {
				if got, want := plainStringField(fr, i, all), name != "id" && !c.pqOnly; got != want {
					t.Errorf("plainStringField(%s) = %v, want %v", name, got, want)
				}
			}
			pf.Close()

			for _, opts := range []ScanOptions{
				{},
				{BatchSize: 7},
				{BatchSize: 1000},
				{BatchSize: 5_999},
				{Filter: Gt("id", int64(13_000))}, // row groups 0 and 1 pruned
				{Filter: Lt("id", int64(7_000)), BatchSize: 4096},
			} {
				want := readAllWith(t, st, sch, adds, opts, false)
				got := readAllWith(t, st, sch, adds, opts, true)
				if want.NumRows() == 0 || want.NumRows() != got.NumRows() {
					t.Fatalf("%+v: %d rows, pqarrow %d", opts, got.NumRows(), want.NumRows())
				}
				for i := range int(want.NumCols()) {
					if !array.Equal(got.Column(i), want.Column(i)) {
						t.Fatalf("%+v: column %s differs from pqarrow's", opts, want.ColumnName(i))
					}
				}
				got.Release()
				want.Release()
			}
		})
	}
}

// readAllWith scans the files with or without byteArrayReader and concatenates the rows.
func readAllWith(t *testing.T, st *mem.Store, sch *StructType, adds []*Add, opts ScanOptions, plain bool) arrow.RecordBatch {
	t.Helper()
	defer func(was bool) { plainStrings = was }(plainStrings)
	plainStrings = plain
	sc, err := Scan(context.Background(), st, "t", sch, nil, adds, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	recs, err := ReadAll(sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		return array.NewRecordBatch(sc.Schema(), nil, 0)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	tbl := array.NewTableFromRecords(sc.Schema(), recs)
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		c, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		cols[i] = c
	}
	return array.NewRecordBatch(sc.Schema(), cols, tbl.NumRows())
}

// parquetBytes writes rec as one Parquet file with props, rowGroup rows per row group.
func parquetBytes(t *testing.T, rec arrow.RecordBatch, rowGroup int64, props ...parquet.WriterProperty) []byte {
	t.Helper()
	tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	defer tbl.Release()
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(tbl, &buf, rowGroup, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// scanBytes scans data as the one file of a table of schema sch (nil: stringsTestSchema)
// and returns the scan's error.
func scanBytes(t *testing.T, data []byte, sch *StructType) error {
	t.Helper()
	ctx := context.Background()
	st := mem.New(mem.Config{})
	if err := st.Put(ctx, "t/f.parquet", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	adds := []*Add{{Path: "f.parquet", Size: int64(len(data)), PartitionValues: map[string]*string{}}}
	if sch == nil {
		sch = mustSchema(t, stringsTestSchema)
	}
	sc, err := Scan(ctx, st, "t", sch, nil, adds, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	_, err = ReadAll(sc)
	return err
}

// TestScanPlainStringsCorruptPage: a value length that runs past its page is an error
// naming the file and column, not a panic or a short read.
func TestScanPlainStringsCorruptPage(t *testing.T) {
	asch, err := ArrowSchema(mustSchema(t, stringsTestSchema))
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	for i := range 100 {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("value-%03d", i))
		rb.Field(2).(*array.StringBuilder).Append("r")
		rb.Field(3).AppendNull()
	}
	rec := rb.NewRecordBatch()
	rb.Release()
	defer rec.Release()
	data := parquetBytes(t, rec, 100, parquet.WithDictionaryDefault(false))
	at := bytes.Index(data, []byte("value-042"))
	if at < 4 {
		t.Fatal("value not found in the file")
	}
	copy(data[at-4:], []byte{0xff, 0xff, 0xff, 0x0f}) // its length: 256 MiB
	err = scanBytes(t, data, nil)
	if err == nil || !strings.Contains(err.Error(), "f.parquet column s") || !strings.Contains(err.Error(), "PLAIN value of 268435455 bytes") {
		t.Fatalf("err = %v, want the file, the column and the bad length", err)
	}
}

// TestRLEDecoderGarbage: any input gives values or an error, never a panic.
func TestRLEDecoderGarbage(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 3))
	dst := make([]uint32, 300)
	for range 20_000 {
		b := make([]byte, rnd.IntN(40))
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		var d rleDecoder
		d.reset(b, uint(rnd.IntN(33)))
		_ = d.read(dst[:rnd.IntN(len(dst))])
	}
}

// TestRLEDecoder decodes hand-made runs: an RLE run, a bit-packed run (with its padding
// values never read), and a run that is cut short.
func TestRLEDecoder(t *testing.T) {
	// RLE: 5 × 3 (width 2: one byte); bit-packed: one group of 8 values 0..7 at width 3.
	in := []byte{5 << 1, 3, 1<<1 | 1, 0b10001000, 0b11000110, 0b11111010}
	var d rleDecoder
	d.reset(in, 3)
	got := make([]uint32, 13)
	if err := d.read(got); err != nil {
		t.Fatal(err)
	}
	if want := []uint32{3, 3, 3, 3, 3, 0, 1, 2, 3, 4, 5, 6, 7}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if err := d.read(got[:1]); err == nil {
		t.Fatal("reading past the end: no error")
	}
}

// TestScanCorruptFilesNeverPanic flips random bytes anywhere in data files (pages,
// headers, footer) of each layout: every scan returns rows or an error naming the file,
// never a panic.
func TestScanCorruptFilesNeverPanic(t *testing.T) {
	rec := stringsTestRecord(t, 3000, 5)
	defer rec.Release()
	rnd := rand.New(rand.NewPCG(9, 9))
	for _, layout := range []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false),
		parquet.WithDataPageVersion(parquet.DataPageV2),
	} {
		good := parquetBytes(t, rec, 1000, parquet.WithMaxRowGroupLength(1000), parquet.WithDataPageSize(2<<10), layout)
		failed := 0
		for range 400 {
			data := bytes.Clone(good)
			for range 1 + rnd.IntN(4) {
				data[rnd.IntN(len(data))] = byte(rnd.Uint32())
			}
			if err := scanBytes(t, data, nil); err != nil {
				failed++
				if !strings.Contains(err.Error(), "f.parquet") {
					t.Errorf("error %q does not name the file", err)
				}
			}
		}
		if failed == 0 {
			t.Errorf("no corrupt file of %d failed to read: the corruption did not reach the data", 400)
		}
	}
}

// TestScanCorruptPageHeader: a data page whose header says it is a dictionary page
// makes arrow-go's page reader panic (a nil dictionary header). The scan returns an
// error naming the file and column instead, for a string column (our decoder), a long
// column (pqarrow) and a field of a struct (pqarrow, which would load a struct's fields
// on goroutines of its own if asked to).
func TestScanCorruptPageHeader(t *testing.T) {
	rec := stringsTestRecord(t, 100, 1)
	defer rec.Release()
	structs := mustSchema(t, `{"type":"struct","fields":[{"name":"st","type":{"type":"struct","fields":[
 {"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"b","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	asch, err := ArrowSchema(structs)
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	sb := rb.Field(0).(*array.StructBuilder)
	for i := range 100 {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int64Builder).Append(int64(i))
		sb.FieldBuilder(1).(*array.Int64Builder).Append(int64(2 * i))
	}
	srec := rb.NewRecordBatch()
	rb.Release()
	defer srec.Release()
	for _, c := range []struct {
		name string
		rec  arrow.RecordBatch
		sch  *StructType
		leaf int
	}{
		{"id", rec, nil, 0},
		{"s", rec, nil, 1},
		{"st", srec, structs, 1}, // st.b
	} {
		good := parquetBytes(t, c.rec, 100, parquet.WithDictionaryDefault(false))
		pf, err := file.NewParquetReader(bytes.NewReader(good))
		if err != nil {
			t.Fatal(err)
		}
		cc, err := pf.RowGroup(0).MetaData().ColumnChunk(c.leaf)
		pf.Close()
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Clone(good)
		at := cc.DataPageOffset()
		// The header's first field (thrift compact: 0x15, field 1 as i32) is the page
		// type, zigzag-encoded: DATA_PAGE 0x00 becomes DICTIONARY_PAGE 0x04.
		if data[at] != 0x15 || data[at+1] != 0x00 {
			t.Fatalf("column %s: no data page header at %d: % x", c.name, at, data[at:at+2])
		}
		data[at+1] = 0x04
		if err := scanBytes(t, data, c.sch); err == nil || !strings.Contains(err.Error(), "f.parquet column "+c.name+": corrupt data file") {
			t.Errorf("column %s: err = %v, want the file, the column and corrupt data file", c.name, err)
		}
	}
}
