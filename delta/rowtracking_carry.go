package delta

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Carrying stable row ids through a rewrite (PROTOCOL.md, Row Tracking, materialized
// row ids): a row a DELETE, UPDATE or MERGE copies from an old file into a new one keeps its
// row id and, when unchanged, its row commit version. The rewrite reads each row's two
// values (the materialized column when the old file has a non-null one, else the file's
// baseRowId + the row's physical index and its defaultRowCommitVersion) as two trailing
// columns after the table's, and writes them into the new file under the physical
// names the table configuration gives them. An updated row keeps its id and gets a null
// commit version, so the new file's defaultRowCommitVersion (the commit's) applies, as
// Spark writes it. Readers of the table schema never see the two columns: they are not
// in the schema.

// rowCarry names the materialized columns a rewrite writes; nil when it writes none.
type rowCarry struct {
	idCol, verCol string
	ext           *StructType   // the table schema and the two columns
	extArrow      *arrow.Schema // its Arrow form
	// lost is set when a row read had no row id to carry (its file has no baseRowId):
	// it gets a fresh one, and the commit does not preserve the ids.
	lost atomic.Bool
}

// preserved says whether the rewrite carried every row id it read (a nil carry
// carried none).
func (rc *rowCarry) preserved() bool { return rc != nil && !rc.lost.Load() }

// newRowCarry returns the carry of a rewrite on snap: non-nil when row tracking is on
// and the table names both materialized columns. With column mapping the table's
// fields keep their physical names and ids in the extended schema, and the two
// materialized columns, which carry no mapping metadata, are their own physical names
// (as Spark writes them), so files are read and written by the mapping as always.
func newRowCarry(snap *Snapshot) (*rowCarry, error) {
	md := snap.Metadata()
	if !rowTrackingOn(snap.Protocol(), md) {
		return nil, nil
	}
	rc := &rowCarry{idCol: md.Configuration[PropMaterializedRowIDColumn], verCol: md.Configuration[PropMaterializedRowCommitVersionColumn]}
	if rc.idCol == "" || rc.verCol == "" || strings.EqualFold(rc.idCol, rc.verCol) {
		return nil, nil
	}
	sch := snap.Schema()
	for _, c := range []string{rc.idCol, rc.verCol} {
		if sch.Field(c) != nil {
			return nil, fmt.Errorf("table schema has a column %s, which row tracking names as a materialized column", c)
		}
	}
	rc.ext = &StructType{Fields: append(append([]*StructField{}, sch.Fields...),
		&StructField{Name: rc.idCol, Type: &PrimitiveType{Name: "long"}, Nullable: true},
		&StructField{Name: rc.verCol, Type: &PrimitiveType{Name: "long"}, Nullable: true})}
	var err error
	if rc.extArrow, err = ArrowSchema(rc.ext); err != nil {
		return nil, err
	}
	return rc, nil
}

// scanFileCarry is scanFile with, when rc is not nil, each row's row id and row commit
// version as two trailing columns (records of rc.extArrow).
func scanFileCarry(ctx context.Context, snap *Snapshot, rc *rowCarry, a *Add, fn func(rec arrow.RecordBatch) error) error {
	if rc == nil {
		return scanFile(ctx, snap, a, fn)
	}
	t := snap.Table()
	var del *roaring64.Bitmap
	if a.DeletionVector != nil {
		var err error
		if del, err = loadDeletionVector(ctx, t.Store(), t.Root(), "", a.DeletionVector); err != nil {
			return fmt.Errorf("file %s: %w", a.Path, err)
		}
	}
	sc, err := Scan(ctx, t.Store(), t.Root(), rc.ext, snap.PartitionColumns(), []*Add{a}, ScanOptions{})
	if err != nil {
		return err
	}
	defer sc.Release()
	var logical int64
	for sc.Next() {
		rec := sc.RecordBatch()
		n := int(rec.NumRows())
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = logical + int64(i)
		}
		logical += int64(n)
		out, err := rc.fill(memory.DefaultAllocator, rec, a, physicalRows(del, idx))
		if err != nil {
			return fmt.Errorf("file %s: %w", a.Path, err)
		}
		err = fn(out)
		out.Release()
		if err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", a.Path, err)
	}
	return nil
}

