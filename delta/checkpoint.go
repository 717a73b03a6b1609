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
		arrow.Field{Name: "baseRowId", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "defaultRowCommitVersion", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "clusteringProvider", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	cpRemoveType = arrow.StructOf(
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "deletionTimestamp", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "dataChange", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "extendedFileMetadata", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "partitionValues", Type: strMapType, Nullable: true},
		arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "deletionVector", Type: cpDVType, Nullable: true},
		arrow.Field{Name: "baseRowId", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "defaultRowCommitVersion", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
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
	cpDomainMetadataType = arrow.StructOf(
		arrow.Field{Name: "domain", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "configuration", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "removed", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	)
	cpCheckpointMetadataType = arrow.StructOf(
		arrow.Field{Name: "version", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "tags", Type: strMapType, Nullable: true},
	)
	cpSidecarType = arrow.StructOf(
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "sizeInBytes", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "modificationTime", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "tags", Type: strMapType, Nullable: true},
	)
	// checkpointSchema is a V1 spec checkpoint: every action in one file.
	checkpointSchema = arrow.NewSchema([]arrow.Field{
		{Name: "txn", Type: cpTxnType, Nullable: true},
		{Name: "add", Type: cpAddType, Nullable: true},
		{Name: "remove", Type: cpRemoveType, Nullable: true},
		{Name: "metaData", Type: cpMetadataType, Nullable: true},
		{Name: "protocol", Type: cpProtocolType, Nullable: true},
		{Name: "domainMetadata", Type: cpDomainMetadataType, Nullable: true},
	}, nil)
	// v2CheckpointSchema is a V2 spec checkpoint: the V1 columns, checkpointMetadata and
	// the sidecars holding the file actions when there are sidecars.
	v2CheckpointSchema = arrow.NewSchema(append(checkpointSchema.Fields(),
		arrow.Field{Name: "checkpointMetadata", Type: cpCheckpointMetadataType, Nullable: true},
		arrow.Field{Name: "sidecar", Type: cpSidecarType, Nullable: true},
	), nil)
	// sidecarSchema is a sidecar file: add and remove actions only.
	sidecarSchema = arrow.NewSchema([]arrow.Field{
		{Name: "add", Type: cpAddType, Nullable: true},
		{Name: "remove", Type: cpRemoveType, Nullable: true},
	}, nil)
)

// Checkpoint writes a checkpoint of the snapshot's version and then _last_checkpoint:
// a classic single-file checkpoint, or, on a table with the v2Checkpoint feature, a V2
// spec checkpoint (checkpoint.go's v2 layout). Commits do this by themselves every
// delta.checkpointInterval versions; calling it directly is useful after bulk loads.
func (t *Table) Checkpoint(ctx context.Context, s *Snapshot) error {
	if err := t.writeCheckpoint(ctx, s); err != nil {
		return fmt.Errorf("checkpoint table %s at version %d: %w", t.displayRoot(), s.version, err)
	}
	return nil
}

// writeCheckpoint writes the checkpoint of s (protocol, metaData, txns, domain metadata,
// live adds and unexpired tombstones, one action per row) and then overwrites
// _last_checkpoint.
func (t *Table) writeCheckpoint(ctx context.Context, s *Snapshot) error {
	if err := checkWrite(s.Protocol(), s.Metadata()); err != nil {
		return err
	}
	if s.V2CheckpointsSupported() {
		return t.writeV2Checkpoint(ctx, s, v2SidecarActions)
	}
	mem := memory.NewGoAllocator()
	nowMillis := t.opts.Now().UnixMilli()
	cb := newCheckpointRows(mem, checkpointSchema)
	defer cb.release()
	cb.nonFileActions(s)
	numAdds := cb.fileActions(s.Files(), liveTombstones(s, nowMillis))
	rec := cb.record()
	defer rec.Release()
	key := fmt.Sprintf("%s%020d.checkpoint.parquet", t.logPrefix(), s.version)
	size, err := t.putParquet(ctx, key, rec)
	if err != nil {
		return err
	}
	lc := lastCheckpoint{Version: s.version, Size: rec.NumRows(), SizeInBytes: &size, NumOfAddFiles: &numAdds}
	return t.writeLastCheckpoint(ctx, &lc)
}

// putParquet encodes rec as one Parquet file (Snappy) and stores it at key; it returns
// the file's size.
func (t *Table) putParquet(ctx context.Context, key string, rec arrow.RecordBatch) (int64, error) {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		return 0, err
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return 0, err
	}
	if err := fw.Close(); err != nil {
		return 0, err
	}
	size := int64(buf.Len())
	if err := t.store.Put(ctx, key, bytes.NewReader(buf.Bytes()), size); err != nil {
		return 0, fmt.Errorf("write %s: %w", key, err)
	}
	return size, nil
}

