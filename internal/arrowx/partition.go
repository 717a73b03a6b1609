package arrowx

import (
	"context"
	"fmt"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
)

// Partition returns rec's rows ordered by their parts, the rows of each part in their
// order: parts[i] is the part of row i, and the rows of part p are rows
// starts[p]..starts[p+1] of the result (starts: the parts' counts summed, len(starts)-1
// parts). It is Gather of the rows sorted by part, done the other way round: rec is read
// once in its order and each row written where its part's rows go. A gather in part
// order reads rec once per part, a row here and a row there: on a record larger than
// the processor's caches it is an order of magnitude slower. Flat columns (fixed-width,
// boolean, string, binary) are written so; other columns are gathered.
func Partition(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, parts []uint16, starts []int) (arrow.RecordBatch, error) {
	n := len(parts)
	if int(rec.NumRows()) != n || starts[len(starts)-1] != n {
		return nil, fmt.Errorf("internal error: partition of %d rows by %d parts summing to %d", rec.NumRows(), n, starts[len(starts)-1])
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer ReleaseArrays(cols)
	each := func(i int, c arrow.Array) { cols[i] = partitionArray(mem, c, parts, starts) }
	if n >= parallelGatherRows && rec.NumCols() > 1 {
		SettleNullCounts(rec.Columns()) // (a record may hold one array in two columns)
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i, c := range rec.Columns() {
			g.Go(func() error { each(i, c); return nil })
		}
		g.Wait()
	} else {
		for i, c := range rec.Columns() {
			each(i, c)
		}
	}
	var perm []int32
	for i := range cols {
		if cols[i] != nil {
			continue
		}
		if perm == nil {
			perm = partOrder(parts, starts)
		}
		c, err := GatherColumn(ctx, mem, rec.Column(i), perm)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", rec.ColumnName(i), err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(n)), nil
}

// partOrder is the rows in part order: the rows Partition's result holds, by place.
func partOrder(parts []uint16, starts []int) []int32 {
	perm := make([]int32, len(parts))
	next := append([]int(nil), starts[:len(starts)-1]...)
	for i, p := range parts {
		perm[next[p]] = int32(i)
		next[p]++
	}
	return perm
}

// partitionArray is Partition's work on one flat array, or nil for other types.
func partitionArray(mem memory.Allocator, arr arrow.Array, parts []uint16, starts []int) arrow.Array {
	n := len(parts)
	if s := sameValueSlice(arr, n); s != nil {
		return s
	}
	d := arr.Data()
	off := d.Offset()
	next := make([]int, len(starts)-1)
	var buffers []*memory.Buffer
	switch a := arr.(type) {
	case *array.Boolean:
		out := newBitmap(mem, n)
		bits, src := out.Bytes(), d.Buffers()[1].Bytes()
		copy(next, starts)
		for i, p := range parts {
			if bitutil.BitIsSet(src, off+i) {
				bitutil.SetBit(bits, next[p])
			}
			next[p]++
		}
		buffers = []*memory.Buffer{nil, out}
	case *array.String:
		buffers = partitionVarBinary(mem, a.ValueOffsets(), a.ValueBytes(), parts, starts, next)
	case *array.Binary:
		buffers = partitionVarBinary(mem, a.ValueOffsets(), a.ValueBytes(), parts, starts, next)
	default:
		if !plainFixedWidth[arr.DataType().ID()] || len(d.Buffers()) != 2 {
			return nil
		}
		w := arr.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
		out := newBuffer(mem, n*w)
		dst, src := out.Bytes(), d.Buffers()[1].Bytes()[off*w:]
		copy(next, starts)
		switch w {
		case 8:
			scatter(arrow.Int64Traits.CastFromBytes(src), arrow.Int64Traits.CastFromBytes(dst), parts, next)
		case 4:
			scatter(arrow.Int32Traits.CastFromBytes(src), arrow.Int32Traits.CastFromBytes(dst), parts, next)
		case 2:
			scatter(arrow.Int16Traits.CastFromBytes(src), arrow.Int16Traits.CastFromBytes(dst), parts, next)
		case 1:
			scatter(src, dst, parts, next)
		default:
			for i, p := range parts {
				copy(dst[next[p]*w:(next[p]+1)*w], src[i*w:(i+1)*w])
				next[p]++
			}
		}
		buffers = []*memory.Buffer{nil, out}
	}
	nulls := 0
	if arr.NullN() > 0 {
		valid := newBitmap(mem, n)
		bits, src := valid.Bytes(), d.Buffers()[0].Bytes()
		copy(next, starts)
		for i, p := range parts {
			if bitutil.BitIsSet(src, off+i) {
				bitutil.SetBit(bits, next[p])
			} else {
				nulls++
			}
			next[p]++
		}
		buffers[0] = valid
	}
	out := array.NewData(arr.DataType(), n, buffers, nil, nulls, 0)
	for _, b := range buffers {
		if b != nil {
			b.Release()
		}
	}
	defer out.Release()
	return array.MakeFromData(out)
}

// scatter writes src[i] to dst at its part's next place.
func scatter[T any](src, dst []T, parts []uint16, next []int) {
	src = src[:len(parts)]
	for i, p := range parts {
		dst[next[p]] = src[i]
		next[p]++
	}
}

// partitionVarBinary builds the offsets and value buffers of Partition's result of a
// string or binary array (offs and vals as ValueOffsets and ValueBytes give them).
func partitionVarBinary(mem memory.Allocator, offs []int32, vals []byte, parts []uint16, starts, next []int) []*memory.Buffer {
	n := len(parts)
	// Each part's values start where the values of the parts before it end.
	at := make([]int, len(starts))
	for i, p := range parts {
		at[p+1] += int(offs[i+1] - offs[i])
	}
	for p := 1; p < len(at); p++ {
		at[p] += at[p-1]
	}
	total := at[len(at)-1]
	if total > 1<<31-1 {
		panic(fmt.Sprintf("partition: %d bytes of strings overflow 32-bit offsets", total))
	}
	ob, vb := newBuffer(mem, (n+1)*4), newBuffer(mem, total)
	o, dst := arrow.Int32Traits.CastFromBytes(ob.Bytes()), vb.Bytes()
	base := offs[0] // (relative to the array's slice)
	copy(next, starts)
	for i, p := range parts {
		j, b := next[p], at[p]
		o[j] = int32(b)
		at[p] += copy(dst[b:], vals[offs[i]-base:offs[i+1]-base])
		next[p]++
	}
	o[n] = int32(total)
	return []*memory.Buffer{nil, ob, vb}
}