// fill returns rec with its two trailing columns completed: a null materialized row id
// becomes the file's baseRowId + the row's physical index, a null commit version the
// file's defaultRowCommitVersion (both stay null when the file has none).
func (rc *rowCarry) fill(mem memory.Allocator, rec arrow.RecordBatch, a *Add, phys []uint64) (arrow.RecordBatch, error) {
	nc := int(rec.NumCols())
	ids, ok1 := rec.Column(nc - 2).(*array.Int64)
	vers, ok2 := rec.Column(nc - 1).(*array.Int64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("materialized row tracking columns %s, %s are not longs", rc.idCol, rc.verCol)
	}
	n := int(rec.NumRows())
	ib, vb := array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	defer ib.Release()
	defer vb.Release()
	ib.Reserve(n)
	vb.Reserve(n)
	for i := 0; i < n; i++ {
		rc.appendRow(ib, vb, ids, vers, i, a, phys[i])
	}
	idArr, verArr := ib.NewArray(), vb.NewArray()
	defer idArr.Release()
	defer verArr.Release()
	cols := append(append([]arrow.Array{}, rec.Columns()[:nc-2]...), idArr, verArr)
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()), nil
}

// appendRow appends row i's row id and commit version (ids, vers: its materialized
// columns; phys: its physical index in file a) to ib and vb (reserved): a null
// materialized id is the file's baseRowId + phys, a null version the file's
// defaultRowCommitVersion (both stay null when the file has none).
func (rc *rowCarry) appendRow(ib, vb *array.Int64Builder, ids, vers *array.Int64, i int, a *Add, phys uint64) {
	switch {
	case ids.IsValid(i):
		ib.UnsafeAppend(ids.Value(i))
	case a.BaseRowID != nil:
		ib.UnsafeAppend(*a.BaseRowID + int64(phys))
	default:
		ib.AppendNull()
		rc.lost.Store(true)
	}
	switch {
	case vers.IsValid(i):
		vb.UnsafeAppend(vers.Value(i))
	case a.DefaultRowCommitVersion != nil:
		vb.UnsafeAppend(*a.DefaultRowCommitVersion)
	default:
		vb.AppendNull()
	}
}

// dataColumns returns rec without the carried columns (retained; the caller releases
// it): the rows as the table schema has them.
func (rc *rowCarry) dataColumns(rec arrow.RecordBatch) arrow.RecordBatch {
	nc := int(rec.NumCols())
	if rc == nil || nc != len(rc.ext.Fields) {
		rec.Retain()
		return rec
	}
	sch := arrow.NewSchema(rec.Schema().Fields()[:nc-2], nil)
	return array.NewRecordBatch(sch, rec.Columns()[:nc-2], rec.NumRows())
}

// updated returns post (table columns) with the row ids of pre (the same rows, whose
// last two columns are the carried ones) and a null commit version: the rows changed in
// this commit.
func (rc *rowCarry) updated(mem memory.Allocator, pre, post arrow.RecordBatch) arrow.RecordBatch {
	nc := int(pre.NumCols())
	ver := array.MakeArrayOfNull(mem, arrow.PrimitiveTypes.Int64, int(post.NumRows()))
	defer ver.Release()
	cols := append(append([]arrow.Array{}, post.Columns()...), pre.Column(nc-2), ver)
	return array.NewRecordBatch(rc.extArrow, cols, post.NumRows())
}

// RowTracking is one row's stable row id and row commit version (Spark's
// _metadata.row_id and _metadata.row_commit_version).
type RowTracking struct {
	RowID            int64
	RowCommitVersion int64
}

