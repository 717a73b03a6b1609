package keyed

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Ref names a row among several records (of one schema): row Row of record Rec.
type Ref struct{ Rec, Row int32 }

// Gather returns the rows refs name in recs, in that order, as records of at most max
// rows (max <= 0: no bound); consecutive refs into one record are one gather.
func Gather(ctx context.Context, recs []arrow.RecordBatch, refs []Ref, max int) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	var rows []int32
	for lo := 0; lo < len(refs); {
		r := refs[lo].Rec
		hi := lo
		rows = rows[:0]
		for hi < len(refs) && refs[hi].Rec == r && (max <= 0 || len(rows) < max) {
			rows = append(rows, refs[hi].Row)
			hi++
		}
		g, err := arrowx.GatherRows(ctx, recs[r], rows)
		if err != nil {
			arrowx.ReleaseRecords(out)
			return nil, err
		}
		out = append(out, g)
		lo = hi
	}
	return out, nil
}

// GatherOne is Gather as one record (nil when refs is empty). Refs that hop from
// record to record (rows taken in key order from records in the order they were
// read) are gathered from the records concatenated, in one gather: one small record
// per run of refs, then concatenated, costs several times more.
func GatherOne(ctx context.Context, recs []arrow.RecordBatch, refs []Ref) (arrow.RecordBatch, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if len(recs) > 1 {
		runs, total := 1, int64(0)
		for i := 1; i < len(refs); i++ {
			if refs[i].Rec != refs[i-1].Rec {
				runs++
			}
		}
		for _, r := range recs {
			total += r.NumRows()
		}
		if int64(runs)*gatherRunRows > total {
			return gatherConcat(ctx, recs, refs)
		}
	}
	parts, err := Gather(ctx, recs, refs, 0)
	if err != nil {
		return nil, err
	}
	defer arrowx.ReleaseRecords(parts)
	return arrowx.Concat(memory.DefaultAllocator, parts)
}

// gatherRunRows is about the rows whose copy in a concatenation costs as much as a
// gather of one run of refs (a record and its buffers for each column).
const gatherRunRows = 64

// gatherConcat is GatherOne from recs concatenated.
func gatherConcat(ctx context.Context, recs []arrow.RecordBatch, refs []Ref) (arrow.RecordBatch, error) {
	starts := make([]int32, len(recs))
	var n int64
	for i, r := range recs {
		starts[i] = int32(n)
		n += r.NumRows()
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("internal error: a gather from %d rows", n)
	}
	all, err := arrowx.Concat(memory.DefaultAllocator, recs)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	idx := make([]int32, len(refs))
	for i, r := range refs {
		idx[i] = starts[r.Rec] + r.Row
	}
	return arrowx.GatherRows(ctx, all, idx)
}

// Int64s is v as an Arrow array.
func Int64s(v []int64) arrow.Array {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(v, nil)
	return b.NewArray()
}

// Own is rec with buffers of its own: a slice of a larger record (a gather of
// consecutive rows is one) is copied, so that it does not keep the larger one alive.
func Own(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	sliced := false
	for _, c := range rec.Columns() {
		if c.Data().Offset() != 0 || ArrayBytes(c.Data()) < int64(c.Data().(*array.Data).SizeInBytes())/2 {
			sliced = true
		}
	}
	if !sliced {
		rec.Retain()
		return rec, nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		cp, err := array.Concatenate([]arrow.Array{c}, memory.DefaultAllocator)
		if err != nil {
			for _, x := range cols[:i] {
				x.Release()
			}
			return nil, err
		}
		cols[i] = cp
	}
	out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}
