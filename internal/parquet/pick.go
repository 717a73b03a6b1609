package parquet

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Picking: a column read at some rows of a batch only. Its pages are still decompressed
// and walked, but only the values of the rows asked for are copied out, so a scan that
// decides from a few columns which rows it wants (late materialization) decodes the
// others for those rows alone. Flat string, binary and fixed-width columns are picked by
// a byteArrayReader; any other column is read whole and gathered.

// fixedWidthField returns the value width of top-level field i of fr when it is a flat
// INT32, INT64, FLOAT or DOUBLE column whose Arrow type holds the Parquet values as
// they are (integers, dates, timestamps, floats), in encodings a byteArrayReader reads
// in every row group of rowGroups; 0 otherwise.
func fixedWidthField(fr *pqarrow.FileReader, i int, rowGroups []int) int {
	f := &fr.Manifest.Fields[i]
	if !f.IsLeaf() || f.Field == nil {
		return 0
	}
	col := fr.ParquetReader().MetaData().Schema.Column(f.ColIndex)
	if col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 {
		return 0
	}
	width := 0
	switch id := f.Field.Type.ID(); col.PhysicalType() {
	case pq.Types.Int32:
		if id == arrow.INT32 || id == arrow.DATE32 {
			width = 4
		}
	case pq.Types.Int64:
		if id == arrow.INT64 || id == arrow.TIMESTAMP {
			width = 8
		}
	case pq.Types.Float:
		if id == arrow.FLOAT32 {
			width = 4
		}
	case pq.Types.Double:
		if id == arrow.FLOAT64 {
			width = 8
		}
	}
	if width == 0 || !pageEncodingsRead(fr, f.ColIndex, rowGroups) {
		return 0
	}
	return width
}

// newFixedReader reads top-level field i of fr, of values width bytes wide
// (fixedWidthField), for picking.
func newFixedReader(fr *pqarrow.FileReader, i int, rowGroups []int, what string, width int) *byteArrayReader {
	r := newByteArrayReader(fr, i, rowGroups, what)
	r.width = width
	return r
}

// pick reads the next n rows of the column and returns those at rows (ascending
// indexes below n; nil: every row) as an array of len(rows) rows, its buffers from mem.
func (r *byteArrayReader) pick(n int, rows []int32, mem memory.Allocator) (arrow.Array, error) {
	if rows == nil && r.width == 0 {
		return r.next(n, mem)
	}
	m := len(rows)
	if rows == nil {
		m = n
	}
	o := picked{width: r.width, valid: mem.Allocate(int(bitutil.BytesForBits(int64(m))))}
	for i := range o.valid {
		o.valid[i] = 0xff // (nulls clear their bit)
	}
	if r.width > 0 {
		o.vals = mem.Allocate(max(m*r.width, 1))
	} else {
		o.offs = make([]int32, 1, m+1)
	}
	free := func() {
		mem.Free(o.valid)
		if o.vals != nil {
			mem.Free(o.vals)
		}
	}
	var sel, vix []int32
	got, err := r.walk(n, func(got, k int) error {
		if rows == nil {
			return r.pickChunk(k, r.identity(k), &vix, &o)
		}
		// The rows picked in this chunk (sel, from its start).
		sel = sel[:0]
		for i := o.n; i < m && int(rows[i]) < got+k; i++ {
			if int(rows[i]) < got || i > o.n && rows[i] <= rows[i-1] {
				return fmt.Errorf("column %s: rows to pick out of order", r.what)
			}
			sel = append(sel, rows[i]-int32(got))
		}
		return r.pickChunk(k, sel, &vix, &o)
	})
	if err != nil {
		free()
		return nil, err
	}
	if got < n || o.n < m {
		free()
		return nil, fmt.Errorf("column %s: %d rows where the row groups have %d", r.what, got, n)
	}
	var buf []*memory.Buffer
	vbuf := sizedBuffer(o.valid, int(bitutil.BytesForBits(int64(m))), mem)
	if o.nulls == 0 {
		vbuf.Release()
		vbuf = nil
	}
	if r.width > 0 {
		buf = []*memory.Buffer{vbuf, sizedBuffer(o.vals, m*r.width, mem)}
	} else {
		// (Go memory, not mem's: made as the values were picked, of sizes not known
		// before)
		buf = []*memory.Buffer{vbuf, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(o.offs)), memory.NewBufferBytes(o.data)}
	}
	ad := array.NewData(r.typ, m, buf, nil, o.nulls, 0)
	defer ad.Release()
	for _, b := range buf {
		if b != nil {
			b.Release()
		}
	}
	return array.MakeFromData(ad), nil
}

// identity returns 0, 1, ..., k-1 (the reader's: not to be changed).
func (r *byteArrayReader) identity(k int) []int32 {
	for j := len(r.iota); j < k; j++ {
		r.iota = append(r.iota, int32(j))
	}
	return r.iota[:k]
}

// picked is what pick has copied out so far.
type picked struct {
	width int
	n     int    // rows picked
	nulls int    // of them null
	valid []byte // validity bitmap of the m rows
	vals  []byte // fixed width: the m values
	data  []byte // byte arrays: the values
	offs  []int32
}

