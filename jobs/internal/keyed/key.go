package keyed

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/internal/keyindex"
)

// Row values move between Arrow and the stages' Go code (the SCD fold, keys, messages)
// as comparable Go values: nil, string, int64 (every integer type, date32 days,
// timestamp microseconds), float64, bool and decimal128.Num. Binary values are held as
// strings. A key is encoded from those values, so a source int32 key matches a target
// int64 key.

// Value returns row i of arr as a Go value. A string is a copy: arrow's Value(i)
// points into the array's data buffer, and a kept row (a dimension version, a history
// event) would hold that whole buffer, and so every record the rows came from, alive.
func Value(arr arrow.Array, i int) (any, error) {
	if arr.IsNull(i) {
		return nil, nil
	}
	switch a := arr.(type) {
	case *array.String:
		return strings.Clone(a.Value(i)), nil
	case *array.LargeString:
		return strings.Clone(a.Value(i)), nil
	case *array.Binary:
		return string(a.Value(i)), nil
	case *array.Int8:
		return int64(a.Value(i)), nil
	case *array.Int16:
		return int64(a.Value(i)), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Date32:
		return int64(a.Value(i)), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return Micros(int64(a.Value(i)), unit), nil
	case *array.Decimal128:
		return a.Value(i), nil
	}
	return nil, fmt.Errorf("column type %s is not supported here", arr.DataType())
}

// Micros converts a timestamp value of unit to microseconds.
func Micros(v int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return v * 1_000_000
	case arrow.Millisecond:
		return v * 1_000
	case arrow.Nanosecond:
		return v / 1_000
	}
	return v
}

// AppendKey appends the encoded key of row i of rec, whose key columns are cols:
// null-safe, each value normalised as Value does (so a source int32 key matches a target
// int64 key). AppendRowKey encodes the same values of a Go row alike.
func AppendKey(buf []byte, rec arrow.RecordBatch, cols []int, i int) ([]byte, error) {
	for _, c := range cols {
		arr := rec.Column(c)
		if arr.IsNull(i) {
			buf = append(buf, 0)
			continue
		}
		switch a := arr.(type) {
		case *array.String:
			v := a.Value(i)
			buf = append(buf, 1)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
			continue
		case *array.Int64:
			buf = append(buf, 2)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(a.Value(i)))
			continue
		}
		v, err := Value(arr, i)
		if err != nil {
			return nil, err
		}
		buf = AppendValueKey(buf, v)
	}
	return buf, nil
}

// AppendKeys appends to block the keys (columns cols) of rows from..to, as AppendKey
// encodes them: a single string key without nulls straight from its offsets and bytes.
func AppendKeys(block *keyindex.Block, rec arrow.RecordBatch, cols []int, from, to int) error {
	if a, ok := rec.Column(cols[0]).(*array.String); ok && len(cols) == 1 && a.NullN() == 0 {
		offs, data := a.ValueOffsets(), a.ValueBytes()
		base := offs[0]
		block.Buf = slices.Grow(block.Buf, int(offs[to]-offs[from])+(to-from)*(1+binary.MaxVarintLen64))
		for i := from; i < to; i++ {
			v := data[offs[i]-base : offs[i+1]-base]
			block.Buf = append(binary.AppendUvarint(append(block.Buf, 1), uint64(len(v))), v...)
			block.End()
		}
		return nil
	}
	for i := from; i < to; i++ {
		var err error
		if block.Buf, err = AppendKey(block.Buf, rec, cols, i); err != nil {
			return err
		}
		block.End()
	}
	return nil
}

// KeyArray is the keys of a block as a binary array (a row without a key: null), made
// at once from the block's bytes.
func KeyArray(b *keyindex.Block) arrow.Array {
	mem := memory.DefaultAllocator
	n := b.Len()
	sized := func(size int) *memory.Buffer {
		buf := memory.NewResizableBuffer(mem)
		buf.Resize(size)
		return buf
	}
	copied := func(v []byte) *memory.Buffer {
		buf := sized(len(v))
		copy(buf.Bytes(), v)
		return buf
	}
	ob := sized(arrow.Int32SizeBytes * (n + 1)) // (the offsets are written in place)
	offs, allKeyed := b.Offsets(arrow.Int32Traits.CastFromBytes(ob.Bytes())[:0])
	bufs := []*memory.Buffer{nil, ob, copied(b.Buf[:offs[n]])}
	nulls := 0
	if !allKeyed {
		bits := make([]byte, bitutil.BytesForBits(int64(n)))
		for i := range n {
			if b.Keyed(i) {
				bitutil.SetBit(bits, i)
			} else {
				nulls++
			}
		}
		bufs[0] = copied(bits)
	}
	d := array.NewData(arrow.BinaryTypes.Binary, n, bufs, nil, nulls, 0)
	for _, buf := range bufs {
		if buf != nil {
			buf.Release()
		}
	}
	defer d.Release()
	return array.MakeFromData(d)
}