// writeLastCheckpoint overwrites _delta_log/_last_checkpoint.
func (t *Table) writeLastCheckpoint(ctx context.Context, lc *lastCheckpoint) error {
	b, err := json.Marshal(lc)
	if err != nil {
		return err
	}
	if err := t.store.Put(ctx, t.logPrefix()+"_last_checkpoint", bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	return nil
}

// liveTombstones are the tombstones a checkpoint keeps: those whose deletion is within
// delta.deletedFileRetentionDuration of now.
func liveTombstones(s *Snapshot, nowMillis int64) []*Remove {
	cutoff := nowMillis - s.DeletedFileRetention().Milliseconds()
	var out []*Remove
	for _, r := range s.Tombstones() {
		if r.DeletionTimestamp == nil || *r.DeletionTimestamp <= cutoff {
			continue
		}
		out = append(out, r)
	}
	return out
}

// checkpointRows appends checkpoint rows, one action each, to the builders of a
// checkpoint schema's action columns (those the schema lacks stay nil).
type checkpointRows struct {
	b                                          *array.RecordBuilder
	all                                        []*array.StructBuilder
	txn, add, rem, md, proto, dm, cpm, sidecar *array.StructBuilder
}

func newCheckpointRows(mem memory.Allocator, schema *arrow.Schema) *checkpointRows {
	cb := &checkpointRows{b: array.NewRecordBuilder(mem, schema)}
	for i, f := range schema.Fields() {
		sb := cb.b.Field(i).(*array.StructBuilder)
		cb.all = append(cb.all, sb)
		switch f.Name {
		case "txn":
			cb.txn = sb
		case "add":
			cb.add = sb
		case "remove":
			cb.rem = sb
		case "metaData":
			cb.md = sb
		case "protocol":
			cb.proto = sb
		case "domainMetadata":
			cb.dm = sb
		case "checkpointMetadata":
			cb.cpm = sb
		case "sidecar":
			cb.sidecar = sb
		}
	}
	return cb
}

func (cb *checkpointRows) release()                  { cb.b.Release() }
func (cb *checkpointRows) record() arrow.RecordBatch { return cb.b.NewRecordBatch() }

// nonFileActions appends protocol, metaData, the txns and the domain metadata of s.
func (cb *checkpointRows) nonFileActions(s *Snapshot) {
	cb.protocol(s.Protocol())
	cb.metadata(s.Metadata())
	for _, id := range sortedTxnIDs(s.state.txns) {
		cb.txnRow(s.state.txns[id])
	}
	for _, d := range s.domainList() {
		cb.domainRow(d)
	}
}

// fileActions appends adds (sorted by path) and then tombstones, and returns the number
// of adds.
func (cb *checkpointRows) fileActions(adds []*Add, tombstones []*Remove) int64 {
	for _, a := range adds {
		cb.addRow(a)
	}
	for _, r := range tombstones {
		cb.removeRow(r)
	}
	return int64(len(adds))
}

// row starts a row of the action whose builder is sb: the other actions are null.
func (cb *checkpointRows) row(sb *array.StructBuilder) {
	for _, o := range cb.all {
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

// domainRow appends a domainMetadata row (live domains only: a checkpoint keeps no
// removed domain).
func (cb *checkpointRows) domainRow(d *DomainMetadata) {
	b := cb.dm
	cb.row(b)
	b.FieldBuilder(0).(*array.StringBuilder).Append(d.Domain)
	b.FieldBuilder(1).(*array.StringBuilder).Append(d.Configuration)
	b.FieldBuilder(2).(*array.BooleanBuilder).Append(d.Removed)
}

// checkpointMetadataRow appends the checkpointMetadata row of a V2 checkpoint.
func (cb *checkpointRows) checkpointMetadataRow(version int64) {
	b := cb.cpm
	cb.row(b)
	b.FieldBuilder(0).(*array.Int64Builder).Append(version)
	b.FieldBuilder(1).AppendNull()
}

// sidecarRow appends a sidecar row of a V2 checkpoint.
func (cb *checkpointRows) sidecarRow(sc *Sidecar) {
	b := cb.sidecar
	cb.row(b)
	b.FieldBuilder(0).(*array.StringBuilder).Append(sc.Path)
	b.FieldBuilder(1).(*array.Int64Builder).Append(sc.SizeInBytes)
	b.FieldBuilder(2).(*array.Int64Builder).Append(sc.ModificationTime)
	b.FieldBuilder(3).AppendNull()
}

// addRow appends an add row, with its stats, deletion vector and row tracking fields.
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
	appendOptInt(b.FieldBuilder(8).(*array.Int64Builder), a.BaseRowID)
	appendOptInt(b.FieldBuilder(9).(*array.Int64Builder), a.DefaultRowCommitVersion)
	appendOptStr(b.FieldBuilder(10).(*array.StringBuilder), a.ClusteringProvider)
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
	appendOptInt(b.FieldBuilder(7).(*array.Int64Builder), r.BaseRowID)
	appendOptInt(b.FieldBuilder(8).(*array.Int64Builder), r.DefaultRowCommitVersion)
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
