package jobs

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/zeebo/xxh3"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// rowHasher hashes the data columns of a record's rows (128 bits a row): each row's
// values are encoded back to back as appendHashValue does and the encoding hashed. The
// encodings are written a column at a time (one type switch a column, not a value);
// a record with a column of another type (nested) is encoded a row at a time.
type rowHasher struct {
	cols     []int // data columns, in table order
	buf      []byte
	start    []int // per row: where its encoding starts in buf (and, last, the end)
	at       []int // per row: where its next value goes
	rowTypes bool  // cols have a type hashed a row at a time
}

// reset readies h for rec's columns cols.
func (h *rowHasher) reset(rec arrow.RecordBatch, cols []int) {
	h.cols, h.rowTypes = cols, false
	for _, c := range cols {
		if !columnHashed(rec.Column(c)) {
			h.rowTypes = true
		}
	}
}

// columnHashed reports whether arr's values are encoded a column at a time.
func columnHashed(arr arrow.Array) bool {
	switch arr.(type) {
	case *array.String, *array.Binary, *array.Int64, *array.Int32, *array.Int16, *array.Int8,
		*array.Date32, *array.Timestamp, *array.Float64, *array.Float32, *array.Boolean, *array.Decimal128:
		return true
	}
	return false
}

// hash sets lo[i], hi[i] to the hash of row i of rec, for i in [from, to).
func (h *rowHasher) hash(rec arrow.RecordBatch, from, to int, lo, hi []uint64) {
	if h.rowTypes {
		for i := from; i < to; i++ {
			b := h.buf[:0]
			for _, c := range h.cols {
				b = appendHashValue(b, rec.Column(c), i)
			}
			h.buf = b
			sum := xxh3.Hash128(b)
			lo[i], hi[i] = sum.Lo, sum.Hi
		}
		return
	}
	// A chunk of rows at a time, so that the encodings stay in the core's cache from
	// the first column written to the hash.
	for lo0 := from; lo0 < to; lo0 += hashChunkRows {
		h.hashChunk(rec, lo0, min(lo0+hashChunkRows, to), lo, hi)
	}
}

// hashChunkRows is the rows whose encodings are written together (about 100 KiB).
const hashChunkRows = 2048

func (h *rowHasher) hashChunk(rec arrow.RecordBatch, from, to int, lo, hi []uint64) {
	n := to - from
	h.start = slices.Grow(h.start[:0], n+1)[:n+1]
	clear(h.start)
	sizes := h.start[1:] // each row's size first, summed into starts below
	for _, c := range h.cols {
		addHashSizes(rec.Column(c), from, sizes)
	}
	total := 0
	for i := range n {
		total += sizes[i]
		sizes[i] = total
	}
	h.at = append(h.at[:0], h.start[:n]...)
	h.buf = slices.Grow(h.buf[:0], total)[:total]
	for _, c := range h.cols {
		putHashValues(h.buf, rec.Column(c), from, h.at, h.start[1:])
	}
	for i := range n {
		sum := xxh3.Hash128(h.buf[h.start[i]:h.start[i+1]])
		lo[from+i], hi[from+i] = sum.Lo, sum.Hi
	}
}

