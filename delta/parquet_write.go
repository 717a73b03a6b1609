package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// parquetCreatedBy is written in the files' footers.
const parquetCreatedBy = "orchestrator (github.com/orchestrator-io/orchestrator) via arrow-go parquet"

// partFile is one data file being written: its Parquet bytes on their way to the store
// (buffered, or streamed with WriteOptions.StreamFiles), the stats of its rows, and
// where it goes.
type partFile struct {
	w      *DataWriter
	rel    string // path relative to the table root, unescaped (as on storage)
	vals   []*string
	sink   dataSink
	pw     parquetEncoder
	stats  *fileStats
	rgRows int64
	// Size estimation: pqarrow reports little about a buffered row group, so the Arrow
	// size of what went in is tracked and scaled by the compression ratio seen so far.
	rgArrow      int64 // Arrow bytes in the open row group
	flushedArrow int64 // Arrow bytes of the row groups already in buf
}

// parquetWriterProps are the Spark-compatible writer settings: the chosen codec, decimals
// of precision ≤ 18 as INT32/INT64, timestamps as INT64 microseconds (never INT96), the
// standard 3-level lists and MAP groups.
//
// Dictionary encoding is on, except for top-level columns whose first batch is mostly
// distinct values (ids, amounts, timestamps): there a dictionary only costs hashing
// before the writer falls back to plain pages anyway.
func parquetWriterProps(o WriteOptions, sample arrow.RecordBatch) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties) {
	pqfile.RegisterFastSnappy()
	opts := []parquet.WriterProperty{
		parquet.WithCompression(o.Compression),
		parquet.WithStoreDecimalAsInteger(true),
		parquet.WithCreatedBy(parquetCreatedBy),
		parquet.WithAllocator(o.Allocator),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(true),
	}
	if sample != nil {
		for i, f := range sample.Schema().Fields() {
			if mostlyDistinct(sample.Column(i)) {
				opts = append(opts, parquet.WithDictionaryFor(f.Name, false))
			}
		}
	}
	props := parquet.NewWriterProperties(opts...)
	aprops := pqarrow.NewArrowWriterProperties(
		pqarrow.WithAllocator(o.Allocator),
		pqarrow.WithCoerceTimestamps(arrow.Microsecond),
		pqarrow.WithTruncatedTimestamps(true),
	)
	return props, aprops
}

// dataSink receives a data file's bytes: a fileSink (buffered, one Put of known size at
// upload) or a streamSink (a Put running while the file is written).
type dataSink interface {
	io.Writer
	// len is the number of bytes written so far.
	len() int64
	// upload makes the bytes the object at key and releases the sink.
	upload(ctx context.Context, store objectstore.Store, key string) error
	// release drops the bytes (nothing is published) and frees the sink.
	release()
}

// streamSink pipes a file's bytes into a Put of unknown size started when the file is
// opened, so that finished row groups leave memory as they are written: the fs store
// writes them to a temporary file it renames at the end, S3 sends them as a multipart
// upload (published only when complete), mem collects them. The Put's goroutine is
// owned by the sink: upload and release wait for it.
type streamSink struct {
	pw    *io.PipeWriter
	done  chan error // the Put's result, once
	size  int64
	ended bool
}

// errAbortedFile ends a streamed Put whose file is dropped, so that nothing is published.
var errAbortedFile = errors.New("data file aborted")

func newStreamSink(ctx context.Context, store objectstore.Store, key string) *streamSink {
	pr, pw := io.Pipe()
	s := &streamSink{pw: pw, done: make(chan error, 1)}
	// The upload lives until the writer closes or aborts the file, whatever becomes of the
	// ctx of the Write that opened it (a MERGE opens files on workers whose ctx ends
	// before it closes them).
	ctx = context.WithoutCancel(ctx)
	go func() {
		err := store.Put(ctx, key, pr, -1)
		pr.CloseWithError(err) // a Put that ends early fails the writer's next Write
		s.done <- err
	}()
	return s
}

func (s *streamSink) Write(p []byte) (int, error) {
	n, err := s.pw.Write(p)
	s.size += int64(n)
	return n, err
}

func (s *streamSink) len() int64 { return s.size }

func (s *streamSink) upload(context.Context, objectstore.Store, string) error {
	if s.ended {
		return errors.New("data file already ended")
	}
	s.ended = true
	s.pw.Close()
	return <-s.done
}

func (s *streamSink) release() {
	if s.ended {
		return
	}
	s.ended = true
	s.pw.CloseWithError(errAbortedFile)
	<-s.done
}

