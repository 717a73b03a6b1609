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

// Partition returns the rows of recs (one schema; their rows one after another) ordered
// by their parts, the rows of each part in their order: parts[i] is the part of row i,
// and the rows of part p are rows starts[p]..starts[p+1] of the result (starts: the
// parts' counts summed, len(starts)-1 parts). It is Gather of the rows sorted by part
// (of the records concatenated), done the other way round: each record is read once in
// its order and each row written where its part's rows go. A gather in part order
// reads its record once per part, a row here and a row there: on a record larger than
// the processor's caches it is an order of magnitude slower. Flat columns (fixed-width,
// boolean, string, binary) are written so; other columns are concatenated and gathered.
func Partition(ctx context.Context, mem memory.Allocator, recs []arrow.RecordBatch, parts []uint16, starts []int) (arrow.RecordBatch, error) {
	n, rows := len(parts), 0
	for _, r := range recs {
		rows += int(r.NumRows())
	}
	if len(recs) == 0 || rows != n || starts[len(starts)-1] != n {
		return nil, fmt.Errorf("internal error: partition of %d rows in %d records by %d parts summing to %d", rows, len(recs), n, starts[len(starts)-1])
	}
	ncols := int(recs[0].NumCols())
	for _, r := range recs[1:] {
		if int(r.NumCols()) != ncols {
			return nil, fmt.Errorf("internal error: partition of records of %d and %d columns", ncols, r.NumCols())
		}
		for c := range ncols {
			if !arrow.TypeEqual(r.Column(c).DataType(), recs[0].Column(c).DataType()) {
				return nil, fmt.Errorf("internal error: partition of records whose column %s is of types %s and %s", recs[0].ColumnName(c), recs[0].Column(c).DataType(), r.Column(c).DataType())
			}
		}
	}
	column := func(c int) []arrow.Array {
		col := make([]arrow.Array, len(recs))
		for k, r := range recs {
			col[k] = r.Column(c)
		}
		return col
	}
	cols := make([]arrow.Array, ncols)
	defer ReleaseArrays(cols)
	if n >= parallelGatherRows && ncols > 1 {
		for _, r := range recs { // (a record may hold one array in two columns)
			SettleNullCounts(r.Columns())
		}
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		for c := range ncols {
			g.Go(func() error { cols[c] = partitionArray(mem, column(c), parts, starts); return nil })
		}
		g.Wait()
	} else {
		for c := range ncols {
			cols[c] = partitionArray(mem, column(c), parts, starts)
		}
	}
	var perm []int32
	for c := range cols {
		if cols[c] != nil {
			continue
		}
		if perm == nil {
			perm = partOrder(parts, starts)
		}
		all, err := array.Concatenate(column(c), mem)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", recs[0].ColumnName(c), err)
		}
		cols[c], err = GatherColumn(ctx, mem, all, perm)
		all.Release()
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", recs[0].ColumnName(c), err)
		}
	}
	return array.NewRecordBatch(recs[0].Schema(), cols, int64(n)), nil
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

