package keyed

import (
	"context"
	"errors"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Fanout spreads records over key hash ranges set aside, keeping the order of the rows
// within each range. Its ranges share one spill file, an IPC stream whose record
// messages each belong to one range (a range is read back as the stream's schema
// message, its records' messages and the end of the stream): a range that gets rows
// costs no file of its own, whose creation (hundreds at once) is slow on some file
// systems. A schema with dictionaries, whose messages a record's may depend on, gets a
// file per range instead.
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
	dir       *Dir
	schema    *arrow.Schema
	out       *sharedFile // the ranges' one file (nil: none yet, or files)
	dict      bool        // the schema has dictionaries: ...
	files     []*File     // ... a file per range
	segs      [][]segment // per range: its records' messages in out
	rows      []int64     // per range: rows set aside ...
	bytes     []int64     // ... and their Arrow bytes (an estimate of what reading them holds)
	starts    []int
	join      bool
	held      []arrow.RecordBatch // (join) records written, not yet set aside
	ranges    []uint16            // their rows' ranges
	heldBytes int64               // their bytes
}

// NewFanout starts a fanout of records of schema (nil: one that gets none) in dir.
func NewFanout(dir *Dir, schema *arrow.Schema) *Fanout {
	return &Fanout{dir: dir, schema: schema, dict: schema != nil && hasDictionaries(schema), files: make([]*File, Ranges), segs: make([][]segment, Ranges),
		rows: make([]int64, Ranges), bytes: make([]int64, Ranges), starts: make([]int, Ranges+1)}
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
	f.heldBytes += RecordBytes(rec)
	if f.heldBytes < f.dir.join {
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
	f.held, f.heldBytes = nil, 0
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
		part := sorted.NewSlice(int64(lo), int64(hi))
		err := f.writeRange(p, part)
		part.Release()
		if err != nil {
			return err
		}
		f.rows[p] += int64(hi - lo)
		f.bytes[p] += int64(per * float64(hi-lo))
	}
	return nil
}

// writeRange sets aside part, rows of range p.
func (f *Fanout) writeRange(p int, part arrow.RecordBatch) error {
	if f.dict {
		if f.files[p] == nil {
			var err error
			if f.files[p], err = f.dir.Create(f.schema); err != nil {
				return err
			}
		}
		return f.files[p].Write(part, 0)
	}
	if f.out == nil {
		out, err := f.dir.createShared(f.schema)
		if err != nil {
			return err
		}
		f.out = out
	}
	sg, err := f.out.write(part)
	if err != nil {
		return err
	}
	f.segs[p] = append(f.segs[p], sg)
	return nil
}

// Finish sets aside what a joining fanout holds and finishes its file(s).
func (f *Fanout) Finish() error {
	if err := f.flush(context.Background()); err != nil {
		f.Release()
		return err
	}
	errs := []error{f.out.finish()}
	for _, s := range f.files {
		errs = append(errs, s.Finish())
	}
	return errors.Join(errs...)
}

// Release lets go of what a joining fanout holds (a run ended before Finish).
func (f *Fanout) Release() {
	arrowx.ReleaseRecords(f.held)
	f.held, f.heldBytes, f.ranges = nil, 0, f.ranges[:0]
}

// Parts are the rows of the ranges [lo, hi) in range order, once the fanout is
// finished: the ranges in its shared file as one part (their records' messages one
// stream, read with one open), or a part per range that has a file of its own.
func (f *Fanout) Parts(lo, hi int) []*Part {
	var out []*Part
	var shared *Part
	for p := lo; p < hi; p++ {
		switch {
		case f.files[p] != nil:
			out = append(out, f.files[p].Part())
		case len(f.segs[p]) > 0:
			if shared == nil {
				shared = &Part{path: f.out.path, schema: f.schema, head: f.out.head}
				out = append(out, shared)
			}
			shared.segs = append(shared.segs, f.segs[p]...)
		}
	}
	return out
}

// PartBytes and PartRows are what range p holds.
func (f *Fanout) PartBytes(p int) int64 { return f.bytes[p] }
func (f *Fanout) PartRows(p int) int64  { return f.rows[p] }

// Rows is the number of rows set aside.
func (f *Fanout) Rows() int64 {
	var n int64
	for _, r := range f.rows {
		n += r
	}
	return n
}

// hasDictionaries reports whether a schema has a dictionary column (nested too).
func hasDictionaries(s *arrow.Schema) bool {
	var has func(t arrow.DataType) bool
	has = func(t arrow.DataType) bool {
		switch t := t.(type) {
		case *arrow.DictionaryType:
			return true
		case arrow.NestedType:
			return slices.ContainsFunc(t.Fields(), func(f arrow.Field) bool { return has(f.Type) })
		}
		return false
	}
	return slices.ContainsFunc(s.Fields(), func(f arrow.Field) bool { return has(f.Type) })
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
