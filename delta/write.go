package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Defaults for WriteOptions.
const (
	DefaultTargetFileSize = 128 << 20
	DefaultRowGroupSize   = 64 << 20
	DefaultMaxOpenFiles   = 64
	DefaultMaxMemory      = 512 << 20
)

// WriteOptions tunes how data files are written. The zero value is usable.
type WriteOptions struct {
	// TargetFileSize is the size in bytes at which a file is closed and a new one started
	// (default DefaultTargetFileSize). Files end near it, not exactly at it.
	TargetFileSize int64
	// RowGroupSize is the encoded size in bytes at which a row group is closed
	// (default DefaultRowGroupSize, capped by TargetFileSize).
	RowGroupSize int64
	// Compression of the Parquet pages; the zero value means Snappy. Use
	// compress.Codecs.Uncompressed for none.
	Compression compress.Compression
	// NoCompression writes uncompressed pages (Compression is ignored).
	NoCompression bool
	// NumIndexedCols is delta.dataSkippingNumIndexedCols: stats cover that many leaf
	// columns (0 means DefaultNumIndexedCols; negative means all).
	NumIndexedCols int
	// NoColumnStats limits stats to numRecords (delta.dataSkippingNumIndexedCols = 0).
	NoColumnStats bool
	// MaxOpenFiles bounds how many partitions are written at once; beyond it the largest
	// open file is finished early (default DefaultMaxOpenFiles). Each open file is buffered
	// in memory until it is finished, so memory is about MaxOpenFiles × TargetFileSize at
	// worst, independent of the table size.
	MaxOpenFiles int
	// MaxMemory bounds the bytes the writer buffers: open row groups (by their Arrow
	// size) and finished row groups of files not yet uploaded. Past it, the largest open
	// row group is flushed and file bytes spill to temporary files in TempDir
	// (default DefaultMaxMemory).
	MaxMemory int64
	// TempDir holds spilled files (default os.TempDir()).
	TempDir string
	// StreamFiles uploads each file while it is written, with a Put of unknown size
	// started when the file is opened, instead of buffering (or spilling) the file until
	// it is finished: MaxMemory then bounds only the open row groups. The Put runs until
	// Close or Abort ends the file, even when the ctx of the Write that opened it ends
	// first (it keeps that ctx's values). Each open file holds an upload (on S3 up
	// to 48 MiB of part buffers), so this suits few open files, e.g. an unpartitioned
	// table. An aborted file is never published (fs removes its temporary file, S3 its
	// incomplete multipart upload).
	StreamFiles bool
	// Dir is a directory under the table root for the files, e.g. "_change_data" for CDC
	// files; empty means the root itself (then the partition directories).
	Dir string
	// FilePrefix starts each file name (default "part"; change files use "cdc").
	FilePrefix string
	// Allocator for Arrow buffers (default memory.DefaultAllocator).
	Allocator memory.Allocator
	// Now is the clock for modificationTime (default time.Now).
	Now func() time.Time
}

