package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Checkpoint column types (PROTOCOL.md, Checkpoint Schema). Every field is nullable, as
// Spark writes them; map values are nullable so null partition values survive.
var (
	strMapType  = arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)
	strListType = arrow.ListOf(arrow.BinaryTypes.String)

	cpTxnType = arrow.StructOf(
		arrow.Field{Name: "appId", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "version", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "lastUpdated", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	cpDVType = arrow.StructOf(
		arrow.Field{Name: "storageType", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "pathOrInlineDv", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "offset", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "sizeInBytes", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "cardinality", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	cpAddType = arrow.StructOf(
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "partitionValues", Type: strMapType, Nullable: true},
		arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "modificationTime", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "dataChange", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "tags", Type: strMapType, Nullable: true},
		arrow.Field{Name: "stats", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "deletionVector", Type: cpDVType, Nullable: true},
	)
	cpRemoveType = arrow.StructOf(
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "deletionTimestamp", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "dataChange", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "extendedFileMetadata", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "partitionValues", Type: strMapType, Nullable: true},
		arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "deletionVector", Type: cpDVType, Nullable: true},
	)
	cpFormatType = arrow.StructOf(
		arrow.Field{Name: "provider", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "options", Type: strMapType, Nullable: true},
	)
	cpMetadataType = arrow.StructOf(
		arrow.Field{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "description", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "format", Type: cpFormatType, Nullable: true},
		arrow.Field{Name: "schemaString", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "partitionColumns", Type: strListType, Nullable: true},
		arrow.Field{Name: "configuration", Type: strMapType, Nullable: true},
		arrow.Field{Name: "createdTime", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	cpProtocolType = arrow.StructOf(
		arrow.Field{Name: "minReaderVersion", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "minWriterVersion", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "readerFeatures", Type: strListType, Nullable: true},
		arrow.Field{Name: "writerFeatures", Type: strListType, Nullable: true},
	)
	checkpointSchema = arrow.NewSchema([]arrow.Field{
		{Name: "txn", Type: cpTxnType, Nullable: true},
		{Name: "add", Type: cpAddType, Nullable: true},
		{Name: "remove", Type: cpRemoveType, Nullable: true},
		{Name: "metaData", Type: cpMetadataType, Nullable: true},
		{Name: "protocol", Type: cpProtocolType, Nullable: true},
	}, nil)
)

// Checkpoint writes a classic single-file checkpoint of the snapshot's version and then
// _last_checkpoint. Commits do this by themselves every delta.checkpointInterval
// versions; calling it directly is useful after bulk loads.
func (t *Table) Checkpoint(ctx context.Context, s *Snapshot) error {
	if err := t.writeCheckpoint(ctx, s); err != nil {
		return fmt.Errorf("checkpoint table %s at version %d: %w", t.displayRoot(), s.version, err)
	}
	return nil
}

// writeCheckpoint writes N.checkpoint.parquet (protocol, metaData, txns, live adds and
// unexpired tombstones, one action per row) and then overwrites _last_checkpoint.
func (t *Table) writeCheckpoint(ctx context.Context, s *Snapshot) error {
	if err := checkWrite(s.Protocol(), s.Metadata()); err != nil {
		return err
	}
	if s.Protocol().MinWriterVersion >= 7 {
		for _, f := range s.Protocol().WriterFeatures {
			if f == FeatureV2Checkpoint {
				return &UnsupportedFeatureError{Feature: f, Write: true}
			}
		}
	}
	mem := memory.NewGoAllocator()
	rec, numAdds := buildCheckpointRecord(mem, s, t.opts.Now().UnixMilli())
	defer rec.Release()

	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(checkpointSchema, &buf, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return err
	}
	if err := fw.Close(); err != nil {
		return err
	}
	key := fmt.Sprintf("%s%020d.checkpoint.parquet", t.logPrefix(), s.version)
	size := int64(buf.Len())
	if err := t.store.Put(ctx, key, bytes.NewReader(buf.Bytes()), size); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	lc := lastCheckpoint{Version: s.version, Size: rec.NumRows(), SizeInBytes: &size, NumOfAddFiles: &numAdds}
	b, err := json.Marshal(lc)
	if err != nil {
		return err
	}
	if err := t.store.Put(ctx, t.logPrefix()+"_last_checkpoint", bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	return nil
}

// buildCheckpointRecord lays the snapshot out as checkpoint rows: protocol, metaData,
// txns, adds (sorted by path), then unexpired tombstones.
func buildCheckpointRecord(mem memory.Allocator, s *Snapshot, nowMillis int64) (arrow.RecordBatch, int64) {
	b := array.NewRecordBuilder(mem, checkpointSchema)
	defer b.Release()
	cb := &checkpointRows{
		txn:   b.Field(0).(*array.StructBuilder),
		add:   b.Field(1).(*array.StructBuilder),
		rem:   b.Field(2).(*array.StructBuilder),
		md:    b.Field(3).(*array.StructBuilder),
		proto: b.Field(4).(*array.StructBuilder),
	}
	cb.protocol(s.Protocol())
	cb.metadata(s.Metadata())
	for _, id := range sortedTxnIDs(s.state.txns) {
		cb.txnRow(s.state.txns[id])
	}
	for _, a := range s.Files() {
		cb.addRow(a)
	}
	// unexpired tombstones, without stats or tags
	cutoff := nowMillis - s.DeletedFileRetention().Milliseconds()
	for _, r := range s.Tombstones() {
		if r.DeletionTimestamp == nil || *r.DeletionTimestamp <= cutoff {
			continue
		}
		cb.removeRow(r)
	}
	return b.NewRecordBatch(), int64(len(s.Files()))
}

// checkpointRows appends checkpoint rows, one action each, to the builders of
// checkpointSchema's action columns.
type checkpointRows struct {
	txn, add, rem, md, proto *array.StructBuilder
}

// row starts a row of the action whose builder is sb: the other actions are null.
func (cb *checkpointRows) row(sb *array.StructBuilder) {
	for _, o := range []*array.StructBuilder{cb.txn, cb.add, cb.rem, cb.md, cb.proto} {
		if o != sb {
			o.AppendNull()
		}
	}
	sb.Append(true)
}

// protocol appends the protocol row (feature lists only where the versions have them).
func (cb *checkpointRows) protocol(p *Protocol) {
	b := cb.proto
	cb.row(b)
	b.FieldBuilder(0).(*array.Int32Builder).Append(int32(p.MinReaderVersion))
	b.FieldBuilder(1).(*array.Int32Builder).Append(int32(p.MinWriterVersion))
	appendStrList(b.FieldBuilder(2).(*array.ListBuilder), p.ReaderFeatures, p.MinReaderVersion >= 3)
	appendStrList(b.FieldBuilder(3).(*array.ListBuilder), p.WriterFeatures, p.MinWriterVersion >= 7)
}

// metadata appends the metaData row.
func (cb *checkpointRows) metadata(md *Metadata) {
	b := cb.md
	cb.row(b)
	b.FieldBuilder(0).(*array.StringBuilder).Append(md.ID)
	appendOptStr(b.FieldBuilder(1).(*array.StringBuilder), md.Name)
	appendOptStr(b.FieldBuilder(2).(*array.StringBuilder), md.Description)
	fb := b.FieldBuilder(3).(*array.StructBuilder)
	fb.Append(true)
	fb.FieldBuilder(0).(*array.StringBuilder).Append(md.Format.Provider)
	appendStrMap(fb.FieldBuilder(1).(*array.MapBuilder), md.Format.Options, true)
	b.FieldBuilder(4).(*array.StringBuilder).Append(md.SchemaString)
	appendStrList(b.FieldBuilder(5).(*array.ListBuilder), md.PartitionColumns, true)
	appendStrMap(b.FieldBuilder(6).(*array.MapBuilder), md.Configuration, true)
	appendOptInt(b.FieldBuilder(7).(*array.Int64Builder), md.CreatedTime)
}

// txnRow appends a txn row.
func (cb *checkpointRows) txnRow(x *Txn) {
	b := cb.txn
	cb.row(b)
	b.FieldBuilder(0).(*array.StringBuilder).Append(x.AppID)
	b.FieldBuilder(1).(*array.Int64Builder).Append(x.Version)
	appendOptInt(b.FieldBuilder(2).(*array.Int64Builder), x.LastUpdated)
}

// addRow appends an add row, with its stats and deletion vector.
func (cb *checkpointRows) addRow(a *Add) {
	b := cb.add
	cb.row(b)
	b.FieldBuilder(0).(*array.StringBuilder).Append(a.Path)
	appendPtrMap(b.FieldBuilder(1).(*array.MapBuilder), a.PartitionValues)
	b.FieldBuilder(2).(*array.Int64Builder).Append(a.Size)
	b.FieldBuilder(3).(*array.Int64Builder).Append(a.ModificationTime)
	b.FieldBuilder(4).(*array.BooleanBuilder).Append(a.DataChange)
	appendStrMap(b.FieldBuilder(5).(*array.MapBuilder), a.Tags, a.Tags != nil)
	appendOptStr(b.FieldBuilder(6).(*array.StringBuilder), a.Stats)
	appendDV(b.FieldBuilder(7).(*array.StructBuilder), a.DeletionVector)
}

// removeRow appends a tombstone, without stats or tags (partition values only with
// extended file metadata).
func (cb *checkpointRows) removeRow(r *Remove) {
	b := cb.rem
	cb.row(b)
	b.FieldBuilder(0).(*array.StringBuilder).Append(r.Path)
	b.FieldBuilder(1).(*array.Int64Builder).Append(*r.DeletionTimestamp)
	b.FieldBuilder(2).(*array.BooleanBuilder).Append(r.DataChange)
	b.FieldBuilder(3).(*array.BooleanBuilder).Append(r.ExtendedFileMetadata)
	if r.ExtendedFileMetadata {
		appendPtrMap(b.FieldBuilder(4).(*array.MapBuilder), r.PartitionValues)
	} else {
		b.FieldBuilder(4).AppendNull()
	}
	appendOptInt(b.FieldBuilder(5).(*array.Int64Builder), r.Size)
	appendDV(b.FieldBuilder(6).(*array.StructBuilder), r.DeletionVector)
}

func appendDV(b *array.StructBuilder, dv *DeletionVector) {
	if dv == nil {
		b.AppendNull()
		return
	}
	b.Append(true)
	b.FieldBuilder(0).(*array.StringBuilder).Append(dv.StorageType)
	b.FieldBuilder(1).(*array.StringBuilder).Append(dv.PathOrInlineDv)
	if dv.Offset != nil {
		b.FieldBuilder(2).(*array.Int32Builder).Append(*dv.Offset)
	} else {
		b.FieldBuilder(2).AppendNull()
	}
	b.FieldBuilder(3).(*array.Int32Builder).Append(dv.SizeInBytes)
	b.FieldBuilder(4).(*array.Int64Builder).Append(dv.Cardinality)
}

func appendOptStr(b *array.StringBuilder, s string) {
	if s == "" {
		b.AppendNull()
	} else {
		b.Append(s)
	}
}

func appendOptInt(b *array.Int64Builder, v *int64) {
	if v == nil {
		b.AppendNull()
	} else {
		b.Append(*v)
	}
}

func appendStrList(b *array.ListBuilder, vals []string, valid bool) {
	if !valid {
		b.AppendNull()
		return
	}
	b.Append(true)
	vb := b.ValueBuilder().(*array.StringBuilder)
	for _, v := range vals {
		vb.Append(v)
	}
}

func appendStrMap(b *array.MapBuilder, m map[string]string, valid bool) {
	if !valid {
		b.AppendNull()
		return
	}
	b.Append(true)
	kb := b.KeyBuilder().(*array.StringBuilder)
	ib := b.ItemBuilder().(*array.StringBuilder)
	for _, k := range sortedStringKeys(m) {
		kb.Append(k)
		ib.Append(m[k])
	}
}

func appendPtrMap(b *array.MapBuilder, m map[string]*string) {
	b.Append(true)
	kb := b.KeyBuilder().(*array.StringBuilder)
	ib := b.ItemBuilder().(*array.StringBuilder)
	keys := make(map[string]bool, len(m))
	for k := range m {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		kb.Append(k)
		if v := m[k]; v != nil {
			ib.Append(*v)
		} else {
			ib.AppendNull()
		}
	}
}

func sortedStringKeys(m map[string]string) []string {
	keys := make(map[string]bool, len(m))
	for k := range m {
		keys[k] = true
	}
	return sortedKeys(keys)
}
