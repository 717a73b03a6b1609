package parquet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// IsFlat reports whether every column of the schema is a single leaf (no struct, list or
// map), which a FlatWriter handles.
func IsFlat(sc *arrow.Schema) bool {
	for _, f := range sc.Fields() {
		switch f.Type.ID() {
		case arrow.STRUCT, arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.MAP,
			arrow.DICTIONARY, arrow.EXTENSION, arrow.SPARSE_UNION, arrow.DENSE_UNION,
			arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.RUN_END_ENCODED:
			return false
		}
	}
	return true
}

// FlatWriter writes the Parquet file of a flat schema, the file pqarrow's FileWriter
// writes from the same batches under the same properties (same schema conversion,
// encodings, pages, statistics and metadata; see the package's invariants), faster:
//   - columns of the common types are encoded by a chunkWriter (chunk.go) straight from
//     the Arrow buffers, with or without a dictionary;
//   - every other column goes through arrow-go's column writer, as pqarrow's would;
//   - the columns of a batch are encoded concurrently when cores are idle
//     (write_parallel.go): each column chunk of a row group has its own encoder and
//     pages, written to the file in column order when the row group closes, so the
//     bytes do not depend on the order the columns finish in.
//
// What arrow-go's file writer writes around the row groups (magic, row group and chunk
// metadata, footer) it writes with arrow-go's page writer and metadata builders.
// Encryption, page indexes, bloom filters and data page v2 are not supported.
type FlatWriter struct {
	sink   *tellWriter
	props  *pq.WriterProperties
	schema *schema.Schema
	meta   *metadata.FileMetaDataBuilder
	mem    memory.Allocator
	aprop  pqarrow.ArrowWriterProperties
	names  []string
	types  []arrow.DataType
	cols   []flatColumn
	rg     *metadata.RowGroupMetaDataBuilder // the open row group; nil between row groups
	rgNum  int16                             // row groups started
	rgRows int64                             // rows in the open row group
	err    error                             // the first error; the writer is spent
	closed bool
}

// flatColumn is one column's state and scratch, touched only by the goroutine encoding
// that column's part of a batch.
type flatColumn struct {
	nullable bool
	chunk    *chunkWriter // ours; nil: arrow-go's column writer (cw)
	// arrow-go's column writer of the open row group, and what feeds it.
	cw   file.ColumnChunkWriter
	ctx  context.Context // pqarrow's write context: properties, scratch
	defs []int16         // definition levels scratch (1 = value, 0 = null)
}

// BytesMinMax returns the least and greatest values (bytewise) of string or binary
// column i in the row groups written so far, the statistics the file's footer has for
// it: ok is false when the writer does not keep them for the column (another type, no
// statistics, a column arrow-go's writer encodes), has when the column had a value.
func (fw *FlatWriter) BytesMinMax(i int) (min, max []byte, has, ok bool) {
	c := fw.cols[i].chunk
	if c == nil || c.kind != kindBytes || !c.stats {
		return nil, nil, false, false
	}
	return c.fileMin, c.fileMax, c.fileHas, true
}

// tellWriter counts the bytes written to w: arrow-go's page and metadata writers ask
// where they are.
type tellWriter struct {
	w io.Writer
	n int64
}

func (t *tellWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	return n, err
}

func (t *tellWriter) Tell() int64 { return t.n }

var errUnsupportedProps = errors.New("parquet: flat writer: encryption, page indexes, bloom filters and data page v2 are not supported")

func NewFlatWriter(sc *arrow.Schema, sink io.Writer, props *pq.WriterProperties, aprops pqarrow.ArrowWriterProperties) (*FlatWriter, error) {
	pqschema, err := pqarrow.ToParquet(sc, props, aprops)
	if err != nil {
		return nil, err
	}
	if props.FileEncryptionProperties() != nil || props.PageIndexEnabled() || props.DataPageVersion() != pq.DataPageV1 {
		return nil, errUnsupportedProps
	}
	meta := make(metadata.KeyValueMetadata, 0) // as pqarrow: an empty list, not none
	for i, k := range sc.Metadata().Keys() {
		meta.Append(k, sc.Metadata().Values()[i])
	}
	fw := &FlatWriter{sink: &tellWriter{w: sink}, props: props, schema: pqschema, mem: props.Allocator(), aprop: aprops}
	fw.meta = metadata.NewFileMetadataBuilder(pqschema, props, meta)
	for i, f := range sc.Fields() {
		descr := pqschema.Column(i)
		if props.BloomFilterEnabledFor(descr.Path()) {
			return nil, errUnsupportedProps
		}
		chunk, err := newChunkWriter(f, descr, props)
		if err != nil {
			return nil, err
		}
		fw.names = append(fw.names, f.Name)
		fw.types = append(fw.types, f.Type)
		fw.cols = append(fw.cols, flatColumn{nullable: f.Nullable, chunk: chunk,
			ctx: pqarrow.NewArrowWriteContext(context.Background(), &fw.aprop)})
	}
	if _, err := fw.sink.Write([]byte("PAR1")); err != nil {
		return nil, fmt.Errorf("parquet: failed to write magic number: %w", err)
	}
	return fw, nil
}