// ScanRowTracking reads every live row of the snapshot with its row id and row commit
// version: fn gets each record (the table's columns, valid only during the call) and
// the values of its rows. An error when the table does not track row ids.
func (s *Snapshot) ScanRowTracking(ctx context.Context, fn func(rec arrow.RecordBatch, rt []RowTracking) error) error {
	rc, err := newRowCarry(s)
	if err != nil {
		return err
	}
	if rc == nil {
		return fmt.Errorf("table %s does not track row ids", s.Table().displayRoot())
	}
	for _, a := range s.Files() {
		err := scanFileCarry(ctx, s, rc, a, func(rec arrow.RecordBatch) error {
			nc := int(rec.NumCols())
			ids, vers := rec.Column(nc-2).(*array.Int64), rec.Column(nc-1).(*array.Int64)
			rt := make([]RowTracking, rec.NumRows())
			for i := range rt {
				if ids.IsNull(i) || vers.IsNull(i) {
					return fmt.Errorf("file %s has no row ids (baseRowId, defaultRowCommitVersion)", a.Path)
				}
				rt[i] = RowTracking{ids.Value(i), vers.Value(i)}
			}
			data := rc.dataColumns(rec)
			defer data.Release()
			return fn(data, rt)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// trackColumns returns rec's two carried columns as a record of their own (retained;
// the caller releases it).
func (rc *rowCarry) trackColumns(rec arrow.RecordBatch) arrow.RecordBatch {
	nc := int(rec.NumCols())
	sch := arrow.NewSchema(rec.Schema().Fields()[nc-2:], nil)
	return array.NewRecordBatch(sch, rec.Columns()[nc-2:], rec.NumRows())
}

// copied returns data (table columns, rows of a record copied unchanged) with the row
// ids and commit versions of tracked (trackColumns of the same record) at rows.
func (rc *rowCarry) copied(ctx context.Context, mem memory.Allocator, data, tracked arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	t, err := arrowx.Gather(ctx, mem, tracked, rows)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	cols := append(append([]arrow.Array{}, data.Columns()...), t.Columns()...)
	return array.NewRecordBatch(rc.extArrow, cols, data.NumRows()), nil
}

// givenTracked returns the row ids and commit versions (a record like trackColumns') of
// the rows target names (logical indexes, increasing) of file a, reading only the two
// materialized columns: a MERGE given the matched rows themselves (FileMatches.Rows)
// needs no more of the file.
func (rc *rowCarry) givenTracked(ctx context.Context, snap *Snapshot, mem memory.Allocator, a *Add, target []int64) (arrow.RecordBatch, error) {
	t := snap.Table()
	var del *roaring64.Bitmap
	if a.DeletionVector != nil {
		var err error
		if del, err = loadDeletionVector(ctx, t.Store(), t.Root(), "", a.DeletionVector); err != nil {
			return nil, fmt.Errorf("file %s: %w", a.Path, err)
		}
	}
	phys := physicalRows(del, target)
	sc, err := Scan(ctx, t.Store(), t.Root(), rc.ext, snap.PartitionColumns(), []*Add{a}, ScanOptions{Columns: []string{rc.idCol, rc.verCol}})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	ib, vb := array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	defer ib.Release()
	defer vb.Release()
	ib.Reserve(len(target))
	vb.Reserve(len(target))
	var lo int64 // the logical index of the record's first row
	k := 0       // the next target row
	for sc.Next() && k < len(target) {
		rec := sc.RecordBatch()
		ids, ok1 := rec.Column(0).(*array.Int64)
		vers, ok2 := rec.Column(1).(*array.Int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("file %s: materialized row tracking columns %s, %s are not longs", a.Path, rc.idCol, rc.verCol)
		}
		hi := lo + rec.NumRows()
		for ; k < len(target) && target[k] < hi; k++ {
			rc.appendRow(ib, vb, ids, vers, int(target[k]-lo), a, phys[k])
		}
		lo = hi
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", a.Path, err)
	}
	if k < len(target) {
		return nil, fmt.Errorf("file %s: target row %d is past its %d rows", a.Path, target[k], lo)
	}
	idArr, verArr := ib.NewArray(), vb.NewArray()
	defer idArr.Release()
	defer verArr.Release()
	nf := len(rc.extArrow.Fields())
	sch := arrow.NewSchema(rc.extArrow.Fields()[nf-2:], nil)
	return array.NewRecordBatch(sch, []arrow.Array{idArr, verArr}, int64(len(target))), nil
}