func newPartFile(ctx context.Context, w *DataWriter, dir string, vals []*string, sample arrow.RecordBatch) (*partFile, error) {
	name := fmt.Sprintf("%s-%05d-%s-c000%s.parquet", w.opts.FilePrefix, w.seq, uuid.NewString(), codecSuffix(w.opts))
	w.seq++
	rel := name
	if dir != "" {
		rel = dir + "/" + name
	}
	if w.opts.Dir != "" {
		rel = w.opts.Dir + "/" + rel
	}
	f := &partFile{w: w, rel: rel, vals: vals, stats: newFileStats(w.dataST, w.opts.indexedCols())}
	if w.opts.StreamFiles {
		f.sink = newStreamSink(ctx, w.store, joinKey(w.root, rel))
	} else {
		f.sink = &fileSink{w: w}
	}
	props, aprops := parquetWriterProps(w.opts, sample)
	var err error
	if pqfile.IsFlat(w.dataArrow) {
		f.pw, err = pqfile.NewFlatWriter(w.dataArrow, f.sink, props, aprops)
	} else {
		f.pw, err = pqarrow.NewFileWriter(w.dataArrow, f.sink, props, aprops)
	}
	if err != nil {
		f.sink.release()
		return nil, fmt.Errorf("open parquet writer: %w", err)
	}
	// String columns' min and max are the ones the writer finds for the file's
	// statistics: folding them again would compare every value twice.
	if fw, ok := f.pw.(*pqfile.FlatWriter); ok {
		for i, c := range f.stats.root.children {
			if c.leaf != nil && c.leaf.kind == kindString && i < w.dataArrow.NumFields() && c.name == w.dataArrow.Field(i).Name {
				_, _, _, c.leaf.byWriter = fw.BytesMinMax(i)
			}
		}
	}
	return f, nil
}

// parquetEncoder encodes a file's records into buffered row groups: pqarrow's FileWriter,
// or a pqfile.FlatWriter for schemas without nested columns.
type parquetEncoder interface {
	// WriteBuffered appends a record to the open row group (opening one if needed).
	WriteBuffered(rec arrow.RecordBatch) error
	// NewBufferedRowGroupChecked closes the open row group (writing it to the sink).
	NewBufferedRowGroupChecked() error
	// Close writes the last row group and the footer.
	Close() error
}

func codecSuffix(o WriteOptions) string {
	switch o.Compression.String() {
	case "UNCOMPRESSED":
		return ""
	case "SNAPPY":
		return ".snappy"
	case "GZIP":
		return ".gz"
	case "ZSTD":
		return ".zstd"
	case "LZ4_RAW", "LZ4":
		return ".lz4"
	case "BROTLI":
		return ".br"
	}
	return ""
}

// write appends rows to the current row group, starting a new one once the current one
// reaches the row group size.
func (f *partFile) write(rec arrow.RecordBatch) error {
	if f.rgRows > 0 && f.rgArrow >= f.w.opts.RowGroupSize {
		if err := f.flushRowGroup(); err != nil {
			return err
		}
	}
	// A large record's stats are folded while its columns are encoded.
	var wg sync.WaitGroup
	if rec.NumRows() >= 4096 {
		arrowx.SettleNullCounts(rec.Columns()) // (both ask the columns for their nulls)
		wg.Go(func() { f.stats.update(rec) })
	} else {
		f.stats.update(rec)
	}
	err := f.pw.WriteBuffered(rec)
	wg.Wait()
	if err != nil {
		return err
	}
	f.rgRows += rec.NumRows()
	for _, c := range rec.Columns() {
		n := approxSize(c)
		f.rgArrow += n
		f.w.rgBytes += n
	}
	return nil
}

// flushRowGroup closes the open (buffered) row group, writing it to the sink.
func (f *partFile) flushRowGroup() error {
	if err := f.pw.NewBufferedRowGroupChecked(); err != nil {
		return err
	}
	f.rgRows = 0
	f.flushedArrow += f.rgArrow
	f.w.rgBytes -= f.rgArrow
	f.rgArrow = 0
	return nil
}

// size estimates the file's size so far: bytes flushed plus the open row group's Arrow
// size scaled by the compression ratio of the flushed ones (1 before the first flush).
func (f *partFile) size() int64 {
	flushed := f.sink.len()
	if f.flushedArrow == 0 {
		return flushed + f.rgArrow
	}
	return flushed + int64(float64(f.rgArrow)*float64(flushed)/float64(f.flushedArrow))
}

