package parquet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// plainSchema has a column of every type chunkWriter writes, nullable and not, and two
// it leaves to arrow-go (a float and a short; not a boolean: arrow-go leaves whatever
// its pooled buffers held in the padding bits of a boolean page's last byte).
var plainSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
	{Name: "maybe_amount", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "ntz", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "sm", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "file", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "loaded", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// plainBatches makes batches of odd sizes, sliced out of larger arrays, with nulls in
// runs and alone, all-null and null-free stretches, empty and long values.
func plainBatches(t *testing.T, seed uint64, sizes []int) []arrow.RecordBatch {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []arrow.RecordBatch
	id := 0
	for b, n := range sizes {
		pad := rng.IntN(5)
		rb := array.NewRecordBuilder(memory.DefaultAllocator, plainSchema)
		nullRate := []int{0, 3, 50, 100}[b%4] // percent
		null := func() bool { return rng.IntN(100) < nullRate }
		for range n + pad {
			rb.Field(0).(*array.Int64Builder).Append(int64(id*7919%1000003) - 500000)
			key := fmt.Sprintf("K-%09d", id)
			switch id % 97 {
			case 0:
				key = ""
			case 1:
				key = strings.Repeat("z", 5000) // over the statistics size limit
			}
			rb.Field(1).(*array.StringBuilder).Append(key)
			if null() {
				rb.Field(2).AppendNull()
			} else {
				rb.Field(2).(*array.StringBuilder).Append(fmt.Sprintf([]string{"note %d é", "s3://landing/2026/part-%05d.csv"}[id%2], rng.IntN(1000)))
			}
			rb.Field(3).(*array.Decimal128Builder).Append(decimal128.FromI64(rng.Int64N(2e9) - 1e9))
			if null() {
				rb.Field(4).AppendNull()
			} else {
				rb.Field(4).(*array.Decimal128Builder).Append(decimal128.FromI64(rng.Int64N(2e17) - 1e17))
			}
			rb.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + rng.Int64N(1e12)))
			if null() {
				rb.Field(6).AppendNull()
			} else {
				rb.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(-rng.Int64N(1e15)))
			}
			if null() {
				rb.Field(7).AppendNull()
			} else {
				rb.Field(7).(*array.Int32Builder).Append(rng.Int32() - 1<<30)
			}
			if null() {
				rb.Field(8).AppendNull()
			} else {
				rb.Field(8).(*array.Date32Builder).Append(arrow.Date32(rng.IntN(40000) - 20000))
			}
			if null() {
				rb.Field(9).AppendNull()
			} else {
				rb.Field(9).(*array.BinaryBuilder).Append([]byte{byte(id), 0, 0xff, byte(id >> 8)})
			}
			if null() {
				rb.Field(10).AppendNull()
			} else {
				rb.Field(10).(*array.Float64Builder).Append(rng.NormFloat64())
			}
			rb.Field(11).(*array.Int16Builder).Append(int16(id % 3))
			rb.Field(12).(*array.StringBuilder).Append(fmt.Sprintf("s3://landing/part-%d.csv", b/2)) // one per batch pair
			rb.Field(13).(*array.TimestampBuilder).Append(1_760_000_000_000_000)
			id++
		}
		full := rb.NewRecordBatch()
		rb.Release()
		out = append(out, full.NewSlice(int64(pad), int64(pad+n)))
		full.Release()
	}
	return out
}

// plainProps are writeProps with the dictionary off for every column (as delta turns
// it off for mostly distinct columns), and the given codec.
func plainProps(codec compress.Compression, extra ...pq.WriterProperty) (*pq.WriterProperties, pqarrow.ArrowWriterProperties) {
	RegisterFastSnappy()
	opts := append([]pq.WriterProperty{
		pq.WithCompression(codec),
		pq.WithStoreDecimalAsInteger(true),
		pq.WithStats(true),
		pq.WithDictionaryDefault(false),
	}, extra...)
	return pq.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(
		pqarrow.WithCoerceTimestamps(arrow.Microsecond), pqarrow.WithTruncatedTimestamps(true))
}

