package delta

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// The names of the two columns ScanWithRowIDs adds, as Spark's SQL names the fields
// (SELECT _metadata.row_id, _metadata.row_commit_version).
const (
	RowIDColumn            = "_metadata.row_id"
	RowCommitVersionColumn = "_metadata.row_commit_version"
)

// ScanWithRowIDs is Scan with each row's row id and row commit version (Spark's
// _metadata.row_id and _metadata.row_commit_version) as two trailing long columns named
// RowIDColumn and RowCommitVersionColumn; opts says the rest (Columns, Filter, ...; the
// read is sequential whatever ReadAhead and ParallelFiles say). The materialized
// columns never show as such. A row of a file without row ids (no baseRowId) shows
// NULL. An error when the table does not track row ids.
func (s *Snapshot) ScanWithRowIDs(ctx context.Context, opts ScanOptions) (array.RecordReader, error) {
	rc, err := newRowCarry(s)
	if err != nil {
		return nil, err
	}
	if rc == nil {
		return nil, fmt.Errorf("table %s does not track row ids (delta.enableRowTracking)", s.Table().displayRoot())
	}
	sch := s.Schema()
	for _, name := range []string{RowIDColumn, RowCommitVersionColumn} {
		if sch.Field(name) != nil {
			return nil, fmt.Errorf("the table has a column %s: its row ids cannot be shown under that name", name)
		}
	}
	cols := slices.Clone(opts.Columns)
	for _, c := range cols {
		if sch.Field(c) == nil {
			return nil, fmt.Errorf("scan: column %s is not in the table schema", c)
		}
	}
	if len(cols) == 0 {
		for _, f := range sch.Fields {
			cols = append(cols, f.Name)
		}
	}
	r := &rowIDScan{rc: rc, nOut: len(cols), refs: 1, mem: opts.Allocator, ctx: ctx, tableURI: opts.TableURI}
	if r.mem == nil {
		r.mem = memory.DefaultAllocator
	}
	if opts.Filter != nil {
		if r.filter, err = bindPredicate(opts.Filter, sch); err != nil {
			return nil, fmt.Errorf("scan: filter: %w", err)
		}
		for _, c := range r.filter.Columns() {
			if !slices.ContainsFunc(cols, func(x string) bool { return strings.EqualFold(x, c) }) {
				cols = append(cols, c)
			}
		}
	}
	// The scan reads the columns asked for, those the filter needs, and the two
	// materialized ones last; the filter prunes files and row groups only, so that each
	// row's place in its file is known (its default row id is the file's baseRowId plus
	// that place).
	cols = append(cols, rc.idCol, rc.verCol)
	t := s.Table()
	opts.Columns, opts.FilesOnly, opts.RowGroups, opts.ReadAhead, opts.ParallelFiles = cols, true, true, false, false
	if r.sc, err = Scan(ctx, t.Store(), t.Root(), rc.ext, s.PartitionColumns(), s.Files(), opts); err != nil {
		return nil, err
	}
	r.out = arrow.NewSchema(append(slices.Clone(r.sc.Schema().Fields()[:r.nOut]),
		arrow.Field{Name: RowIDColumn, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: RowCommitVersionColumn, Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil)
	return r, nil
}

// rowIDScan is the reader ScanWithRowIDs returns.
type rowIDScan struct {
	ctx      context.Context
	rc       *rowCarry
	sc       *Scanner
	filter   *expr.Bound
	out      *arrow.Schema
	nOut     int // the table columns of out
	mem      memory.Allocator
	tableURI string
	refs     int64
	rec      arrow.RecordBatch
	err      error
	// The deletion vector of the file being read.
	dvFile *Add
	dv     *roaring64.Bitmap
}

func (r *rowIDScan) Schema() *arrow.Schema          { return r.out }
func (r *rowIDScan) RecordBatch() arrow.RecordBatch { return r.rec }
func (r *rowIDScan) Record() arrow.RecordBatch      { return r.rec }
func (r *rowIDScan) Err() error                     { return r.err }
func (r *rowIDScan) Retain()                        { r.refs++ }

func (r *rowIDScan) Release() {
	if r.refs--; r.refs == 0 {
		if r.rec != nil {
			r.rec.Release()
			r.rec = nil
		}
		r.sc.Release()
	}
}

func (r *rowIDScan) Next() bool {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	for r.err == nil && r.sc.Next() {
		rec, err := r.next(r.sc.RecordBatch())
		if err != nil {
			r.err = err
			return false
		}
		if rec.NumRows() > 0 {
			r.rec = rec
			return true
		}
		rec.Release()
	}
	if r.err == nil {
		r.err = r.sc.Err()
	}
	return false
}

// next completes a scanned record's row ids, filters its rows and projects the output.
func (r *rowIDScan) next(raw arrow.RecordBatch) (arrow.RecordBatch, error) {
	file, first, _ := r.sc.Position()
	if file != r.dvFile {
		r.dvFile, r.dv = file, nil
		if file.DeletionVector != nil {
			t := r.sc
			dv, err := loadDeletionVector(r.ctx, t.store, t.root, r.tableURI, file.DeletionVector)
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", file.Path, err)
			}
			r.dv = dv
		}
	}
	idx := make([]int64, raw.NumRows())
	for i := range idx {
		idx[i] = first + int64(i)
	}
	rec, err := r.rc.fill(r.mem, raw, file, physicalRows(r.dv, idx))
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", file.Path, err)
	}
	defer rec.Release()
	work := rec
	if r.filter != nil {
		rows, all, err := r.filter.KeptRows(rec)
		if err != nil {
			return nil, err
		}
		switch {
		case len(rows) == 0:
			return rec.NewSlice(0, 0), nil
		case !all:
			if work, err = arrowx.Take(r.ctx, r.mem, rec, rows); err != nil {
				return nil, err
			}
			defer work.Release()
		}
	}
	nc := int(work.NumCols())
	cols := append(append([]arrow.Array{}, work.Columns()[:r.nOut]...), work.Column(nc-2), work.Column(nc-1))
	return array.NewRecordBatch(r.out, cols, work.NumRows()), nil
}