// partitionArray is Partition's work on one column (its array in each record) of a
// flat type, or nil for other types.
func partitionArray(mem memory.Allocator, col []arrow.Array, parts []uint16, starts []int) arrow.Array {
	n := len(parts)
	if len(col) == 1 {
		if s := sameValueSlice(col[0], n); s != nil {
			return s
		}
	}
	arr := col[0]
	next := make([]int, len(starts)-1)
	// each calls fn with each record's array (that has rows), its offset and its rows'
	// parts.
	each := func(fn func(a arrow.Array, off int, parts []uint16)) {
		at := 0
		for _, a := range col {
			if a.Len() > 0 {
				fn(a, a.Data().Offset(), parts[at:at+a.Len()])
			}
			at += a.Len()
		}
	}
	var buffers []*memory.Buffer
	switch arr.(type) {
	case *array.Boolean:
		out := newBitmap(mem, n)
		bits := out.Bytes()
		copy(next, starts)
		each(func(a arrow.Array, off int, parts []uint16) {
			src := a.Data().Buffers()[1].Bytes()
			for i, p := range parts {
				if bitutil.BitIsSet(src, off+i) {
					bitutil.SetBit(bits, next[p])
				}
				next[p]++
			}
		})
		buffers = []*memory.Buffer{nil, out}
	case *array.String, *array.Binary:
		buffers = partitionVarBinary(mem, each, parts, starts, next)
	default:
		if !plainFixedWidth[arr.DataType().ID()] || len(arr.Data().Buffers()) != 2 {
			return nil
		}
		w := arr.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
		out := newBuffer(mem, n*w)
		dst := out.Bytes()
		copy(next, starts)
		each(func(a arrow.Array, off int, parts []uint16) {
			src := a.Data().Buffers()[1].Bytes()[off*w:]
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
		})
		buffers = []*memory.Buffer{nil, out}
	}
	nulls := 0
	for _, a := range col {
		nulls += a.NullN()
	}
	if nulls > 0 {
		valid := newBitmap(mem, n)
		bits := valid.Bytes()
		copy(next, starts)
		each(func(a arrow.Array, off int, parts []uint16) {
			if a.NullN() == 0 {
				for _, p := range parts {
					bitutil.SetBit(bits, next[p])
					next[p]++
				}
				return
			}
			src := a.Data().Buffers()[0].Bytes()
			for i, p := range parts {
				if bitutil.BitIsSet(src, off+i) {
					bitutil.SetBit(bits, next[p])
				}
				next[p]++
			}
		})
		buffers[0] = valid
	}
	return arrayOf(arr.DataType(), n, buffers, nulls)
}

// scatter writes src[i] to dst at its part's next place.
func scatter[T any](src, dst []T, parts []uint16, next []int) {
	src = src[:len(parts)]
	for i, p := range parts {
		dst[next[p]] = src[i]
		next[p]++
	}
}

// varBinary is the offsets and bytes of a string or binary array, as ValueOffsets and
// ValueBytes give them (relative to its slice).
func varBinary(a arrow.Array) ([]int32, []byte) {
	if s, ok := a.(*array.String); ok {
		return s.ValueOffsets(), s.ValueBytes()
	}
	b := a.(*array.Binary)
	return b.ValueOffsets(), b.ValueBytes()
}

// partitionVarBinary builds the offsets and value buffers of Partition's result of a
// string or binary column (each: partitionArray's walk over its records).
func partitionVarBinary(mem memory.Allocator, each func(func(arrow.Array, int, []uint16)), parts []uint16, starts, next []int) []*memory.Buffer {
	n := len(parts)
	// Each part's values start where the values of the parts before it end.
	at := make([]int, len(starts))
	each(func(a arrow.Array, _ int, parts []uint16) {
		offs, _ := varBinary(a)
		for i, p := range parts {
			at[p+1] += int(offs[i+1] - offs[i])
		}
	})
	for p := 1; p < len(at); p++ {
		at[p] += at[p-1]
	}
	total := at[len(at)-1]
	if total > 1<<31-1 {
		panic(fmt.Sprintf("partition: %d bytes of strings overflow 32-bit offsets", total))
	}
	ob, vb := newBuffer(mem, (n+1)*4), newBuffer(mem, total)
	o, dst := arrow.Int32Traits.CastFromBytes(ob.Bytes()), vb.Bytes()
	copy(next, starts)
	each(func(a arrow.Array, _ int, parts []uint16) {
		offs, vals := varBinary(a)
		base := offs[0]
		for i, p := range parts {
			j, b := next[p], at[p]
			o[j] = int32(b)
			at[p] += copy(dst[b:], vals[offs[i]-base:offs[i+1]-base])
			next[p]++
		}
	})
	o[n] = int32(total)
	return []*memory.Buffer{nil, ob, vb}
}