// approxSize is the Arrow size in bytes of an array's values, honouring slices.
func approxSize(arr arrow.Array) int64 {
	n := int64(arr.Len())
	if n == 0 {
		return 0
	}
	switch a := arr.(type) {
	case *array.String:
		offs := a.ValueOffsets()
		return int64(offs[len(offs)-1]-offs[0]) + 4*n
	case *array.Binary:
		offs := a.ValueOffsets()
		return int64(offs[len(offs)-1]-offs[0]) + 4*n
	case *array.Struct:
		var sum int64
		for i := 0; i < a.NumField(); i++ {
			sum += approxSize(a.Field(i))
		}
		return sum + n/8
	case array.ListLike:
		child := a.ListValues()
		if child.Len() == 0 || n == 0 {
			return 4 * n
		}
		start, _ := a.ValueOffsets(0)
		_, end := a.ValueOffsets(int(n) - 1)
		return approxSize(child)*(end-start)/int64(child.Len()) + 4*n
	}
	if fw, ok := arr.DataType().(arrow.FixedWidthDataType); ok {
		return n*int64(fw.BitWidth())/8 + n/8
	}
	return 8 * n
}

// finish writes the footer, uploads the file and returns its add action.
func (f *partFile) finish(ctx context.Context) (*Add, error) {
	f.w.rgBytes -= f.rgArrow
	f.rgArrow = 0
	if err := f.pw.Close(); err != nil {
		f.sink.release()
		return nil, fmt.Errorf("close parquet writer: %w", err)
	}
	if fw, ok := f.pw.(*pqfile.FlatWriter); ok {
		for i, c := range f.stats.root.children {
			if c.leaf != nil && c.leaf.byWriter {
				mn, mx, has, _ := fw.BytesMinMax(i)
				c.leaf.setBytesRange(mn, mx, has)
			}
		}
	}
	size := f.sink.len()
	key := joinKey(f.w.root, f.rel)
	if err := f.sink.upload(ctx, f.w.store, key); err != nil {
		return nil, fmt.Errorf("upload %s: %w", key, err)
	}
	pv := make(map[string]*string, len(f.w.partIdx))
	for i, ci := range f.w.partIdx {
		pv[physicalName(f.w.schema.Fields[ci])] = f.vals[i]
	}
	return &Add{
		Path:             encodePath(f.rel),
		PartitionValues:  pv,
		Size:             size,
		ModificationTime: f.w.opts.Now().UnixMilli(),
		DataChange:       true,
		Stats:            f.stats.JSON(),
	}, nil
}

// indexedCols is the number of leaf columns that get stats (negative: all).
func (o WriteOptions) indexedCols() int {
	if o.NoColumnStats {
		return 0
	}
	return o.NumIndexedCols
}

// abort drops the file without uploading it.
func (f *partFile) abort() {
	f.w.rgBytes -= f.rgArrow
	f.rgArrow = 0
	f.pw.Close()
	f.sink.release()
}

// mostlyDistinct samples up to 4096 values of a primitive column and reports whether more
// than half of them are distinct. Other columns report false (dictionary stays on).
func mostlyDistinct(arr arrow.Array) bool {
	n := min(arr.Len(), 4096)
	if n < 64 {
		return false
	}
	distinct := 0
	switch a := arr.(type) {
	case *array.String:
		seen := make(map[string]struct{}, n)
		for i := range n {
			if !a.IsNull(i) {
				seen[a.Value(i)] = struct{}{}
			}
		}
		distinct = len(seen)
	case *array.Binary:
		seen := make(map[string]struct{}, n)
		for i := range n {
			if !a.IsNull(i) {
				seen[string(a.Value(i))] = struct{}{}
			}
		}
		distinct = len(seen)
	default:
		get, ok := arrowx.IntGetter(arr)
		if !ok {
			switch a := arr.(type) {
			case *array.Float64:
				get = func(i int) int64 { return int64(math.Float64bits(a.Value(i))) }
			case *array.Float32:
				get = func(i int) int64 { return int64(math.Float32bits(a.Value(i))) }
			case *array.Timestamp:
				get = func(i int) int64 { return int64(a.Value(i)) }
			case *array.Date32:
				get = func(i int) int64 { return int64(a.Value(i)) }
			case *array.Decimal128:
				get = func(i int) int64 { return int64(a.Value(i).LowBits()) }
			default:
				return false
			}
		}
		seen := make(map[int64]struct{}, n)
		for i := range n {
			if !arr.IsNull(i) {
				seen[get(i)] = struct{}{}
			}
		}
		distinct = len(seen)
	}
	return distinct*2 > n
}