// fail records the writer's first error.
func (fw *FlatWriter) fail(err error) error {
	if err != nil && fw.err == nil {
		fw.err = err
	}
	return err
}

// startRowGroup opens a row group: a chunk per column.
func (fw *FlatWriter) startRowGroup() error {
	fw.rg = fw.meta.AppendRowGroup()
	fw.rgRows = 0
	for i := range fw.cols {
		fc := &fw.cols[i]
		ccmb := fw.rg.NextColumnChunk()
		if fc.chunk != nil {
			fc.chunk.startRowGroup(ccmb)
			continue
		}
		path := ccmb.Descr().Path()
		pager, err := file.NewPageWriter(fw.sink, fw.props.CompressionFor(path), fw.props.CompressionLevelFor(path),
			ccmb, fw.rgNum, int16(i), fw.mem, true, nil, nil)
		if err != nil {
			return err
		}
		fc.cw = file.NewColumnChunkWriter(ccmb, pager, fw.props)
	}
	fw.rgNum++
	return nil
}

func (fw *FlatWriter) WriteBuffered(rec arrow.RecordBatch) error {
	if fw.err != nil {
		return fw.err
	}
	if fw.rg == nil {
		if err := fw.startRowGroup(); err != nil {
			return fw.fail(err)
		}
	}
	fw.rgRows += rec.NumRows()
	return fw.fail(fw.writeColumns(rec))
}

func (fw *FlatWriter) writeColumn(i int, col arrow.Array) error {
	fc := &fw.cols[i]
	if fc.chunk != nil {
		return fc.chunk.write(col)
	}
	var defs []int16
	if fc.nullable {
		defs = fc.defLevels(col)
	}
	return pqarrow.WriteArrowToColumn(fc.ctx, fc.cw, col, defs, nil, fc.nullable)
}

// defLevels returns the definition levels of a nullable top-level column.
func (fc *flatColumn) defLevels(col arrow.Array) []int16 {
	n := col.Len()
	if cap(fc.defs) < n {
		fc.defs = make([]int16, n)
	}
	defs := fc.defs[:n]
	if col.NullN() == 0 {
		for i := range defs {
			defs[i] = 1
		}
		return defs
	}
	for i := range defs {
		defs[i] = 0
		if col.IsValid(i) {
			defs[i] = 1
		}
	}
	return defs
}

// NewBufferedRowGroupChecked closes the open row group, writing its column chunks.
func (fw *FlatWriter) NewBufferedRowGroupChecked() error {
	if fw.err != nil {
		return fw.err
	}
	if fw.rg == nil {
		return nil
	}
	return fw.fail(fw.closeRowGroup())
}

func (fw *FlatWriter) closeRowGroup() error {
	// The columns' last pages, concurrently...
	err := fw.forColumns(0, func(i int) error {
		if c := fw.cols[i].chunk; c != nil {
			return c.finishPages()
		}
		return nil
	})
	if err != nil {
		return err
	}
	// ... then the chunks, in column order.
	for i := range fw.cols {
		fc := &fw.cols[i]
		if c := fc.chunk; c != nil {
			pager, err := file.NewPageWriter(fw.sink, c.ctype, c.level, c.meta, fw.rgNum-1, int16(i), fw.mem, false, nil, nil)
			if err == nil {
				err = c.writeChunk(pager)
			}
			if err != nil {
				return fmt.Errorf("column %s: %w", fw.names[i], err)
			}
			continue
		}
		if err := fc.cw.Close(); err != nil {
			return fmt.Errorf("column %s: %w", fw.names[i], err)
		}
		fc.cw = nil
	}
	fw.rg.SetNumRows(int(fw.rgRows))
	err = fw.rg.Finish(0, fw.rgNum-1)
	fw.rg = nil
	return err
}

// Close writes the last row group and the footer.
func (fw *FlatWriter) Close() error {
	if fw.closed {
		return fw.err
	}
	fw.closed = true
	if fw.err != nil {
		return fw.err
	}
	if fw.rg != nil {
		if err := fw.closeRowGroup(); err != nil {
			return fw.fail(err)
		}
	}
	md, err := fw.meta.Snapshot()
	if err != nil {
		return fw.fail(err)
	}
	n, err := md.WriteTo(fw.sink, nil)
	if err == nil {
		_, err = fw.sink.Write(binary.LittleEndian.AppendUint32(nil, uint32(n)))
	}
	if err == nil {
		_, err = fw.sink.Write([]byte("PAR1"))
	}
	if c, ok := fw.sink.w.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return fw.fail(err)
}
