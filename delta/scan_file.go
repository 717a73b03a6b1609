package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
)

// fileScan is the reading of one data file: its open columns and where it is.
type fileScan struct {
	add     *Add
	cols    *pqfile.Columns // nil: no data column is read (rows counts the rows)
	closeFn func()          // closes the file
	// runs are the runs of consecutive row groups still to read after cols' (row
	// groups pruned between them), each opened when the one before ends; open opens
	// a run's columns.
	runs  [][]int
	open  func(rowGroups []int) (*pqfile.Columns, error)
	fr    *pqarrow.FileReader
	rows  int64             // rows left to emit when no data column is read
	next  int64             // index in the file of the next row read
	dv    *roaring64.Bitmap // rows its deletion vector deletes (nil: none)
	sel   bool              // dv holds the rows to keep instead (change feed of a DV update)
	kept  int64             // rows returned so far (the next row's logical index)
	stats ScanStats         // what reading the file added, not yet counted by the scan
	// want is, with column mapping, the field each column read holds (the file's
	// columns are renamed to their names, nested ones too); logical is the schema they
	// read as, made from the first record.
	want    []*StructField
	logical *arrow.Schema
	// colOf maps, with Pick, each work column to its index in the file's columns read
	// (-1: not in the file, or a partition column); rgs are the row groups to read, and
	// fan reads them.
	colOf []int
	rgs   []int
	fan   *rowGroupFanOut
}

// read returns the file's next non-empty record and its position, or nil at its end.
// What it read is counted in f.stats.
func (f *fileScan) read(ctx context.Context, s *Scanner) (arrow.RecordBatch, position, error) {
	if s.pick != nil {
		return f.readPicked(ctx, s)
	}
	return f.readWhole(ctx, s)
}

func (f *fileScan) readWhole(ctx context.Context, s *Scanner) (arrow.RecordBatch, position, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, position{}, err
		}
		raw, err := f.nextRaw(s.opts.BatchSize)
		if err != nil {
			return nil, position{}, fmt.Errorf("scan %s: %w", f.add.Path, err)
		}
		if raw == nil {
			return nil, position{}, nil
		}
		if f.want != nil {
			raw = f.toLogical(raw)
		}
		phys := f.next
		f.next += raw.NumRows()
		f.stats.RowsRead += raw.NumRows()
		if f.dv != nil && raw.NumCols() > 0 {
			if rows, all := keptRowsOf(f.dv, phys, raw.NumRows(), f.sel); !all {
				kept, err := arrowx.Gather(ctx, s.mem, raw, rows)
				raw.Release()
				if err != nil {
					return nil, position{}, fmt.Errorf("scan %s: %w", f.add.Path, err)
				}
				raw = kept
			}
		}
		at := position{file: f.add, first: f.kept}
		f.kept += raw.NumRows()
		rec, err := s.finishBatch(ctx, raw, f.add)
		raw.Release()
		if err != nil {
			return nil, position{}, fmt.Errorf("scan %s: %w", f.add.Path, err)
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		f.stats.RowsOut += rec.NumRows()
		return rec, at, nil
	}
}

// openFile opens one data file (or, when no data column is needed, only counts its
// rows). Its stats count the opening, error or not.
func (s *Scanner) openFile(ctx context.Context, a *Add) (*fileScan, error) {
	f := &fileScan{add: a}
	if err := s.open(ctx, f); err != nil {
		return f, fmt.Errorf("scan %s: %w", a.Path, err)
	}
	return f, nil
}

