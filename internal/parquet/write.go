package parquet

import (
	"context"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
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

// FlatWriter writes the Parquet file of a flat schema column by column through pqarrow's
// per-column writer, the file format and encodings being those of pqarrow's FileWriter
// (same schema conversion, properties and page encoders). What it adds:
//   - dictionary-encoded string and binary column chunks get their dictionary from a
//     dictChunk (dict.go) rather than from arrow-go's encoder, which
//     allocates for every value it hashes; the bytes written are the same;
//   - the columns of a batch are encoded concurrently when cores are idle
//     (write_parallel.go): each column chunk of a buffered row group has its own
//     encoder and page buffer, so the bytes are those of the sequential path.
type FlatWriter struct {
	wr    *file.Writer
	rgw   file.BufferedRowGroupWriter // nil between row groups
	mem   memory.Allocator
	aprop pqarrow.ArrowWriterProperties
	names []string
	types []arrow.DataType
	limit int64 // dictionary page size limit: where arrow-go falls back to plain pages
	batch int64 // arrow-go's write batch size: the steps it encodes a column's values in
	cols  []flatColumn
}

// flatColumn is one column's state and scratch, touched only by the goroutine encoding
// that column's part of a batch.
type flatColumn struct {
	nullable bool
	ownDict  bool            // a string or binary column: dictionary through dict
	ctx      context.Context // pqarrow's write context: properties, scratch
	dict     dictChunk       // the open row group's dictionary and queued batches
	dense    bool            // the open row group's chunk is written the ordinary way
	defs     []int16         // definition levels scratch (1 = value, 0 = null)
}

func NewFlatWriter(sc *arrow.Schema, sink io.Writer, props *pq.WriterProperties, aprops pqarrow.ArrowWriterProperties) (*FlatWriter, error) {
	pqschema, err := pqarrow.ToParquet(sc, props, aprops)
	if err != nil {
		return nil, err
	}
	meta := make(metadata.KeyValueMetadata, 0) // as pqarrow: an empty list, not none
	for i, k := range sc.Metadata().Keys() {
		meta.Append(k, sc.Metadata().Values()[i])
	}
	wr, err := file.NewParquetWriterWithError(sink, pqschema.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta))
	if err != nil {
		return nil, err
	}
	fw := &FlatWriter{wr: wr, mem: props.Allocator(), aprop: aprops, limit: props.DictionaryPageSizeLimit(),
		batch: props.WriteBatchSize()}
	for i, f := range sc.Fields() {
		path := pqschema.Column(i).ColumnPath()
		// arrow-go's cost check (dictionary vs plain size, for uncompressed columns) is
		// not one dictChunk makes: such columns go the ordinary way.
		own := (f.Type.ID() == arrow.STRING || f.Type.ID() == arrow.BINARY) &&
			props.DictionaryEnabledPath(path) && !props.DictionaryCostFallbackEnabledFor(path.String())
		fw.names = append(fw.names, f.Name)
		fw.types = append(fw.types, f.Type)
		fw.cols = append(fw.cols, flatColumn{nullable: f.Nullable, ownDict: own,
			ctx: pqarrow.NewArrowWriteContext(context.Background(), &fw.aprop)})
	}
	return fw, nil
}

func (fw *FlatWriter) WriteBuffered(rec arrow.RecordBatch) error {
	if fw.rgw == nil {
		rgw, err := fw.wr.AppendBufferedRowGroupChecked()
		if err != nil {
			return err
		}
		fw.rgw = rgw
	}
	return fw.writeColumns(rec)
}

func (fw *FlatWriter) writeColumn(i int, col arrow.Array) error {
	cw, err := fw.rgw.Column(i)
	if err != nil {
		return err
	}
	fc := &fw.cols[i]
	if !fc.dense && fc.ownDict && cw.CurrentEncoder().Encoding() == pq.Encodings.PlainDict {
		if fc.dict.add(col.(binaryValues), fw.limit) {
			return nil
		}
		// The dictionary is full: arrow-go falls back to plain pages within this batch.
		if err := fc.dict.flush(fc, cw, fw.types[i], fw.mem, fw.batch, true); err != nil {
			return err
		}
	}
	fc.dense = true
	var defs []int16
	if fc.nullable {
		defs = fc.defLevels(col)
	}
	return pqarrow.WriteArrowToColumn(fc.ctx, cw, col, defs, nil, fc.nullable)
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

func (fw *FlatWriter) NewBufferedRowGroupChecked() error {
	if fw.rgw == nil {
		return nil
	}
	rgw := fw.rgw
	err := fw.forColumns(0, func(i int) error {
		cw, err := rgw.Column(i)
		if err != nil {
			return err
		}
		return fw.cols[i].dict.flush(&fw.cols[i], cw, fw.types[i], fw.mem, fw.batch, false)
	})
	for i := range fw.cols {
		fw.cols[i].dict.reset()
		fw.cols[i].dense = false
	}
	fw.rgw = nil
	if err != nil {
		return err
	}
	return rgw.Close()
}

func (fw *FlatWriter) Close() error {
	err := fw.NewBufferedRowGroupChecked()
	if cerr := fw.wr.Close(); err == nil {
		err = cerr
	}
	return err
}
