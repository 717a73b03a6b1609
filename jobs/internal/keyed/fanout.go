package keyed

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Fanout spreads records over spill files by key hash range, keeping the order of the
// rows within each range: one file per range that gets rows.
//
// A joining fanout (Join) holds the records written until they come to the directory's
// join size, then sets them aside together: a range's rows of several records are one
// spill record (one IPC message), not one each. Spread over Ranges ranges, a decoded
// record of 64 k rows is 256 records of 250 rows, and a message's fixed cost (its
// metadata written, then read back into a record of its own, and what each pass does
// per record) would outweigh its rows. A spill record of a joining fanout may thus hold
// rows written in different records: only for records whose rows carry all they need
// (a record-level fact, such as its source file, would be lost).
type Fanout struct {
	dir    *Dir
	schema *arrow.Schema
	files  []*File
	starts []int
	join   bool
	held   []arrow.RecordBatch // (join) records written, not yet set aside
	ranges []uint16            // their rows' ranges
	bytes  int64               // their bytes
}

// NewFanout starts a fanout of records of schema (nil: one that gets none) in dir.
func NewFanout(dir *Dir, schema *arrow.Schema) *Fanout {
	return &Fanout{dir: dir, schema: schema, files: make([]*File, Ranges), starts: make([]int, Ranges+1)}
}

// Schema is the schema of the records (nil: none were written).
func (f *Fanout) Schema() *arrow.Schema { return f.schema }

// Join makes f a joining fanout (see Fanout), and returns it.
func (f *Fanout) Join() *Fanout {
	f.join = true
	return f
}

// Write sends row i of rec (of the fanout's schema) to range ranges[i].
func (f *Fanout) Write(ctx context.Context, rec arrow.RecordBatch, ranges []uint16) error {
	if !f.join || rec.NumRows() == 0 {
		return f.write(ctx, []arrow.RecordBatch{rec}, ranges)
	}
	rec.Retain()
	f.held = append(f.held, rec)
	f.ranges = append(f.ranges, ranges[:rec.NumRows()]...)
	f.bytes += RecordBytes(rec)
	if f.bytes < f.dir.join {
		return nil
	}
	return f.flush(ctx)
}

// flush sets aside the records a joining fanout holds, as one.
func (f *Fanout) flush(ctx context.Context) error {
	if len(f.held) == 0 {
		return nil
	}
	held := f.held
	f.held, f.bytes = nil, 0
	defer arrowx.ReleaseRecords(held)
	err := f.write(ctx, held, f.ranges)
	f.ranges = f.ranges[:0]
	return err
}

// write sets aside the rows of recs (one after another) by their ranges.
func (f *Fanout) write(ctx context.Context, recs []arrow.RecordBatch, ranges []uint16) error {
	n, bytes := 0, int64(0)
	for _, r := range recs {
		n, bytes = n+int(r.NumRows()), bytes+RecordBytes(r)
	}
	if n == 0 {
		return nil
	}
	ranges = ranges[:n]
	clear(f.starts)
	for _, p := range ranges {
		f.starts[p+1]++
	}
	for p := 1; p < len(f.starts); p++ {
		f.starts[p] += f.starts[p-1]
	}
	sorted, err := arrowx.Partition(ctx, memory.DefaultAllocator, recs, ranges, f.starts)
	if err != nil {
		return err
	}
	defer sorted.Release()
	per := float64(bytes) / float64(n)
	for p := range len(f.files) {
		lo, hi := f.starts[p], f.starts[p+1]
		if lo == hi {
			continue
		}
		if f.files[p] == nil {
			if f.files[p], err = f.dir.Create(f.schema); err != nil {
				return err
			}
		}
		part := sorted.NewSlice(int64(lo), int64(hi))
		err := f.files[p].Write(part, int64(per*float64(hi-lo)))
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// Finish sets aside what a joining fanout holds and finishes every file.
func (f *Fanout) Finish() error {
	if err := f.flush(context.Background()); err != nil {
		f.Release()
		return err
	}
	var errs []error
	for _, s := range f.files {
		errs = append(errs, s.Finish())
	}
	return errors.Join(errs...)
}

// Release lets go of what a joining fanout holds (a run ended before Finish).
func (f *Fanout) Release() {
	arrowx.ReleaseRecords(f.held)
	f.held, f.bytes, f.ranges = nil, 0, f.ranges[:0]
}

// Files are the files of the ranges [lo, hi) (nil for a range without rows).
func (f *Fanout) Files(lo, hi int) []*File { return f.files[lo:hi] }

// PartBytes and PartRows are what range p holds.
func (f *Fanout) PartBytes(p int) int64 { return f.files[p].Bytes() }
func (f *Fanout) PartRows(p int) int64  { return f.files[p].Rows() }

// Rows is the number of rows set aside.
func (f *Fanout) Rows() int64 {
	var n int64
	for _, s := range f.files {
		n += s.Rows()
	}
	return n
}

// Plan groups the ranges [0, Ranges) into consecutive runs whose cost (cost(p) of range
// p) stays within limit (a range over it alone is a run of its own).
func Plan(cost func(p int) int64, limit int64) [][2]int {
	var out [][2]int
	lo, sum := 0, int64(0)
	for p := range Ranges {
		c := cost(p)
		if p > lo && sum+c > limit {
			out = append(out, [2]int{lo, p})
			lo, sum = p, 0
		}
		sum += c
	}
	return append(out, [2]int{lo, Ranges})
}