func (s *Scanner) open(ctx context.Context, f *fileScan) error {
	a := f.add
	key, err := resolveFileKey(s.store, s.root, s.opts.TableURI, a.Path)
	if err != nil {
		return err
	}
	switch {
	case a.dvChange != nil:
		if f.dv, err = s.dvChangeRows(ctx, a.dvChange); err != nil {
			return err
		}
		f.sel = true
	case a.DeletionVector != nil:
		if f.dv, err = loadDeletionVector(ctx, s.store, s.root, s.opts.TableURI, a.DeletionVector); err != nil {
			return err
		}
	}
	fr, closeFn, err := openParquet(ctx, s.store, key, a.Size, s.mem)
	if err != nil {
		return err
	}
	f.stats.FilesRead++
	fileSchema, err := fr.Schema()
	if err != nil {
		closeFn()
		return err
	}
	var fields []int // top-level fields of the file to read
	if s.pick != nil {
		f.colOf = make([]int, len(s.work))
	}
	for k, wf := range s.work {
		if f.colOf != nil {
			f.colOf[k] = -1
		}
		if s.isPart[strings.ToLower(wf.Name)] {
			continue
		}
		if i := fileField(fileSchema.Fields(), wf); i >= 0 {
			if f.colOf != nil {
				f.colOf[k] = len(fields)
			}
			fields = append(fields, i)
			if s.mapped {
				f.want = append(f.want, wf)
			}
		}
	}
	if s.mapped && len(fields) == 0 {
		if err := checkMappedFile(fileSchema, s.schema); err != nil {
			closeFn()
			return err
		}
	}
	if len(fields) == 0 {
		f.rows = fr.ParquetReader().NumRows()
		switch {
		case f.sel:
			f.rows = int64(f.dv.GetCardinality())
		case f.dv != nil:
			f.rows -= int64(f.dv.GetCardinality())
		}
		closeFn()
		return nil
	}
	var rowGroups []int
	if !s.opts.FilesOnly || s.opts.RowGroups {
		rowGroups, err = s.keptRowGroups(fr, fileSchema, a, &f.stats)
	}
	if err != nil {
		closeFn()
		return err
	}
	if rowGroups != nil && len(rowGroups) == 0 {
		f.rows = 0 // every row group pruned
		closeFn()
		return nil
	}
	f.fr, f.closeFn = fr, closeFn
	f.open = func(rowGroups []int) (*pqfile.Columns, error) {
		open := pqfile.OpenColumns
		if s.pick != nil {
			open = pqfile.OpenColumnsToPick
		}
		rr, err := open(ctx, fr, s.mem, fields, rowGroups, s.opts.BatchSize, key)
		if err != nil {
			return nil, err
		}
		rr.Serial = s.opts.ParallelFiles && len(s.files) > 1 // the files are the fan-out
		return rr, nil
	}
	if s.pick != nil {
		// Picked: the row groups are read on several goroutines (pickRowGroups).
		if rowGroups == nil {
			rowGroups = pqfile.AllRowGroups(fr)
		}
		f.rgs = rowGroups
		return nil
	}
	// A run of consecutive row groups is read as one; where groups were pruned between
	// two, the next run starts at its own row of the file (deletion vectors and
	// positions count rows from the start of the file).
	f.runs = rowGroupRuns(rowGroups)
	first := f.runs[0]
	f.runs = f.runs[1:]
	if err := f.startRun(first); err != nil {
		closeFn()
		f.closeFn = nil
		return err
	}
	return nil
}

// rowGroupRuns splits ascending row groups into runs of consecutive ones (nil: one run
// of every group, nil).
func rowGroupRuns(rowGroups []int) [][]int {
	if rowGroups == nil {
		return [][]int{nil}
	}
	var runs [][]int
	for i, rg := range rowGroups {
		if i == 0 || rg != rowGroups[i-1]+1 {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], rg)
	}
	return runs
}

// startRun opens the columns of a run of row groups (nil: all) and sets the file's next
// row, physical and logical, to the run's first.
func (f *fileScan) startRun(rowGroups []int) error {
	cols, err := f.open(rowGroups)
	if err != nil {
		return err
	}
	if f.cols != nil {
		f.cols.Release()
	}
	f.cols = cols
	if len(rowGroups) == 0 || rowGroups[0] == 0 {
		return nil // (the file's first run: its first row)
	}
	md := f.fr.ParquetReader().MetaData()
	var phys int64
	for rg := range rowGroups[0] {
		phys += md.RowGroup(rg).NumRows()
	}
	// The rows before the run: those the deletion vector keeps (selects) are counted.
	f.next, f.kept = phys, phys
	if f.dv != nil && phys > 0 {
		n := int64(f.dv.Rank(uint64(phys - 1))) // rows of the bitmap below phys
		if f.sel {
			f.kept = n
		} else {
			f.kept = phys - n
		}
	}
	return nil
}

// nextRaw returns the next batch of the file (nil at its end). For files read without
// data columns it returns a record with no columns and the right row count.
func (f *fileScan) nextRaw(batch int64) (arrow.RecordBatch, error) {
	if f.cols == nil {
		if f.rows <= 0 {
			return nil, nil
		}
		n := min(f.rows, batch)
		f.rows -= n
		return array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, n), nil
	}
	for !f.cols.Next() {
		if err := f.cols.Err(); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if len(f.runs) == 0 {
			return nil, nil
		}
		run := f.runs[0]
		f.runs = f.runs[1:]
		if err := f.startRun(run); err != nil {
			return nil, err
		}
	}
	rec := f.cols.RecordBatch()
	rec.Retain()
	return rec, nil
}

func (f *fileScan) close() {
	if f.fan != nil {
		f.fan.stop()
		f.fan = nil
	}
	if f.cols != nil {
		f.cols.Release()
		f.cols = nil
	}
	if f.closeFn != nil {
		f.closeFn()
		f.closeFn = nil
	}
	f.rows = 0
}

// toLogical renames a record of the file's columns (physical names) to the fields they
// hold (column mapping), nested fields too, without copying.
func (f *fileScan) toLogical(raw arrow.RecordBatch) arrow.RecordBatch {
	if f.logical == nil {
		fields := make([]arrow.Field, len(f.want))
		for j, wf := range f.want {
			rf := raw.Schema().Field(j)
			rf.Type, _ = logicalType(wf.Type, rf.Type)
			rf.Name, rf.Metadata = wf.Name, arrow.Metadata{}
			fields[j] = rf
		}
		f.logical = arrow.NewSchema(fields, nil)
	}
	cols := make([]arrow.Array, len(f.want))
	for j := range cols {
		cols[j] = dschema.Relabel(raw.Column(j), f.logical.Field(j).Type)
	}
	out := array.NewRecordBatch(f.logical, cols, raw.NumRows())
	arrowx.ReleaseArrays(cols)
	raw.Release()
	return out
}