// writeBoth writes batches with a FlatWriter and with pqarrow's FileWriter under the
// same properties, closing a row group after every rowGroup batches (0: one).
func writeBoth(t *testing.T, batches []arrow.RecordBatch, rowGroup int, props *pq.WriterProperties, aprops pqarrow.ArrowWriterProperties) (ours, theirs []byte) {
	t.Helper()
	var a, b bytes.Buffer
	fw, err := NewFlatWriter(batches[0].Schema(), &a, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := pqarrow.NewFileWriter(batches[0].Schema(), &b, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range batches {
		if err := fw.WriteBuffered(rec); err != nil {
			t.Fatal(err)
		}
		if err := pw.WriteBuffered(rec); err != nil {
			t.Fatal(err)
		}
		if rowGroup > 0 && (i+1)%rowGroup == 0 && i+1 < len(batches) {
			if err := fw.NewBufferedRowGroupChecked(); err != nil {
				t.Fatal(err)
			}
			pw.NewBufferedRowGroup()
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return a.Bytes(), b.Bytes()
}

// TestChunkWritersMatchPqarrow writes columns of every type chunkWriter takes (with a
// float and a short column that arrow-go writes between them) with a FlatWriter and
// with pqarrow: the files are byte for byte the same, across pages cut mid-batch, row
// groups, nulls, sliced arrays, values over the statistics size limit, with Snappy, with
// no compression, with statistics off for a column, with small pages, and with
// dictionaries: kept, outgrowing their limit before or after a page was cut, of one
// value, of a page of nulls.
func TestChunkWritersMatchPqarrow(t *testing.T) {
	defer PoisonPageBuffers()() // (a page's block given back while still in use shows)
	for _, tc := range []struct {
		name     string
		codec    compress.Compression
		extra    []pq.WriterProperty
		sizes    []int
		rowGroup int
	}{
		{"snappy", compress.Codecs.Snappy, nil, []int{1, 700, 3000, 1025, 5000, 9000, 40000, 40000, 333}, 3},
		{"uncompressed", compress.Codecs.Uncompressed, nil, []int{1024, 2048, 70000, 17}, 2},
		{"zstd small pages no key stats", compress.Codecs.Zstd, []pq.WriterProperty{pq.WithDataPageSize(4096),
			pq.WithStatsFor("key", false), pq.WithBatchSize(100)}, []int{3000, 1, 777}, 0},
		{"one row", compress.Codecs.Snappy, nil, []int{1}, 0},
		{"dictionary", compress.Codecs.Snappy, []pq.WriterProperty{pq.WithDictionaryDefault(true)},
			[]int{1, 700, 3000, 1025, 5000, 9000, 40000, 40000, 333, 100000, 70000}, 4},
		{"dictionary small limit", compress.Codecs.Snappy, []pq.WriterProperty{pq.WithDictionaryDefault(true),
			pq.WithDictionaryPageSizeLimit(3000)}, []int{1, 700, 3000, 1025, 5000}, 2},
		{"dictionary small pages", compress.Codecs.Zstd, []pq.WriterProperty{pq.WithDictionaryDefault(true),
			pq.WithDataPageSize(2000), pq.WithDictionaryPageSizeLimit(50000)}, []int{1, 700, 3000, 1025, 5000, 20000}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches := plainBatches(t, uint64(len(tc.sizes)), tc.sizes)
			defer func() {
				for _, b := range batches {
					b.Release()
				}
			}()
			props, aprops := plainProps(tc.codec, tc.extra...)
			ours, theirs := writeBoth(t, batches, tc.rowGroup, props, aprops)
			sameFile(t, ours, theirs)
			checkRows(t, ours, batches)
		})
	}
}

// sameFile fails unless ours is theirs byte for byte, or (a dictionary fell back to
// plain pages, where arrow-go lists a chunk's page encoding counts in map order) the
// same but for that order: same length, same pages byte for byte at the same offsets,
// and the same chunk metadata with the page encoding counts as a set.
func sameFile(t *testing.T, ours, theirs []byte) {
	t.Helper()
	if bytes.Equal(ours, theirs) {
		return
	}
	if len(ours) != len(theirs) {
		t.Fatalf("file of %d bytes, pqarrow's %d bytes (first difference at %d)", len(ours), len(theirs), firstDiff(ours, theirs))
	}
	a, err := file.NewParquetReader(bytes.NewReader(ours))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := file.NewParquetReader(bytes.NewReader(theirs))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.NumRowGroups() != b.NumRowGroups() {
		t.Fatalf("%d row groups, pqarrow %d", a.NumRowGroups(), b.NumRowGroups())
	}
	fallbacks := 0
	for rg := range a.NumRowGroups() {
		ra, rb := a.MetaData().RowGroup(rg), b.MetaData().RowGroup(rg)
		for c := range ra.NumColumns() {
			ca, _ := ra.ColumnChunk(c)
			cb, _ := rb.ColumnChunk(c)
			describe := func(cc *metadata.ColumnChunkMetaData) string {
				var stats []string
				for _, e := range cc.EncodingStats() {
					stats = append(stats, fmt.Sprint(e.PageType, "/", e.Encoding))
				}
				slices.Sort(stats)
				st, _ := cc.Statistics()
				var enc metadata.EncodedStatistics
				if st != nil {
					enc, _ = st.Encode()
				}
				return fmt.Sprintf("offset %d dict %d data %d size %d/%d values %d encodings %v stats %v min %q max %q nulls %d",
					cc.FileOffset(), cc.DictionaryPageOffset(), cc.DataPageOffset(), cc.TotalCompressedSize(), cc.TotalUncompressedSize(),
					cc.NumValues(), cc.Encodings(), stats, enc.Min, enc.Max, enc.NullCount)
			}
			if da, db := describe(ca), describe(cb); da != db {
				t.Fatalf("row group %d column %s:\n ours   %s\n pqarrow %s", rg, ca.PathInSchema(), da, db)
			}
			start := ca.DataPageOffset()
			if ca.HasDictionaryPage() {
				start = ca.DictionaryPageOffset()
			}
			end := start + ca.TotalCompressedSize()
			if !bytes.Equal(ours[start:end], theirs[start:end]) {
				t.Fatalf("row group %d column %s: pages differ at byte %d", rg, ca.PathInSchema(), start+int64(firstDiff(ours[start:end], theirs[start:end])))
			}
			if len(ca.Encodings()) > 3 {
				fallbacks++
			}
		}
	}
	if fallbacks == 0 {
		t.Fatalf("files differ at byte %d without a dictionary fallback", firstDiff(ours, theirs))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestChunkWritersChosen checks which columns a chunkWriter writes: with and without a
// dictionary, every column of the types it reads straight from Arrow, not the float and
// short ones, nor (cost fallback) dictionary columns of uncompressed files.
func TestChunkWritersChosen(t *testing.T) {
	for _, tc := range []struct {
		dict  bool
		codec compress.Compression
		want  string
	}{
		{false, compress.Codecs.Snappy, "id key note amount maybe_amount ts ntz i d bin file loaded"},
		{true, compress.Codecs.Snappy, "id key note amount maybe_amount ts ntz i d bin file loaded"},
		{false, compress.Codecs.Uncompressed, "id key note amount maybe_amount ts ntz i d bin file loaded"},
		{true, compress.Codecs.Uncompressed, ""},
	} {
		props, aprops := plainProps(tc.codec, pq.WithDictionaryDefault(tc.dict))
		fw, err := NewFlatWriter(plainSchema, &bytes.Buffer{}, props, aprops)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, c := range fw.cols {
			if c.chunk != nil {
				got = append(got, fw.names[i])
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("dictionary %v, %s: chunk writers for %q, want %q", tc.dict, tc.codec, got, tc.want)
		}
	}
}

// TestChunkBlocks fills a chunk writer's blocks: a page that does not fit the last one
// starts a new one at least twice its size, and the pages held before keep their bytes
// (nothing is copied); the blocks go back to PageBuffers with the row group.
func TestChunkBlocks(t *testing.T) {
	defer PoisonPageBuffers()()
	var c chunkWriter
	var pages [][]byte
	for i, n := range []int{100, 60 << 10, 5000, 200 << 10, 1, 300 << 10} {
		blk := c.room(n)
		at := len(*blk)
		for range n {
			*blk = append(*blk, byte(i+1))
		}
		pages = append(pages, (*blk)[at:])
	}
	if len(c.blocks) != 4 {
		t.Errorf("%d blocks, want 4 (64 KiB, 128 KiB, 256 KiB, 512 KiB)", len(c.blocks))
	}
	for k := 1; k < len(c.blocks); k++ {
		if cap(c.blocks[k]) < 2*cap(c.blocks[k-1]) {
			t.Errorf("block %d of %d bytes after one of %d", k, cap(c.blocks[k]), cap(c.blocks[k-1]))
		}
	}
	for i, p := range pages {
		for _, b := range p {
			if b != byte(i+1) {
				t.Fatalf("page %d changed after later pages were added", i)
			}
		}
	}
	c.releaseBuffers()
	if len(c.blocks) != 0 {
		t.Errorf("%d blocks held after the row group", len(c.blocks))
	}
}