func (o WriteOptions) withDefaults() WriteOptions {
	if o.TargetFileSize <= 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	if o.RowGroupSize <= 0 {
		o.RowGroupSize = DefaultRowGroupSize
	}
	if o.RowGroupSize > o.TargetFileSize {
		o.RowGroupSize = o.TargetFileSize
	}
	if o.Compression == compress.Codecs.Uncompressed && !o.NoCompression {
		o.Compression = compress.Codecs.Snappy
	}
	if o.NoCompression {
		o.Compression = compress.Codecs.Uncompressed
	}
	if o.NumIndexedCols == 0 {
		o.NumIndexedCols = DefaultNumIndexedCols
	}
	if o.MaxOpenFiles <= 0 {
		o.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.FilePrefix == "" {
		o.FilePrefix = "part"
	}
	return o
}

// DataWriter writes Arrow records as the Parquet data files of a Delta table. It enforces
// the table schema, splits rows by partition, rolls files at the target size, computes
// per-file stats and returns the add actions; it never commits (the caller puts the adds
// in a Transaction). A DataWriter is not safe for concurrent use.
type DataWriter struct {
	store     objectstore.Store
	root      string
	schema    *StructType // table schema
	target    *arrow.Schema
	partCols  []string
	partIdx   []int         // index of each partition column in schema
	dataIdx   []int         // indexes of the data (non-partition) columns in schema
	dataST    *StructType   // schema of what the files hold
	dataArrow *arrow.Schema // its Arrow form, physical names with column mapping
	mapped    bool          // column mapping: records are relabelled to dataArrow
	opts      WriteOptions

	open   map[string]*partFile // by partition dir
	seq    int                  // file counter
	adds   []*Add
	closed bool
	rows   int64

	memBytes int64 // file bytes held in memory by open files' sinks
	rgBytes  int64 // Arrow bytes in open row groups
}

// NewDataWriter prepares a writer for a table with the given schema and partition columns,
// rooted at root (a key prefix in store; "" for the store root).
func NewDataWriter(store objectstore.Store, root string, schema *StructType, partitionColumns []string, opts WriteOptions) (*DataWriter, error) {
	target, err := ArrowSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("table schema: %w", err)
	}
	w := &DataWriter{
		store: store, root: strings.Trim(root, "/"), schema: schema, target: target,
		partCols: partitionColumns, opts: opts.withDefaults(), open: map[string]*partFile{},
	}
	isPart := make([]bool, len(schema.Fields))
	for _, pc := range partitionColumns {
		i := schema.FieldIndex(pc)
		if i < 0 {
			return nil, fmt.Errorf("partition column %s is not in the table schema", pc)
		}
		switch schema.Fields[i].Type.(type) {
		case *StructType, *ArrayType, *MapType:
			return nil, fmt.Errorf("partition column %s has type %s, which cannot be a partition column", pc, schema.Fields[i].Type)
		}
		isPart[i] = true
		w.partIdx = append(w.partIdx, i)
	}
	w.dataST = &StructType{}
	for i, f := range schema.Fields {
		if p, ok := f.Type.(*PrimitiveType); ok && p.Name == TypeVoid {
			if isPart[i] {
				return nil, fmt.Errorf("partition column %s has type void, which cannot be a partition column", f.Name)
			}
			continue // always null: not stored, as Spark writes it
		}
		if !isPart[i] {
			w.dataIdx = append(w.dataIdx, i)
			w.dataST.Fields = append(w.dataST.Fields, f)
		}
	}
	if w.dataArrow, err = physicalArrow(w.dataST); err != nil {
		return nil, err
	}
	w.mapped = schemaMapped(schema)
	return w, nil
}

// Write adds the rows of rec. rec's columns are matched to the table's by name; see
// WriteFiles for the rules. The record is not retained after Write returns.
func (w *DataWriter) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if w.closed {
		return errors.New("write data: writer is closed")
	}
	if rec.NumRows() == 0 {
		return nil
	}
	conf, err := dschema.Conform(w.opts.Allocator, rec, w.schema, w.target)
	if err != nil {
		return fmt.Errorf("write data: %w", err)
	}
	defer conf.Release()
	w.rows += conf.NumRows()
	if len(w.partIdx) == 0 {
		data := w.project(conf)
		defer data.Release()
		return w.writeTo(ctx, "", nil, data)
	}
	return w.writePartitioned(ctx, conf)
}

// project keeps the data (non-partition) columns of a conformed record.
func (w *DataWriter) project(rec arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, len(w.dataIdx))
	for i, j := range w.dataIdx {
		cols[i] = rec.Column(j)
		if w.mapped { // nested fields named physically too
			cols[i] = dschema.Relabel(cols[i], w.dataArrow.Field(i).Type)
			defer cols[i].Release()
		}
	}
	return array.NewRecordBatch(w.dataArrow, cols, rec.NumRows())
}