// addHashSizes adds to sizes[k] the size of the encoding of arr[from+k].
func addHashSizes(arr arrow.Array, from int, sizes []int) {
	nulls := arr.NullN() > 0
	var fixed int
	switch a := arr.(type) {
	case *array.String, *array.Binary:
		offs := a.(interface{ ValueOffsets() []int32 }).ValueOffsets()
		for k := range sizes {
			i := from + k
			if nulls && arr.IsNull(i) {
				sizes[k]++
				continue
			}
			l := uint64(offs[i+1] - offs[i])
			sizes[k] += 1 + uvarintLen(l) + int(l)
		}
		return
	case *array.Boolean:
		fixed = 2
	case *array.Decimal128:
		fixed = 17
	default:
		fixed = 9
	}
	for k := range sizes {
		if nulls && arr.IsNull(from+k) {
			sizes[k]++
		} else {
			sizes[k] += fixed
		}
	}
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// putHashValues writes the encoding of arr[from+k] at buf[at[k]:], advancing at[k];
// row k's encoding ends at ends[k].
func putHashValues(buf []byte, arr arrow.Array, from int, at, ends []int) {
	nulls := arr.NullN() > 0
	switch a := arr.(type) {
	case *array.String:
		offs, data := a.ValueOffsets(), a.ValueBytes()
		putVarValues(buf, a, offs, data, from, at, ends, nulls)
	case *array.Binary:
		offs, data := a.ValueOffsets(), a.ValueBytes()
		putVarValues(buf, a, offs, data, from, at, ends, nulls)
	case *array.Int64:
		putFixedValues(buf, a, a.Int64Values(), from, at, nulls, 2, func(v int64) uint64 { return uint64(v) })
	case *array.Int32:
		putFixedValues(buf, a, a.Int32Values(), from, at, nulls, 2, func(v int32) uint64 { return uint64(int64(v)) })
	case *array.Int16:
		putFixedValues(buf, a, a.Int16Values(), from, at, nulls, 2, func(v int16) uint64 { return uint64(int64(v)) })
	case *array.Int8:
		putFixedValues(buf, a, a.Int8Values(), from, at, nulls, 2, func(v int8) uint64 { return uint64(int64(v)) })
	case *array.Date32:
		putFixedValues(buf, a, a.Date32Values(), from, at, nulls, 2, func(v arrow.Date32) uint64 { return uint64(int64(v)) })
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		putFixedValues(buf, a, a.TimestampValues(), from, at, nulls, 2, func(v arrow.Timestamp) uint64 { return uint64(keyed.Micros(int64(v), unit)) })
	case *array.Float64:
		putFixedValues(buf, a, a.Float64Values(), from, at, nulls, 3, math.Float64bits)
	case *array.Float32:
		putFixedValues(buf, a, a.Float32Values(), from, at, nulls, 3, func(v float32) uint64 { return math.Float64bits(float64(v)) })
	case *array.Boolean:
		for k := range at {
			i, p := from+k, at[k]
			if nulls && a.IsNull(i) {
				buf[p] = 0
				at[k] = p + 1
				continue
			}
			buf[p], buf[p+1] = 4, byte(boolInt(a.Value(i)))
			at[k] = p + 2
		}
	case *array.Decimal128:
		for k := range at {
			i, p := from+k, at[k]
			if nulls && a.IsNull(i) {
				buf[p] = 0
				at[k] = p + 1
				continue
			}
			v := a.Value(i)
			buf[p] = 6
			binary.LittleEndian.PutUint64(buf[p+1:], uint64(v.HighBits()))
			binary.LittleEndian.PutUint64(buf[p+9:], v.LowBits())
			at[k] = p + 17
		}
	}
}

func putVarValues(buf []byte, arr arrow.Array, offs []int32, data []byte, from int, at, ends []int, nulls bool) {
	base := offs[0] // ValueOffsets and ValueBytes are relative to the array's slice
	for k := range at {
		i, p := from+k, at[k]
		if nulls && arr.IsNull(i) {
			buf[p] = 0
			at[k] = p + 1
			continue
		}
		o, e := int(offs[i]-base), int(offs[i+1]-base)
		buf[p] = 1
		p++
		p += binary.PutUvarint(buf[p:], uint64(e-o))
		if e-o <= 16 && p+16 <= ends[k] && o+16 <= len(data) {
			// A short value as 16 bytes at once: what lands past it is in the row's
			// own encoding, where its next columns' values go after.
			*(*[16]byte)(buf[p : p+16]) = *(*[16]byte)(data[o : o+16])
			at[k] = p + e - o
			continue
		}
		at[k] = p + copy(buf[p:], data[o:e])
	}
}

func putFixedValues[T any](buf []byte, arr arrow.Array, vals []T, from int, at []int, nulls bool, tag byte, bits func(T) uint64) {
	for k := range at {
		i, p := from+k, at[k]
		if nulls && arr.IsNull(i) {
			buf[p] = 0
			at[k] = p + 1
			continue
		}
		buf[p] = tag
		binary.LittleEndian.PutUint64(buf[p+1:], bits(vals[i]))
		at[k] = p + 9
	}
}

// appendHashValue appends a self-delimiting encoding of arr[i]: equal values of the
// table's types encode alike whichever reader made the array.
func appendHashValue(b []byte, arr arrow.Array, i int) []byte {
	if arr.IsNull(i) {
		return append(b, 0)
	}
	switch a := arr.(type) {
	case *array.String:
		v := a.Value(i)
		b = binary.AppendUvarint(append(b, 1), uint64(len(v)))
		return append(b, v...)
	case *array.Binary:
		v := a.Value(i)
		b = binary.AppendUvarint(append(b, 1), uint64(len(v)))
		return append(b, v...)
	case *array.Int64:
		return binary.LittleEndian.AppendUint64(append(b, 2), uint64(a.Value(i)))
	case *array.Int32:
		return binary.LittleEndian.AppendUint64(append(b, 2), uint64(int64(a.Value(i))))
	case *array.Int16:
		return binary.LittleEndian.AppendUint64(append(b, 2), uint64(int64(a.Value(i))))
	case *array.Int8:
		return binary.LittleEndian.AppendUint64(append(b, 2), uint64(int64(a.Value(i))))
	case *array.Date32:
		return binary.LittleEndian.AppendUint64(append(b, 2), uint64(int64(a.Value(i))))
	case *array.Timestamp:
		return binary.LittleEndian.AppendUint64(append(b, 2), uint64(keyed.Micros(int64(a.Value(i)), a.DataType().(*arrow.TimestampType).Unit)))
	case *array.Float64:
		return binary.LittleEndian.AppendUint64(append(b, 3), math.Float64bits(a.Value(i)))
	case *array.Float32:
		return binary.LittleEndian.AppendUint64(append(b, 3), math.Float64bits(float64(a.Value(i))))
	case *array.Boolean:
		return append(b, 4, byte(boolInt(a.Value(i))))
	case *array.Decimal128:
		v := a.Value(i)
		b = binary.LittleEndian.AppendUint64(append(b, 6), uint64(v.HighBits()))
		return binary.LittleEndian.AppendUint64(b, v.LowBits())
	}
	s := arr.ValueStr(i) // nested values: their JSON text
	b = binary.AppendUvarint(append(b, 7), uint64(len(s)))
	return append(b, s...)
}
