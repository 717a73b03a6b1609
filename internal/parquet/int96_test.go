package parquet

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// int96Of encodes t as Spark does: nanoseconds of the day, then the Julian day.
func int96Of(t time.Time) pq.Int96 {
	us := t.UnixMicro()
	days := us / microsPerDay
	if us%microsPerDay < 0 {
		days--
	}
	var v pq.Int96
	binary.LittleEndian.PutUint64(v[:8], uint64(us-days*microsPerDay)*1000)
	binary.LittleEndian.PutUint32(v[8:], uint32(days+julianUnixEpoch))
	return v
}

// int96File writes a file of id (INT64) and ts (optional INT96) columns, as Spark does
// by default, rowGroup rows per row group; a zero time is a null ts.
func int96File(t *testing.T, times []time.Time, rowGroup int, dict bool) []byte {
	t.Helper()
	root, err := schema.NewGroupNode("spark_schema", pq.Repetitions.Required, schema.FieldList{
		schema.NewInt64Node("id", pq.Repetitions.Required, -1),
		schema.NewInt96Node("ts", pq.Repetitions.Optional, -1),
	}, -1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := file.NewParquetWriter(&buf, root, file.WithWriterProps(pq.NewWriterProperties(
		pq.WithDictionaryDefault(dict), pq.WithCompression(compress.Codecs.Snappy), pq.WithDataPageSize(256))))
	for lo := 0; lo < len(times); lo += rowGroup {
		hi := min(lo+rowGroup, len(times))
		rg, err := w.AppendRowGroupChecked()
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, 0, hi-lo)
		var vals []pq.Int96
		var defs []int16
		for i := lo; i < hi; i++ {
			ids = append(ids, int64(i))
			if times[i].IsZero() {
				defs = append(defs, 0)
				continue
			}
			defs = append(defs, 1)
			vals = append(vals, int96Of(times[i]))
		}
		cw, err := rg.NextColumn()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cw.(*file.Int64ColumnChunkWriter).WriteBatch(ids, nil, nil); err != nil {
			t.Fatal(err)
		}
		cw.Close()
		if cw, err = rg.NextColumn(); err != nil {
			t.Fatal(err)
		}
		if _, err := cw.(*file.Int96ColumnChunkWriter).WriteBatch(vals, defs, nil); err != nil {
			t.Fatal(err)
		}
		cw.Close()
		rg.Close()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// INT96 timestamps read as microseconds, across the whole range Spark writes: an open
// SCD2 version's 9999-12-31 end, dates before 1582 and before 1677 (past what pqarrow's
// nanoseconds hold), microsecond precision, nulls; in dictionary and plain pages, over
// row groups and batches of any size.
func TestInt96Timestamps(t *testing.T) {
	var times []time.Time
	base := []time.Time{
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		{},
		time.Date(1500, 6, 1, 12, 0, 0, 1000, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(2024, 2, 29, 12, 34, 56, 789012000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i := range 1000 {
		times = append(times, base[i%len(base)].Add(time.Duration(i%3)*time.Microsecond))
		if base[i%len(base)].IsZero() {
			times[i] = time.Time{}
		}
	}
	for _, dict := range []bool{true, false} {
		data := int96File(t, times, 300, dict)
		fr, closeFile := openFile(t, data, memory.DefaultAllocator)
		if !IsInt96(fr, 1) || IsInt96(fr, 0) {
			t.Errorf("IsInt96: ts %v, id %v; want true, false", IsInt96(fr, 1), IsInt96(fr, 0))
		}
		closeFile()
		for _, batch := range []int64{7, 4096} {
			alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
			rec, err := readColumns(t, data, nil, batch, true, alloc)
			if err != nil {
				t.Fatal(err)
			}
			if !arrow.TypeEqual(rec.Schema().Field(1).Type, Int96Type()) {
				t.Errorf("ts read as %s, want %s", rec.Schema().Field(1).Type, Int96Type())
			}
			ts := rec.Column(1).(*array.Timestamp)
			if rec.NumRows() != int64(len(times)) {
				t.Fatalf("dict %v batch %d: %d rows, want %d", dict, batch, rec.NumRows(), len(times))
			}
			for i, want := range times {
				switch {
				case want.IsZero() != ts.IsNull(i):
					t.Fatalf("dict %v batch %d row %d: null %v, want %v", dict, batch, i, ts.IsNull(i), want.IsZero())
				case !want.IsZero() && int64(ts.Value(i)) != want.UnixMicro():
					t.Fatalf("dict %v batch %d row %d: %v, want %v", dict, batch, i, time.UnixMicro(int64(ts.Value(i))).UTC(), want)
				}
			}
			rec.Release()
			alloc.AssertSize(t, 0) // every page released
		}
	}
}

// An INT96 value whose nanoseconds exceed a day is corrupt: an error naming the column.
func TestInt96Corrupt(t *testing.T) {
	good := int96Of(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	data := int96File(t, []time.Time{time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}, 10, false)
	i := bytes.Index(data, good[:])
	if i < 0 {
		t.Fatal("value not found in the file (compressed?)")
	}
	binary.LittleEndian.PutUint64(data[i:], uint64(nanosPerDay96))
	_, err := readColumns(t, data, nil, 0, true, memory.DefaultAllocator)
	if err == nil || !strings.Contains(err.Error(), "f.parquet column ts") || !strings.Contains(err.Error(), "nanoseconds in a day") {
		t.Fatalf("err = %v, want a corrupt ts column", err)
	}
}
