package keyed

import (
	"context"
	"errors"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// The target side of a run: the rows of the target table its passes need, each with
// its place (file and row: the MERGE matches by place). In memory it is the live scan
// of the target snapshot; over the budget it is set aside once, by key hash range, in
// spill files that each pass reads its ranges of: the rows of the keys the batch may
// have (its Filter), the rows the stage needs whatever the batch (KeepAll), or every
// row (All).

// Spilled target rows carry their place in two columns after the kept and extra ones.
const (
	fileColumn = "_orchestrator_file"
	rowColumn  = "_orchestrator_row"
)

// TargetSpec says what of the target a stage's passes read.
type TargetSpec struct {
	// Columns are the columns scanned (nil: all).
	Columns []string
	// Filter, when set, prunes the live scan's files by their stats (a small batch's
	// keys); it does not apply to a scan that is set aside.
	Filter expr.Predicate
	// ReadAhead reads the live scan's next file while a record is worked on.
	ReadAhead bool
	// Ahead, when set, is the live scan begun before the target was made (StartAhead,
	// of the same snapshot and Columns): Each takes its records unless Filter is set.
	// The target stops it when it does not use it.
	Ahead *Ahead
	// Select locates a scanned record's key columns and says which of its rows a pass
	// needs whatever the batch's keys (keepAll nil: none).
	Select func(rec arrow.RecordBatch) (keys []int, keepAll func(i int) bool, err error)
	// All sets aside every row.
	All bool
	// KeepNone sets aside none of the scanned columns, only Extra's.
	KeepNone bool
	// Extra, when set, computes the columns set aside after the kept ones (ExtraFields)
	// for the rows keep of rec (a spilled record's TargetRecord.Extra).
	ExtraFields []arrow.Field
	Extra       func(ctx context.Context, rec arrow.RecordBatch, keep []int32) ([]arrow.Array, error)
}

// Target is the target side of a run.
type Target struct {
	snap    *delta.Snapshot
	spec    TargetSpec
	fileIdx map[string]int32
	out     *Fanout // set aside (nil: the live scan)
}

// NewTarget is the target side of snap.
func NewTarget(snap *delta.Snapshot, spec TargetSpec) *Target {
	t := &Target{snap: snap, spec: spec, fileIdx: map[string]int32{}}
	for i, a := range snap.Files() {
		t.fileIdx[a.Path] = int32(i)
	}
	return t
}

// Snapshot is the target snapshot.
func (t *Target) Snapshot() *delta.Snapshot { return t.snap }

// Spilled reports whether the target side is set aside.
func (t *Target) Spilled() bool { return t.out != nil }

// FileIndex is the index of a target file (Add.Path) among the snapshot's files.
func (t *Target) FileIndex(path string) (int32, bool) {
	i, ok := t.fileIdx[path]
	return i, ok
}

// Spill scans the target once (a run of passes of limit bytes, spill files in dir) and
// sets aside the rows its passes need: of keys filter may have, or all (spec).
func (t *Target) Spill(ctx context.Context, dir *Dir, limit int64, filter Filter) error {
	t.spec.Ahead.Stop() // (set aside: scanned here)
	sc, err := t.snap.Scan(ctx, ScanOptions(limit, delta.ScanOptions{Columns: t.spec.Columns, FilesOnly: true}))
	if err != nil {
		return err
	}
	defer sc.Release()
	var keep []int32
	var ranges []uint16
	var buf []byte
	var files, rows []int64
	var hashes []uint64
	var may []bool
	for sc.Next() {
		rec := sc.RecordBatch()
		file, first, ok := sc.Position()
		if !ok {
			return errors.New("the scan of the target lost the positions of its rows")
		}
		keys, keepAll, err := t.spec.Select(rec)
		if err != nil {
			return err
		}
		keep, ranges, files, rows, hashes = keep[:0], ranges[:0], files[:0], rows[:0], hashes[:0]
		fi := int64(t.fileIdx[file.Path])
		for i := range int(rec.NumRows()) {
			if buf, err = AppendKey(buf[:0], rec, keys, i); err != nil {
				return err
			}
			hashes = append(hashes, uint64(Hash(buf)))
		}
		may = may[:0]
		if !t.spec.All {
			may = filter.mayHaveHashes(hashes, may)
		}
		for i, h := range hashes {
			if !t.spec.All && !may[i] && (keepAll == nil || !keepAll(i)) {
				continue
			}
			keep, ranges = append(keep, int32(i)), append(ranges, rangeOf(h))
			files, rows = append(files, fi), append(rows, first+int64(i))
		}
		if len(keep) == 0 {
			continue
		}
		if err := t.setAside(ctx, dir, rec, keep, ranges, files, rows); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if t.out == nil {
		t.out = NewFanout(dir, nil)
	}
	return t.out.Finish()
}

// setAside writes the rows keep of a scanned record, with their extra columns and
// places, to their ranges.
func (t *Target) setAside(ctx context.Context, dir *Dir, rec arrow.RecordBatch, keep []int32, ranges []uint16, files, rows []int64) error {
	var fields []arrow.Field
	var cols []arrow.Array
	if !t.spec.KeepNone {
		kept, err := arrowx.GatherRows(ctx, rec, keep)
		if err != nil {
			return err
		}
		defer kept.Release()
		fields, cols = slices.Clone(kept.Schema().Fields()), slices.Clone(kept.Columns())
	}
	if t.spec.Extra != nil {
		ec, err := t.spec.Extra(ctx, rec, keep)
		if err != nil {
			return err
		}
		defer func() {
			for _, a := range ec {
				a.Release()
			}
		}()
		fields, cols = append(fields, t.spec.ExtraFields...), append(cols, ec...)
	}
	kept := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(keep)))
	defer kept.Release()
	return t.write(ctx, dir, kept, files, rows, ranges)
}

