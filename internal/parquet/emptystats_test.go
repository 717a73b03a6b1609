package parquet

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// TestEmptyStringStatistics: an empty string is a column's least value like any other.
// Pages whose least value is "" (the first of a row group, one of only empty strings, a
// run of them) keep it, and their greatest value, in the column chunk's statistics and
// in BytesMinMax, with and without a dictionary, in one page or many.
func TestEmptyStringStatistics(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	cases := [][][]string{
		{{"", "b"}},
		{{"", ""}, {"m", "n"}},
		{{"m", "n"}, {"", ""}, {"z", "y"}},
		{{"", "", "", ""}, {"q"}},
		{{"z", ""}},
	}
	for _, dict := range []bool{false, true} {
		for _, pageSize := range []int64{1 << 20, 8} {
			for _, recs := range cases {
				name := fmt.Sprintf("dict=%v page=%d %q", dict, pageSize, recs)
				props, aprops := plainProps(compress.Codecs.Snappy, pq.WithDictionaryDefault(dict), pq.WithDataPageSize(pageSize))
				var buf bytes.Buffer
				fw, err := NewFlatWriter(sc, &buf, props, aprops)
				if err != nil {
					t.Fatal(err)
				}
				want := ""
				for _, vals := range recs {
					b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
					for _, v := range vals {
						b.Field(0).(*array.StringBuilder).Append(v)
						want = max(want, v)
					}
					rec := b.NewRecordBatch()
					b.Release()
					if err := fw.WriteBuffered(rec); err != nil {
						t.Fatal(err)
					}
					rec.Release()
				}
				if err := fw.Close(); err != nil {
					t.Fatal(err)
				}
				if mn, mx, has, ok := fw.BytesMinMax(0); !ok || !has || string(mn) != "" || string(mx) != want {
					t.Errorf("%s: BytesMinMax %q %q %v %v, want \"\" %q", name, mn, mx, has, ok, want)
				}
				r, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				cc, _ := r.MetaData().RowGroup(0).ColumnChunk(0)
				st, err := cc.Statistics()
				if err != nil {
					t.Fatal(err)
				}
				bs, _ := st.(*metadata.ByteArrayStatistics)
				if bs == nil || !bs.HasMinMax() || string(bs.Min()) != "" || string(bs.Max()) != want {
					t.Errorf("%s: chunk statistics %v, want min \"\" max %q", name, st, want)
				}
			}
		}
	}
}

// emptyStrings is a string array of n empty strings whose value buffer is nil, as a
// gather of only empty strings makes it.
func emptyStrings(n int) arrow.Array {
	offs := memory.NewBufferBytes(make([]byte, 4*(n+1)))
	return array.NewStringData(array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, offs, nil}, nil, 0, 0))
}

func TestEmptyStringStatisticsNilValues(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	for _, dict := range []bool{false, true} {
		for _, first := range []bool{false, true} {
			props, aprops := plainProps(compress.Codecs.Snappy, pq.WithDictionaryDefault(dict))
			var buf bytes.Buffer
			fw, err := NewFlatWriter(sc, &buf, props, aprops)
			if err != nil {
				t.Fatal(err)
			}
			b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
			b.Field(0).(*array.StringBuilder).AppendValues([]string{"m", "z"}, nil)
			some := b.NewRecordBatch()
			empty := array.NewRecordBatch(sc, []arrow.Array{emptyStrings(3)}, 3)
			recs := []arrow.RecordBatch{some, empty}
			if first {
				recs = []arrow.RecordBatch{empty, some}
			}
			for _, rec := range recs {
				if err := fw.WriteBuffered(rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			mn, mx, has, _ := fw.BytesMinMax(0)
			r, _ := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
			cc, _ := r.MetaData().RowGroup(0).ColumnChunk(0)
			st, _ := cc.Statistics()
			bs, _ := st.(*metadata.ByteArrayStatistics)
			if !has || string(mn) != "" || string(mx) != "z" || bs == nil || !bs.HasMinMax() || string(bs.Min()) != "" || string(bs.Max()) != "z" {
				t.Errorf("dict=%v empty first=%v: BytesMinMax %q %q %v, chunk statistics %v; want \"\" and \"z\"", dict, first, mn, mx, has, st)
			}
		}
	}
}
