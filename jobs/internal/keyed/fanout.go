package keyed

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
)

// Fanout spreads records over spill files by key hash range, keeping the order of the
// rows within each range: one file per range that gets rows.
type Fanout struct {
	dir    *Dir
	schema *arrow.Schema
	files  []*File
	perm   []int32
	starts []int
}

// NewFanout starts a fanout of records of schema (nil: one that gets none) in dir.
func NewFanout(dir *Dir, schema *arrow.Schema) *Fanout {
	return &Fanout{dir: dir, schema: schema, files: make([]*File, Ranges), starts: make([]int, Ranges+1)}
}

// Schema is the schema of the records (nil: none were written).
func (f *Fanout) Schema() *arrow.Schema { return f.schema }

// Write sends row i of rec (of the fanout's schema) to range ranges[i].
func (f *Fanout) Write(ctx context.Context, rec arrow.RecordBatch, ranges []uint16) error {
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	clear(f.starts)
	for _, p := range ranges {
		f.starts[p+1]++
	}
	for p := 1; p < len(f.starts); p++ {
		f.starts[p] += f.starts[p-1]
	}
	f.perm = append(f.perm[:0], make([]int32, n)...)
	next := append([]int(nil), f.starts[:len(f.starts)-1]...)
	for i, p := range ranges {
		f.perm[next[p]] = int32(i)
		next[p]++
	}
	sorted, err := delta.GatherRows(ctx, rec, f.perm)
	if err != nil {
		return err
	}
	defer sorted.Release()
	per := float64(RecordBytes(rec)) / float64(n)
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

// Finish finishes every file.
func (f *Fanout) Finish() error {
	var errs []error
	for _, s := range f.files {
		errs = append(errs, s.Finish())
	}
	return errors.Join(errs...)
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