// WriteSpilled sets aside rows of the target that a stage holds (so the target is not
// read again): rec has the kept and extra columns, places[i] is row i's place and
// ranges[i] its key's range. Finish ends it.
func (t *Target) WriteSpilled(ctx context.Context, dir *Dir, rec arrow.RecordBatch, places []Place, ranges []uint16) error {
	files, rows := make([]int64, len(places)), make([]int64, len(places))
	for i, p := range places {
		files[i], rows[i] = int64(p.File), p.Row
	}
	return t.write(ctx, dir, rec, files, rows, ranges)
}

// write sets aside rec's rows with their places (files, rows) by range.
func (t *Target) write(ctx context.Context, dir *Dir, rec arrow.RecordBatch, files, rows []int64, ranges []uint16) error {
	fa, ra := Int64s(files), Int64s(rows)
	defer fa.Release()
	defer ra.Release()
	fields := append(slices.Clone(rec.Schema().Fields()), arrow.Field{Name: fileColumn, Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: rowColumn, Type: arrow.PrimitiveTypes.Int64})
	with := array.NewRecordBatch(arrow.NewSchema(fields, nil), append(slices.Clone(rec.Columns()), fa, ra), rec.NumRows())
	defer with.Release()
	if t.out == nil {
		t.out = NewFanout(dir, with.Schema()).Join() // (each row carries its place)
	}
	return t.out.Write(ctx, with, ranges)
}

// Finish ends what WriteSpilled set aside.
func (t *Target) Finish(dir *Dir) error {
	if t.out == nil {
		t.out = NewFanout(dir, nil)
	}
	return t.out.Finish()
}

// TargetRecord is a record of the target side: the target's columns (live: those
// scanned; set aside: those kept), the extra columns set aside, and each row's place.
type TargetRecord struct {
	Rec   arrow.RecordBatch
	Extra []arrow.Array // set aside: Extra's columns (live: nil)
	file  int32         // live: the file of every row, the first at first
	first int64
	files *array.Int64 // set aside: each row's file and row
	rows  *array.Int64
}

// Live reports whether the record comes from the live scan.
func (r TargetRecord) Live() bool { return r.files == nil }

// Place is where row i is in the target.
func (r TargetRecord) Place(i int) Place {
	if r.files == nil {
		return Place{File: r.file, Row: r.first + int64(i)}
	}
	return Place{File: int32(r.files.Value(i)), Row: r.rows.Value(i)}
}

// Each calls fn with the target side's records of the key ranges [lo, hi): set aside,
// those of the ranges' files; live (then lo, hi are 0, Ranges), the scan's.
func (t *Target) Each(ctx context.Context, lo, hi int, fn func(TargetRecord) error) error {
	if t.out != nil {
		return t.eachSpilled(ctx, lo, hi, fn)
	}
	if lo != 0 || hi != Ranges {
		return errors.New("internal error: a live target scan of some key ranges")
	}
	if a := t.spec.Ahead; a != nil {
		if t.spec.Filter == nil && a.take(t.snap) {
			return t.eachAhead(ctx, a, fn)
		}
		a.Stop()
	}
	sc, err := t.snap.Scan(ctx, delta.ScanOptions{Columns: t.spec.Columns, Filter: t.spec.Filter, FilesOnly: true, ReadAhead: t.spec.ReadAhead})
	if err != nil {
		return err
	}
	defer sc.Release()
	for sc.Next() {
		file, first, ok := sc.Position()
		if !ok {
			return errors.New("the scan of the target lost the positions of its rows")
		}
		if err := fn(TargetRecord{Rec: sc.RecordBatch(), file: t.fileIdx[file.Path], first: first}); err != nil {
			return err
		}
	}
	return sc.Err()
}

func (t *Target) eachSpilled(ctx context.Context, lo, hi int, fn func(TargetRecord) error) error {
	return Each(ctx, t.out.Parts(lo, hi), func(rec arrow.RecordBatch) error {
		n := int(rec.NumCols())
		nkeep := n - 2 - len(t.spec.ExtraFields)
		kept := array.NewRecordBatch(arrow.NewSchema(rec.Schema().Fields()[:nkeep], nil), rec.Columns()[:nkeep], rec.NumRows())
		defer kept.Release()
		return fn(TargetRecord{Rec: kept, Extra: rec.Columns()[nkeep : n-2],
			files: rec.Column(n - 2).(*array.Int64), rows: rec.Column(n - 1).(*array.Int64)})
	})
}

// Rows is the number of rows set aside (0: live).
func (t *Target) Rows() int64 {
	if t.out == nil {
		return 0
	}
	return t.out.Rows()
}