func (o *picked) put(src []byte) {
	if o.width > 0 {
		copy(o.vals[o.n*o.width:], src)
	} else {
		if o.data == nil {
			// Room for the rows to pick at about this value's size (8 MiB at most:
			// it grows from there).
			o.data = make([]byte, 0, min((cap(o.offs)-1)*(len(src)+len(src)/4+1)+16, 8<<20))
		}
		if cap(o.data)-len(o.data) < len(src)+16 {
			o.data = slices.Grow(o.data, len(src)+16)
		}
		// (copyValue's 16-byte moves may write past the value, within the capacity)
		o.data = o.data[:copyValue(o.data[:cap(o.data)], len(o.data), src)]
		o.offs = append(o.offs, int32(len(o.data)))
	}
	o.n++
}

func (o *picked) putNull() {
	if o.width == 0 {
		o.offs = append(o.offs, int32(len(o.data)))
	}
	bitutil.ClearBit(o.valid, o.n)
	o.nulls++
	o.n++
}

// pickChunk moves past the next k rows of the current page and copies out the rows sel
// (ascending, from the chunk's start). *vix is scratch.
func (r *byteArrayReader) pickChunk(k int, sel []int32, vix *[]int32, o *picked) error {
	lvl, present, err := r.levels(k)
	if err != nil {
		return err
	}
	// Each picked row's value index (the non-null rows before it), -1 for a null.
	var ix []int32
	if lvl == nil || present == k {
		ix = sel
	} else {
		ix = (*vix)[:0]
		v, j := int32(0), 0
		for _, s := range sel {
			for ; j < int(s); j++ {
				if lvl[j] == uint32(r.maxDef) {
					v++
				}
			}
			if lvl[s] == uint32(r.maxDef) {
				ix = append(ix, v)
			} else {
				ix = append(ix, -1)
			}
		}
		*vix = ix
	}
	switch {
	case r.dict && len(ix) == k && present == k && r.width == 8:
		// Every row, none null, 8 bytes wide (timestamps, longs): gathered as words.
		ids := grow(&r.ix, k)
		if err := r.ids.read(ids); err != nil {
			return r.corrupt("dictionary indices: %v", err)
		}
		dict := arrow.Uint64Traits.CastFromBytes(r.dictBuf)
		dst := arrow.Uint64Traits.CastFromBytes(o.vals)[o.n : o.n+k]
		for j, id := range ids {
			if int(id) >= len(dict) {
				return r.corrupt("dictionary index %d of %d values", id, len(dict))
			}
			dst[j] = dict[id]
		}
		o.n += k
	case r.dict:
		// The indices of the values picked are read; those between them skipped.
		var id [1]uint32
		v := int32(0)
		for _, want := range ix {
			if want < 0 {
				o.putNull()
				continue
			}
			if err := r.ids.skip(int(want - v)); err != nil {
				return r.corrupt("dictionary indices: %v", err)
			}
			if err := r.ids.read(id[:]); err != nil {
				return r.corrupt("dictionary indices: %v", err)
			}
			v = want + 1
			if int(id[0]) >= len(r.dictOff)-1 {
				return r.corrupt("dictionary index %d of %d values", id[0], len(r.dictOff)-1)
			}
			o.put(r.dictBuf[r.dictOff[id[0]]:r.dictOff[id[0]+1]])
		}
		if err := r.ids.skip(present - int(v)); err != nil {
			return r.corrupt("dictionary indices: %v", err)
		}
	case r.width > 0:
		w, p := r.width, r.plain
		if len(p) < present*w {
			return r.corrupt("PLAIN value ends early")
		}
		if len(ix) == k && present == k { // every row, none null: one copy
			copy(o.vals[o.n*w:], p[:k*w])
			o.n += k
		} else {
			for _, v := range ix {
				if v < 0 {
					o.putNull()
				} else {
					o.put(p[int(v)*w : int(v+1)*w])
				}
			}
		}
		r.plain = p[present*w:]
	default:
		p, at := r.plain, 0
		v := 0 // the value at starts
		var err error
		for _, want := range ix {
			if want < 0 {
				o.putNull()
				continue
			}
			if at, err = r.skipPlain(p, at, int(want)-v); err != nil {
				return err
			}
			if len(p)-at < 4 {
				return r.corrupt("PLAIN value ends early")
			}
			l := int(binary.LittleEndian.Uint32(p[at:]))
			if l > len(p)-at-4 {
				return r.corrupt("PLAIN value of %d bytes, %d left", l, len(p)-at-4)
			}
			o.put(p[at+4 : at+4+l])
			at, v = at+4+l, int(want)+1
		}
		if at, err = r.skipPlain(p, at, present-v); err != nil {
			return err
		}
		r.plain = p[at:]
	}
	return nil
}

// skipPlain moves past count PLAIN byte array values of p from at and returns where the
// next one begins.
func (r *byteArrayReader) skipPlain(p []byte, at, count int) (int, error) {
	for range count {
		if len(p)-at < 4 {
			return 0, r.corrupt("PLAIN value ends early")
		}
		l := int(binary.LittleEndian.Uint32(p[at:]))
		if l > len(p)-at-4 {
			return 0, r.corrupt("PLAIN value of %d bytes, %d left", l, len(p)-at-4)
		}
		at += 4 + l
	}
	return at, nil
}
