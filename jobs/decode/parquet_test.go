package decode

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// parquetFile writes one record batch as a Parquet file, the Arrow schema stored in it.
func parquetFile(t *testing.T, fields []arrow.Field, fill func(b *array.RecordBuilder)) string {
	t.Helper()
	sch := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	fill(b)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sch, &buf, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func sampleParquet(t *testing.T) string {
	return parquetFile(t, []arrow.Field{
		{Name: "A", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "d", Type: &arrow.Decimal128Type{Precision: 5, Scale: 2}, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int32Builder).AppendValues([]int32{1, -2, 3}, []bool{true, true, false})
		b.Field(1).(*array.Decimal128Builder).AppendValues([]decimal128.Num{decimal128.FromI64(1250), decimal128.FromI64(-1), decimal128.FromI64(99999)}, nil)
		b.Field(2).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1768384800000, 1768384800123, 0}, nil)
		b.Field(3).(*array.LargeStringBuilder).AppendValues([]string{"x", "", "z"}, []bool{true, false, true})
		b.Field(4).(*array.Int64Builder).AppendValues([]int64{7, 8, 9}, nil)
	})
}

func TestParquet(t *testing.T) {
	data := sampleParquet(t)
	tests := []struct {
		name string
		cols []string
		opts Options
		want []string
	}{
		{"widened and rescaled", []string{"a long", "d decimal(10,3)", "ts timestamp", "s string", "missing string"},
			Options{IgnoreExtraColumns: true},
			[]string{"1|12.500|2026-01-14T10:00:00Z|x|∅", "-2|-0.010|2026-01-14T10:00:00.123Z|∅|∅", "∅|999.990|1970-01-01T00:00:00Z|z|∅"}},
		{"subset in another order, small batches", []string{"extra long", "a integer"},
			Options{IgnoreExtraColumns: true, BatchSize: 2},
			[]string{"7|1", "8|-2", "9|∅"}},
		{"skip nulls in a required column", []string{"a long!", "extra long"},
			Options{IgnoreExtraColumns: true, OnError: Skip},
			[]string{"1|7", "-2|8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Format = Parquet
			opts.Schema = schema(t, tt.cols...)
			got := decodeAll(t, data, opts)
			if got.err != nil {
				t.Fatal(got.err)
			}
			if !eqStrings(got.rows, tt.want) {
				t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tt.want))
			}
			if opts.OnError == Skip {
				want := []string{"f.csv: row 3: column a (1): null in a column that is not nullable"}
				if !eqStrings(got.bad, want) {
					t.Errorf("bad:%s\nwant:%s", showRows(got.bad), showRows(want))
				}
			}
		})
	}
}

func TestParquetErrors(t *testing.T) {
	data := sampleParquet(t)
	nanos := parquetFile(t, []arrow.Field{{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}}},
		func(b *array.RecordBuilder) {
			b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1000, 1001}, nil)
		})
	tests := []struct {
		name string
		data string
		cols []string
		want string
	}{
		{"extra column", data, []string{"a long", "d decimal(10,3)", "ts timestamp", "s string"},
			"decode f.csv: file column extra is not in the schema"},
		{"narrowing", data, []string{"a short", "d decimal(4,2)", "ts timestamp_ntz", "s long", "extra long", "req string!"},
			"decode f.csv: column a (1): file type int32 cannot be read as short (int16): narrower integer; " +
				"column d (2): file type decimal(5, 2) cannot be read as decimal(4,2) (decimal(4, 2)): 3 integer digits do not fit in 2; " +
				"column ts (3): file type timestamp[ms, tz=UTC] cannot be read as timestamp_ntz (timestamp[us]): an instant (with a time zone) is not a wall-clock timestamp_ntz; " +
				"column s (4): file type large_utf8 cannot be read as long (int64): not an integer; " +
				"column req is not nullable but missing from the file"},
		{"sub-microsecond", nanos, []string{"ts timestamp"},
			"decode f.csv: rows 1-2: column ts (1): timestamp[ns, tz=UTC] to timestamp: "},
		// arrow-go's page reader panics on this one (a nil dictionary page header).
		{"corrupt page header", pageTypeToDictionary(t, data), []string{"a integer", "d decimal(5,2)", "ts timestamp", "s string", "extra long"},
			"decode f.csv: corrupt Parquet file: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeAll(t, tt.data, Options{Format: Parquet, Schema: schema(t, tt.cols...)})
			if got.err == nil {
				t.Fatalf("no error; rows:%s", showRows(got.rows))
			}
			if !strings.HasPrefix(got.err.Error(), tt.want) {
				t.Errorf("error:\n\t%s\nwant:\n\t%s", got.err, tt.want)
			}
		})
	}
}

// pageTypeToDictionary rewrites the header of column 0's first data page to say it is a
// dictionary page (thrift compact: field 1, an i32, zigzag DATA_PAGE 0x00 →
// DICTIONARY_PAGE 0x04).
func pageTypeToDictionary(t *testing.T, data string) string {
	t.Helper()
	pf, err := file.NewParquetReader(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cc, err := pf.RowGroup(0).MetaData().ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(data)
	at := cc.DataPageOffset()
	if b[at] != 0x15 || b[at+1] != 0x00 {
		t.Fatalf("no data page header at %d: % x", at, b[at:at+2])
	}
	b[at+1] = 0x04
	return string(b)
}

func TestParquetNeedsReaderAt(t *testing.T) {
	onlyReader := struct{ io.Reader }{strings.NewReader("x")}
	_, err := NewReader(context.Background(), onlyReader, "f.parquet",
		Options{Format: Parquet, Schema: schema(t, "a long")})
	if err == nil || !strings.Contains(err.Error(), "parquet needs an io.ReaderAt and io.Seeker") {
		t.Errorf("error %v, want one saying a ReaderAt is needed", err)
	}
}