// AppendRowKey encodes the values of row at cols as AppendKey does.
func AppendRowKey(buf []byte, row []any, cols []int) []byte {
	for _, c := range cols {
		buf = AppendValueKey(buf, row[c])
	}
	return buf
}

// AppendValueKey appends the encoding of one Go value (as Value returns them).
func AppendValueKey(buf []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		buf = append(buf, 0)
	case string:
		buf = append(buf, 1)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	case int64:
		buf = append(buf, 2)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	case float64:
		buf = append(buf, 3)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		buf = append(buf, 4, b)
	default:
		s := fmt.Sprint(v)
		buf = append(buf, 5)
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	return buf
}

// Ranges is the number of key hash ranges a batch over its budget is spread over; a
// pass works on consecutive ranges, as many as fit.
const Ranges = 256

// Hash is the hash of an encoded key: the event logs are sorted and looked up by it,
// and its ranges are Range's.
func Hash(key []byte) int64 { return int64(xxhash.Sum64(key)) }

// Range is the key hash range of an encoded key: its Hash (a signed int64) cut in
// Ranges equal ranges, numbered in that order.
func Range(key []byte) uint16 { return rangeOf(xxhash.Sum64(key)) }

// rangeOf is the Range of a key whose xxhash is h.
func rangeOf(h uint64) uint16 { return uint16((h ^ 1<<63) >> 56) }

// HashBounds are the smallest and largest Hash of the ranges [lo, hi).
func HashBounds(lo, hi int) (int64, int64) {
	first := int64(uint64(lo)<<56 ^ 1<<63)
	last := int64((uint64(hi)<<56 - 1) ^ 1<<63)
	if hi >= Ranges {
		last = int64(^uint64(0) ^ 1<<63)
	}
	return first, last
}

// Filter has a bit per key hash: set for the keys of a batch set aside, so that a scan
// of the target sets aside only the rows of keys the batch may have.
type Filter []uint64

// NewFilter sizes a filter at about 1/16 of a working set (at least 64 Ki bits).
func NewFilter(limit int64) Filter {
	bits := uint64(1) << 16
	for bits*2/8 <= uint64(limit/16) && bits < 1<<34 {
		bits *= 2
	}
	return make(Filter, bits/64)
}

// A key's bit is the low bits of its xxhash (Range takes the high ones). A filter is
// far larger than the processor's caches: a record's keys have their bits set or tested
// at once, in a loop of its own whose loads do not wait on one another, so that the
// processor waits on many cache misses at a time (one at a time, in the loop that
// encodes the keys, the filter cost as much as the rest of setting the keys aside).
func (f Filter) bit(h uint64) uint64 { return h & (uint64(len(f))*64 - 1) }

// Add records key.
func (f Filter) Add(key []byte) { f.addHashes([]uint64{xxhash.Sum64(key)}) }

// addHashes records the keys whose xxhashes are hs.
func (f Filter) addHashes(hs []uint64) {
	for _, h := range hs {
		b := f.bit(h)
		f[b/64] |= 1 << (b % 64)
	}
}

// MayHave reports whether key may have been added (false: surely not; a nil filter
// may have every key).
func (f Filter) MayHave(key []byte) bool {
	return f.mayHaveHashes([]uint64{xxhash.Sum64(key)}, nil)[0]
}

// mayHaveHashes appends to may, for each of the xxhashes hs, whether its key may have
// been added.
func (f Filter) mayHaveHashes(hs []uint64, may []bool) []bool {
	if f == nil {
		for range hs {
			may = append(may, true)
		}
		return may
	}
	for _, h := range hs {
		b := f.bit(h)
		may = append(may, f[b/64]&(1<<(b%64)) != 0)
	}
	return may
}
