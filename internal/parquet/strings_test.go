package parquet

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// TestColumnsPlainStringsMatchPqarrow writes string columns in each layout a writer may
// choose (dictionary or plain, a dictionary that overflows into plain pages, data page v1
// or v2, compressed or not, many pages and row groups, all nulls) and checks that
// byteArrayReader returns exactly what pqarrow does, at batch sizes that cut pages and
// row groups anywhere, over all row groups and over some (as a scan that prunes row
// groups reads them).
func TestColumnsPlainStringsMatchPqarrow(t *testing.T) {
	rec := stringsTestRecord(t, 20_000, 1)
	defer rec.Release()
	base := []pq.WriterProperty{pq.WithMaxRowGroupLength(6_000), pq.WithDataPageSize(4 << 10), pq.WithStats(true)}
	for _, c := range []struct {
		name   string
		props  []pq.WriterProperty
		pqOnly bool // an encoding byteArrayReader leaves to pqarrow
	}{
		{"dictionary-v1-snappy", []pq.WriterProperty{pq.WithCompression(compress.Codecs.Snappy)}, false},
		{"plain-v1-uncompressed", []pq.WriterProperty{pq.WithDictionaryDefault(false)}, false},
		{"dictionary-overflow", []pq.WriterProperty{pq.WithDictionaryPageSizeLimit(2 << 10)}, false},
		{"v2-zstd", []pq.WriterProperty{pq.WithDataPageVersion(pq.DataPageV2), pq.WithCompression(compress.Codecs.Zstd)}, false},
		{"v2-plain-uncompressed", []pq.WriterProperty{pq.WithDataPageVersion(pq.DataPageV2), pq.WithDictionaryDefault(false)}, false},
		{"one-big-page", []pq.WriterProperty{pq.WithDataPageSize(64 << 20), pq.WithMaxRowGroupLength(1 << 20)}, false},
		{"delta-length", []pq.WriterProperty{pq.WithDictionaryDefault(false), pq.WithEncodingFor("s", pq.Encodings.DeltaLengthByteArray), pq.WithEncodingFor("r", pq.Encodings.DeltaLengthByteArray), pq.WithEncodingFor("b", pq.Encodings.DeltaLengthByteArray)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := parquetBytes(t, rec, 6_000, append(append([]pq.WriterProperty{}, base...), c.props...)...)

			// The fast path is taken for the string columns, unless the encoding is
			// one it leaves to pqarrow.
			fr, closeFile := openFile(t, data, memory.DefaultAllocator)
			all := AllRowGroups(fr)
			for i, name := range []string{"id", "s", "r", "b"} {
				if got, want := plainStringField(fr, i, all), name != "id" && !c.pqOnly; got != want {
					t.Errorf("plainStringField(%s) = %v, want %v", name, got, want)
				}
			}
			closeFile()

			for _, read := range []struct {
				rowGroups []int
				batch     int64
			}{
				{nil, 0},
				{nil, 7},
				{nil, 1000},
				{nil, 5_999},
				{nil, 64 << 10},
				{[]int{2, 3}, 0},     // row groups 0 and 1 pruned
				{[]int{0, 1}, 4096},  // the rest pruned
				{[]int{1, 3}, 2_500}, // a gap
			} {
				want, err := readColumns(t, data, read.rowGroups, read.batch, false, memory.DefaultAllocator)
				if err != nil {
					t.Fatal(err)
				}
				got, err := readColumns(t, data, read.rowGroups, read.batch, true, memory.DefaultAllocator)
				if err != nil {
					t.Fatal(err)
				}
				if want.NumRows() == 0 || want.NumRows() != got.NumRows() {
					t.Fatalf("%+v: %d rows, pqarrow %d", read, got.NumRows(), want.NumRows())
				}
				for i := range int(want.NumCols()) {
					if !array.Equal(got.Column(i), want.Column(i)) {
						t.Fatalf("%+v: column %s differs from pqarrow's", read, want.ColumnName(i))
					}
				}
				got.Release()
				want.Release()
			}
		})
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

// TestStringRunBatches: a batch whose rows all hold one dictionary value (a load's file
// name) is a slice of an array the reader keeps, so consecutive such batches share its
// bytes instead of each copying the value a row at a time; batches where the value
// changes, or that hold a null, are decoded as usual. Every batch equals pqarrow's, and
// every buffer is released (a checked allocator).
func TestStringRunBatches(t *testing.T) {
	rec := stringsTestRecord(t, 20_000, 3)
	defer rec.Release()
	data := parquetBytes(t, rec, 6_000, pq.WithMaxRowGroupLength(6_000), pq.WithDataPageSize(4<<10))
	for _, batch := range []int64{7, 1000, 4_990, 64 << 10} {
		alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
		want, err := readColumns(t, data, nil, batch, false, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readColumns(t, data, nil, batch, true, alloc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(want.NumCols()) {
			if !array.Equal(got.Column(i), want.Column(i)) {
				t.Fatalf("batch %d: column %s differs from pqarrow's", batch, want.ColumnName(i))
			}
		}
		got.Release()
		want.Release()
		alloc.AssertSize(t, 0)
	}

	// Batches of one value share the reader's bytes.
	fr, closeFile := openFile(t, data, memory.DefaultAllocator)
	defer closeFile()
	c, err := OpenColumns(t.Context(), fr, memory.DefaultAllocator, []int{4}, nil, 1000, "f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	runs, bytesOf := 0, map[*byte]bool{}
	for c.Next() {
		col := c.RecordBatch().Column(0).(*array.String)
		if col.NullN() > 0 || col.Len() < 2 || col.Value(0) != col.Value(col.Len()-1) {
			continue
		}
		runs++
		bytesOf[&col.ValueBytes()[0]] = true
	}
	// Two values (the day-1 file's name, then the day-2 file's): two arrays.
	if runs < 10 || len(bytesOf) != 2 {
		t.Errorf("%d batches of one value hold %d arrays' bytes, want 2", runs, len(bytesOf))
	}
}
