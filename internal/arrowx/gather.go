package arrowx

import (
	"context"
	"fmt"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
)

// Gather returns the rows of rec at the given indices, in that order (an index may
// repeat), as a record the caller releases. A run of consecutive indices is a zero-copy
// slice; flat columns (fixed-width, boolean, string and binary) are copied by hand, about
// twice as fast as compute.Take; other columns go through Take.
func Gather(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	n := len(rows)
	if n == 0 || int(rows[n-1])-int(rows[0]) == n-1 && isConsecutive(rows) {
		if n == 0 {
			return rec.NewSlice(0, 0), nil
		}
		return rec.NewSlice(int64(rows[0]), int64(rows[0])+int64(n)), nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer ReleaseArrays(cols)
	if n >= parallelGatherRows && rec.NumCols() > 1 {
		// A large gather's columns are copied on every core (a record may hold one
		// array in two columns).
		SettleNullCounts(rec.Columns())
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i, c := range rec.Columns() {
			g.Go(func() error { cols[i] = GatherArray(mem, c, rows); return nil })
		}
		g.Wait()
	} else {
		for i, c := range rec.Columns() {
			cols[i] = GatherArray(mem, c, rows)
		}
	}
	var rest []int // columns left to Take
	for i := range cols {
		if cols[i] == nil {
			rest = append(rest, i)
		}
	}
	if len(rest) > 0 {
		fields := make([]arrow.Field, len(rest))
		arrs := make([]arrow.Array, len(rest))
		for j, i := range rest {
			fields[j], arrs[j] = rec.Schema().Field(i), rec.Column(i)
		}
		sub := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
		t, err := Take(ctx, mem, sub, rows)
		sub.Release()
		if err != nil {
			return nil, err
		}
		for j, i := range rest {
			cols[i] = t.Column(j)
			cols[i].Retain()
		}
		t.Release()
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(n)), nil
}

// parallelGatherRows is the smallest gather whose columns are copied concurrently.
const parallelGatherRows = 16 << 10

func isConsecutive(rows []int32) bool {
	for i := 1; i < len(rows); i++ {
		if rows[i] != rows[i-1]+1 {
			return false
		}
	}
	return true
}

// GatherArray copies the values at rows of a flat array (a column of one value gives a
// slice of it, see sameValueSlice), or returns nil for other types.
func GatherArray(mem memory.Allocator, arr arrow.Array, rows []int32) arrow.Array {
	if s := sameValueSlice(arr, len(rows)); s != nil {
		return s
	}
	d := arr.Data()
	n := len(rows)
	var buffers []*memory.Buffer
	switch a := arr.(type) {
	case *array.Boolean:
		out := newBitmap(mem, n)
		bits, src, off := out.Bytes(), d.Buffers()[1].Bytes(), d.Offset()
		for j, r := range rows {
			if bitutil.BitIsSet(src, off+int(r)) {
				bitutil.SetBit(bits, j)
			}
		}
		buffers = []*memory.Buffer{nil, out}
	case *array.String:
		buffers = gatherVarBinary(mem, a.ValueOffsets(), a.ValueBytes(), rows)
	case *array.Binary:
		buffers = gatherVarBinary(mem, a.ValueOffsets(), a.ValueBytes(), rows)
	default:
		if !plainFixedWidth[arr.DataType().ID()] || len(d.Buffers()) != 2 {
			return nil
		}
		w := arr.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
		out := newBuffer(mem, n*w)
		dst, src := out.Bytes(), d.Buffers()[1].Bytes()[d.Offset()*w:]
		switch w {
		case 8:
			s, t := arrow.Int64Traits.CastFromBytes(src), arrow.Int64Traits.CastFromBytes(dst)
			for j, r := range rows {
				t[j] = s[r]
			}
		case 4:
			s, t := arrow.Int32Traits.CastFromBytes(src), arrow.Int32Traits.CastFromBytes(dst)
			for j, r := range rows {
				t[j] = s[r]
			}
		default:
			for j, r := range rows {
				copy(dst[j*w:(j+1)*w], src[int(r)*w:(int(r)+1)*w])
			}
		}
		buffers = []*memory.Buffer{nil, out}
	}
	nulls := 0
	if arr.NullN() > 0 {
		valid := newBitmap(mem, n)
		bits := valid.Bytes()
		for j, r := range rows {
			if arr.IsValid(int(r)) {
				bitutil.SetBit(bits, j)
			} else {
				nulls++
			}
		}
		buffers[0] = valid
	}
	return arrayOf(arr.DataType(), n, buffers, nulls)
}

// arrayOf is an array of type typ and n rows made of buffers (which it releases).
func arrayOf(typ arrow.DataType, n int, buffers []*memory.Buffer, nulls int) arrow.Array {
	d := array.NewData(typ, n, buffers, nil, nulls, 0)
	for _, b := range buffers {
		if b != nil {
			b.Release()
		}
	}
	defer d.Release()
	return array.MakeFromData(d)
}

// plainFixedWidth are the types whose values are one buffer of fixed-width bytes.
var plainFixedWidth = map[arrow.Type]bool{
	arrow.INT8: true, arrow.INT16: true, arrow.INT32: true, arrow.INT64: true,
	arrow.UINT8: true, arrow.UINT16: true, arrow.UINT32: true, arrow.UINT64: true,
	arrow.FLOAT16: true, arrow.FLOAT32: true, arrow.FLOAT64: true,
	arrow.DATE32: true, arrow.DATE64: true, arrow.TIMESTAMP: true, arrow.TIME32: true, arrow.TIME64: true,
	arrow.DURATION: true, arrow.DECIMAL128: true, arrow.DECIMAL256: true,
}

// sameValueSlice returns arr's first n rows when every row of arr holds one and the same
// string (no nulls) and arr has n rows or more, else nil: gathering n rows of such a
// column (a load's file name) gives those rows whichever rows are taken, and a slice
// shares arr's bytes (the scan's own, see pqfile's run batches) instead of copying a
// file name a row.
func sameValueSlice(arr arrow.Array, n int) arrow.Array {
	var offs []int32
	var vals []byte
	switch a := arr.(type) {
	case *array.String:
		offs, vals = a.ValueOffsets(), a.ValueBytes()
	case *array.Binary:
		offs, vals = a.ValueOffsets(), a.ValueBytes()
	default:
		return nil
	}
	if n < 2 || arr.Len() < n || arr.NullN() > 0 || !OneValue(offs, vals) {
		return nil
	}
	d := array.NewSliceData(arr.Data(), 0, int64(n))
	defer d.Release()
	d.(*array.Data).SetNullN(0)
	return array.MakeFromData(d)
}

// gatherVarBinary builds the offsets and value buffers of the values at rows.
func gatherVarBinary(mem memory.Allocator, offs []int32, vals []byte, rows []int32) []*memory.Buffer {
	n := len(rows)
	ob := newBuffer(mem, (n+1)*4)
	o := arrow.Int32Traits.CastFromBytes(ob.Bytes())
	total := 0
	for j, r := range rows {
		o[j] = int32(total)
		total += int(offs[r+1] - offs[r])
	}
	o[n] = int32(total)
	if total > 1<<31-1 {
		panic(fmt.Sprintf("gather: %d bytes of strings overflow 32-bit offsets", total))
	}
	vb := newBuffer(mem, total)
	dst := vb.Bytes()
	base := offs[0] // ValueOffsets and ValueBytes are relative to the array's slice
	for j := 0; j < n; {
		// A run of consecutive rows is one copy (a MERGE copies most rows in runs).
		k := j + 1
		for k < n && rows[k] == rows[k-1]+1 {
			k++
		}
		copy(dst[o[j]:o[k]], vals[offs[rows[j]]-base:offs[rows[k-1]+1]-base])
		j = k
	}
	return []*memory.Buffer{nil, ob, vb}
}

// newBuffer allocates a buffer of n bytes, which the caller overwrites whole.
func newBuffer(mem memory.Allocator, n int) *memory.Buffer {
	b := memory.NewResizableBuffer(mem)
	b.Resize(n)
	return b
}

// newBitmap allocates a cleared bitmap of n bits.
func newBitmap(mem memory.Allocator, n int) *memory.Buffer {
	b := newBuffer(mem, int(bitutil.BytesForBits(int64(n))))
	clear(b.Bytes())
	return b
}

// Take gathers the given rows of rec with compute.Take, for every column type.
func Take(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	ib := array.NewInt32Builder(mem)
	ib.AppendValues(rows, nil)
	idx := ib.NewArray()
	ib.Release()
	defer idx.Release()
	ctx = compute.WithAllocator(ctx, mem)
	cols := make([]arrow.Array, rec.NumCols())
	defer ReleaseArrays(cols)
	for i := range cols {
		c, err := compute.TakeArray(ctx, rec.Column(i), idx)
		if err != nil {
			return nil, fmt.Errorf("gather rows of column %s: %w", rec.ColumnName(i), err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(rows))), nil
}

// GatherColumn gathers the given rows of one array of any type: GatherArray where it
// copies the type, compute.Take otherwise.
func GatherColumn(ctx context.Context, mem memory.Allocator, arr arrow.Array, rows []int32) (arrow.Array, error) {
	if g := GatherArray(mem, arr, rows); g != nil {
		return g, nil
	}
	ib := array.NewInt32Builder(mem)
	ib.AppendValues(rows, nil)
	idx := ib.NewArray()
	ib.Release()
	defer idx.Release()
	c, err := compute.TakeArray(compute.WithAllocator(ctx, mem), arr, idx)
	if err != nil {
		return nil, fmt.Errorf("gather rows: %w", err)
	}
	return c, nil
}

// GatherRows is Gather with the default allocator.
func GatherRows(ctx context.Context, rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	return Gather(ctx, memory.DefaultAllocator, rec, rows)
}