// writePartitioned groups the rows by partition value and writes each group; rows of a
// group that are contiguous are sliced, otherwise gathered with Take.
func (w *DataWriter) writePartitioned(ctx context.Context, rec arrow.RecordBatch) error {
	n := int(rec.NumRows())
	type group struct {
		vals []*string
		rows []int32
		runs int
	}
	groups := map[string]*group{}
	var order []string
	prev := ""
	var kb strings.Builder
	for r := 0; r < n; r++ {
		kb.Reset()
		for _, ci := range w.partIdx {
			s, ok, err := partitionValueString(rec.Column(ci), r)
			if err != nil {
				return fmt.Errorf("write data: partition column %s: %w", w.schema.Fields[ci].Name, err)
			}
			if ok {
				kb.WriteByte(1)
				kb.WriteString(s)
			}
			kb.WriteByte(0)
		}
		key := kb.String()
		g := groups[key]
		if g == nil {
			g = &group{vals: w.partitionValues(rec, r)}
			groups[key] = g
			order = append(order, key)
		}
		if r == 0 || key != prev {
			g.runs++
		}
		prev = key
		g.rows = append(g.rows, int32(r))
	}
	data := w.project(rec)
	defer data.Release()
	for _, key := range order {
		g := groups[key]
		var part arrow.RecordBatch
		if g.runs == 1 {
			part = data.NewSlice(int64(g.rows[0]), int64(g.rows[len(g.rows)-1])+1)
		} else {
			var err error
			if part, err = arrowx.Take(ctx, w.opts.Allocator, data, g.rows); err != nil {
				return fmt.Errorf("write data: %w", err)
			}
		}
		err := w.writeTo(ctx, partitionDir(w.partColNames(), g.vals), g.vals, part)
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// partitionValues serializes row r's partition values (nil for null).
func (w *DataWriter) partitionValues(rec arrow.RecordBatch, r int) []*string {
	vals := make([]*string, len(w.partIdx))
	for k, ci := range w.partIdx {
		if s, ok, _ := partitionValueString(rec.Column(ci), r); ok {
			s = strings.Clone(s)
			vals[k] = &s
		}
	}
	return vals
}

func (w *DataWriter) partColNames() []string {
	names := make([]string, len(w.partIdx))
	for i, ci := range w.partIdx {
		names[i] = physicalName(w.schema.Fields[ci]) // a later rename leaves the directory right
	}
	return names
}

// writeChunkRows is the most rows writeTo hands a file at once: row groups and files are
// closed between chunks, so a big record (a MERGE's inserts, a whole load in one record)
// still ends in row groups near RowGroupSize and files near TargetFileSize, which is what
// bounds the memory of everything that later reads them a row group at a time.
const writeChunkRows = 64 * 1024

// writeTo appends data to the open file of partition dir, opening or rolling files.
func (w *DataWriter) writeTo(ctx context.Context, dir string, vals []*string, data arrow.RecordBatch) error {
	n := data.NumRows()
	if n <= writeChunkRows {
		return w.writeChunk(ctx, dir, vals, data)
	}
	for lo := int64(0); lo < n; lo += writeChunkRows {
		chunk := data.NewSlice(lo, min(lo+writeChunkRows, n))
		err := w.writeChunk(ctx, dir, vals, chunk)
		chunk.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// writeChunk appends data to the open file of partition dir, opening or rolling files.
func (w *DataWriter) writeChunk(ctx context.Context, dir string, vals []*string, data arrow.RecordBatch) error {
	f := w.open[dir]
	if f == nil {
		if len(w.open) >= w.opts.MaxOpenFiles {
			if err := w.finishLargest(ctx); err != nil {
				return err
			}
		}
		var err error
		if f, err = newPartFile(ctx, w, dir, vals, data); err != nil {
			return fmt.Errorf("write data: %w", err)
		}
		w.open[dir] = f
	}
	if err := f.write(data); err != nil {
		return fmt.Errorf("write data file %s: %w", f.rel, err)
	}
	for w.rgBytes > w.opts.MaxMemory/2 {
		if err := w.flushLargestRowGroup(); err != nil {
			return err
		}
	}
	if f.size() >= w.opts.TargetFileSize {
		delete(w.open, dir)
		return w.finish(ctx, f)
	}
	return nil
}

// flushLargestRowGroup writes out the biggest open row group to bound memory.
func (w *DataWriter) flushLargestRowGroup() error {
	var big *partFile
	for _, f := range w.open {
		if big == nil || f.rgArrow > big.rgArrow {
			big = f
		}
	}
	if big == nil || big.rgArrow == 0 {
		w.rgBytes = 0
		return nil
	}
	if err := big.flushRowGroup(); err != nil {
		return fmt.Errorf("write data file %s: %w", big.rel, err)
	}
	return nil
}

func (w *DataWriter) finishLargest(ctx context.Context) error {
	var big string
	var bigSize int64 = -1
	for dir, f := range w.open {
		if s := f.size(); s > bigSize {
			big, bigSize = dir, s
		}
	}
	f := w.open[big]
	delete(w.open, big)
	return w.finish(ctx, f)
}

// finish closes a file, uploads it and records its add action.
func (w *DataWriter) finish(ctx context.Context, f *partFile) error {
	add, err := f.finish(ctx)
	if err != nil {
		return fmt.Errorf("write data file %s: %w", f.rel, err)
	}
	w.adds = append(w.adds, add)
	return nil
}

// Close finishes every open file and returns the add actions of all files written, in
// the order they were finished. It is safe to call once; a failed writer may leave
// uploaded files behind, which are harmless orphans until VACUUM (never committed).
func (w *DataWriter) Close(ctx context.Context) ([]*Add, error) {
	if w.closed {
		return nil, errors.New("write data: writer is closed")
	}
	w.closed = true
	for len(w.open) > 0 {
		if err := w.finishLargest(ctx); err != nil {
			return nil, err
		}
	}
	return w.adds, nil
}

// Abort drops the files still open (their bytes are never uploaded) and closes the
// writer. Files already uploaded stay as harmless orphans. Use it when giving up.
func (w *DataWriter) Abort() {
	w.closed = true
	for dir, f := range w.open {
		f.abort()
		delete(w.open, dir)
	}
}

// Rows is the number of rows written so far.
func (w *DataWriter) Rows() int64 { return w.rows }

// WriteFiles writes every record of rdr as data files of a table (schema, partition
// columns) under root in store and returns their add actions (dataChange true, with
// stats). It does not commit. Schema rules: columns match by name ignoring case; a column
// missing from the records is filled with nulls if nullable, else rejected; a column the
// table lacks, a type mismatch (the error names the column and both types) or a null in a
// non-nullable column is rejected. Partition columns become Hive-style directories and are
// not stored in the files; an empty string partition value is written as null, as Spark
// does.
func WriteFiles(ctx context.Context, store objectstore.Store, root string, schema *StructType, partitionColumns []string, rdr array.RecordReader, opts WriteOptions) ([]*Add, error) {
	w, err := NewDataWriter(store, root, schema, partitionColumns, opts)
	if err != nil {
		return nil, err
	}
	for rdr.Next() {
		if err := ctx.Err(); err != nil {
			w.Abort()
			return nil, err
		}
		if err := w.Write(ctx, rdr.RecordBatch()); err != nil {
			w.Abort()
			return nil, err
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		w.Abort()
		return nil, fmt.Errorf("write data: read input: %w", err)
	}
	adds, err := w.Close(ctx)
	if err != nil {
		w.Abort()
	}
	return adds, err
}

// WriteRecords is WriteFiles over a slice of records.
func WriteRecords(ctx context.Context, store objectstore.Store, root string, schema *StructType, partitionColumns []string, recs []arrow.RecordBatch, opts WriteOptions) ([]*Add, error) {
	w, err := NewDataWriter(store, root, schema, partitionColumns, opts)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if err := w.Write(ctx, r); err != nil {
			w.Abort()
			return nil, err
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		w.Abort()
	}
	return adds, err
}

// joinKey joins the table root and a relative path into a store key.
func joinKey(root, rel string) string {
	if root == "" {
		return rel
	}
	return root + "/" + rel
}
