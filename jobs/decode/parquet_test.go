package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
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
			Options{IgnoreExtraColumns: true, AllowMissingColumns: true},
			[]string{"1|12.500|2026-01-14T10:00:00Z|x|∅", "-2|-0.010|2026-01-14T10:00:00.123Z|∅|∅", "∅|999.990|1970-01-01T00:00:00Z|z|∅"}},
		{"subset in another order, small batches", []string{"extra long", "a integer"},
			Options{IgnoreExtraColumns: true, BatchSize: 2},
			[]string{"7|1", "8|-2", "9|∅"}},
		{"skip nulls in a required column", []string{"a long!", "extra long"},
			Options{IgnoreExtraColumns: true, OnError: Skip},
			[]string{"1|7", "-2|8"}},
		{"skip nulls in a required column, a batch of only bad rows", []string{"a long!", "s string"},
			Options{IgnoreExtraColumns: true, OnError: Skip, BatchSize: 1},
			[]string{"1|x", "-2|∅"}},
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
			"decode f.csv: file column extra is not declared: declare it on the table ({name: extra, type: "},
		{"narrowing", data, []string{"a short", "d decimal(4,2)", "ts timestamp_ntz", "s long", "extra long", "req string!"},
			"decode f.csv: column a (1): file type int32 cannot be read as short (int16): narrower integer; " +
				"column d (2): file type decimal(5, 2) cannot be read as decimal(4,2) (decimal(4, 2)): 3 integer digits do not fit in 2; " +
				"column ts (3): file type timestamp[ms, tz=UTC] cannot be read as timestamp_ntz (timestamp[us]): an instant (with a time zone) is not a wall-clock timestamp_ntz; " +
				"column s (4): file type large_utf8 cannot be read as long (int64): not an integer; " +
				"file lacks the declared column req (string, not nullable); add it to the file (allow_missing_columns fills only nullable columns with NULL)"},
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

// int96Parquet writes a file as Spark does by default: id (INT64) and ts (optional
// INT96: nanoseconds of the day, then the Julian day), rowGroup rows per row group;
// a nil time is a null ts.
func int96Parquet(t *testing.T, times []*time.Time, rowGroup int) string {
	t.Helper()
	root, err := pqschema.NewGroupNode("spark_schema", parquet.Repetitions.Required, pqschema.FieldList{
		pqschema.NewInt64Node("id", parquet.Repetitions.Required, -1),
		pqschema.NewInt96Node("ts", parquet.Repetitions.Optional, -1),
	}, -1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := file.NewParquetWriter(&buf, root)
	for lo := 0; lo < len(times); lo += rowGroup {
		rg, err := w.AppendRowGroupChecked()
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		var vals []parquet.Int96
		var defs []int16
		for i := lo; i < min(lo+rowGroup, len(times)); i++ {
			ids = append(ids, int64(i))
			defs = append(defs, 0)
			if ts := times[i]; ts != nil {
				const dayUS = 86400 * 1000 * 1000
				us := ts.UnixMicro()
				days := us / dayUS
				if us%dayUS < 0 {
					days--
				}
				var v parquet.Int96
				binary.LittleEndian.PutUint64(v[:8], uint64(us-days*dayUS)*1000)
				binary.LittleEndian.PutUint32(v[8:], uint32(days+2440588))
				vals, defs[len(defs)-1] = append(vals, v), 1
			}
		}
		for c, write := range []func(file.ColumnChunkWriter) error{
			func(cw file.ColumnChunkWriter) error {
				_, err := cw.(*file.Int64ColumnChunkWriter).WriteBatch(ids, nil, nil)
				return err
			},
			func(cw file.ColumnChunkWriter) error {
				_, err := cw.(*file.Int96ColumnChunkWriter).WriteBatch(vals, defs, nil)
				return err
			},
		} {
			cw, err := rg.NextColumn()
			if err == nil {
				err = write(cw)
			}
			if err == nil {
				err = cw.Close()
			}
			if err != nil {
				t.Fatalf("column %d: %v", c, err)
			}
		}
		rg.Close()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// Spark's INT96 timestamps read as microseconds, 9999-12-31 and 1600 included (past
// the nanoseconds pqarrow reads INT96 into), across row groups and batches, alone or
// with other columns.
func TestParquetInt96(t *testing.T) {
	at := func(s string) *time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &ts
	}
	times := []*time.Time{at("9999-12-31T00:00:00Z"), nil, at("1600-01-01T12:00:00.000001Z"), at("2024-02-29T12:34:56.789012Z"), at("1969-12-31T23:59:59.999999Z")}
	data := int96Parquet(t, times, 2)
	want := []string{"0|9999-12-31T00:00:00Z", "1|∅", "2|1600-01-01T12:00:00.000001Z", "3|2024-02-29T12:34:56.789012Z", "4|1969-12-31T23:59:59.999999Z"}
	for _, tc := range []struct {
		name string
		cols []string
		want []string
	}{
		{"with id", []string{"id long", "ts timestamp"}, want},
		{"alone", []string{"ts timestamp"}, func() []string {
			out := make([]string, len(want))
			for i, w := range want {
				out[i] = w[2:]
			}
			return out
		}()},
	} {
		for _, batch := range []int{1, 3, 100} {
			t.Run(fmt.Sprintf("%s batch %d", tc.name, batch), func(t *testing.T) {
				got := decodeAll(t, data, Options{Format: Parquet, Schema: schema(t, tc.cols...), BatchSize: batch, IgnoreExtraColumns: true})
				if got.err != nil {
					t.Fatal(got.err)
				}
				if !eqStrings(got.rows, tc.want) {
					t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tc.want))
				}
			})
		}
	}
}
