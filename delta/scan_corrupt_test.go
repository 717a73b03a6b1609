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

// Damaged data files, scanned: every damage is an error naming the file (and the
// column, where a page is damaged), never a panic or a short read. The decoders
// themselves are internal/parquet's, tested there.

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
	return scanBytesWith(t, data, sch, ScanOptions{})
}

// scanBytesWith is scanBytes with opts.
func scanBytesWith(t *testing.T, data []byte, sch *StructType, opts ScanOptions) error {
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
	sc, err := Scan(ctx, st, "t", sch, nil, adds, opts)
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

// TestScanCorruptFilesNeverPanic flips random bytes anywhere in data files (pages,
// headers, footer) of each layout: every scan, whole or picking (its row groups read on
// goroutines of its own), returns rows or an error naming the file, never a panic.
func TestScanCorruptFilesNeverPanic(t *testing.T) {
	rec := stringsTestRecord(t, 3000, 5)
	defer rec.Release()
	rnd := rand.New(rand.NewPCG(9, 9))
	evenIDs := PickStep{Columns: []string{"id"}, Keep: func(r arrow.RecordBatch) ([]int32, error) {
		var keep []int32
		ids := r.Column(r.Schema().FieldIndices("id")[0]).(*array.Int64)
		for i := range ids.Len() {
			if ids.Value(i)%2 == 0 {
				keep = append(keep, int32(i))
			}
		}
		return keep, nil
	}}
	picking := ScanOptions{FilesOnly: true, Pick: []PickStep{evenIDs}}
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
			if err := scanBytesWith(t, data, nil, picking); err != nil && !strings.Contains(err.Error(), "f.parquet") {
				t.Errorf("picking: error %q does not name the file", err)
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
