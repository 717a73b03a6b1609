package parquet

import (
	"encoding/binary"
	"unsafe"
)

// dictionary is a column chunk's dictionary: its values in first-seen order, as
// arrow-go's dictionary encoders keep them (so the indices and the dictionary page are
// theirs), sized as they size them.
type dictionary interface {
	// encodedSize is the dictionary page's size: what arrow-go compares with the
	// dictionary page size limit.
	encodedSize() int64
	entries() int
	// writeTo appends the dictionary page: the values PLAIN, in index order.
	writeTo(b []byte) []byte
	// appendPlain appends value id PLAIN (a fallback turns indices back into values).
	appendPlain(b []byte, id int32) []byte
	reset()
}

// bytesDict is the dictionary of a string or binary column.
type bytesDict struct {
	ids    map[string]int32
	data   []byte  // the values, one after another
	offs   []int32 // where each starts and ends (len = entries + 1)
	size   int64   // 4 + len per value
	prev   []byte  // the value added last, and its index: a repeated value costs no lookup
	prevID int32
}

// add appends the index of v to idx, adding v.
func (d *bytesDict) add(idx []int32, v []byte) []int32 {
	if d.prevID >= 0 && string(v) == string(d.prev) {
		return append(idx, d.prevID)
	}
	id, ok := d.ids[string(v)]
	if !ok {
		id = int32(len(d.offs) - 1)
		d.ids[string(v)] = id
		d.data = append(d.data, v...)
		d.offs = append(d.offs, int32(len(d.data)))
		d.size += int64(len(v)) + 4
	}
	d.prev, d.prevID = d.value(id), id // the dictionary's copy: v's batch may be released
	return append(idx, id)
}

// addRun appends n indices of v.
func (d *bytesDict) addRun(idx []int32, v []byte, n int) []int32 {
	idx = d.add(idx, v)
	id := idx[len(idx)-1]
	for range n - 1 {
		idx = append(idx, id)
	}
	return idx
}

func (d *bytesDict) value(id int32) []byte { return d.data[d.offs[id]:d.offs[id+1]] }

func (d *bytesDict) encodedSize() int64 { return d.size }
func (d *bytesDict) entries() int       { return len(d.offs) - 1 }

func (d *bytesDict) writeTo(b []byte) []byte {
	for id := range d.entries() {
		v := d.value(int32(id))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

func (d *bytesDict) appendPlain(b []byte, id int32) []byte {
	v := d.value(id)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func (d *bytesDict) reset() {
	if d.ids == nil || len(d.ids) > 0 {
		d.ids = make(map[string]int32)
	}
	d.data, d.offs, d.size = d.data[:0], append(d.offs[:0], 0), 0
	d.prev, d.prevID = nil, -1
}

// fixedDict is the dictionary of an INT32 or INT64 column.
type fixedDict[T int32 | int64] struct {
	ids    map[T]int32
	vals   []T
	prev   T
	prevID int32
}

// add appends the indices of vals to idx, adding new values.
func (d *fixedDict[T]) add(idx []int32, vals []T) []int32 {
	prev, prevID := d.prev, d.prevID
	for _, v := range vals {
		if prevID < 0 || v != prev {
			id, ok := d.ids[v]
			if !ok {
				id = int32(len(d.vals))
				d.ids[v] = id
				d.vals = append(d.vals, v)
			}
			prev, prevID = v, id
		}
		idx = append(idx, prevID)
	}
	d.prev, d.prevID = prev, prevID
	return idx
}

func (d *fixedDict[T]) encodedSize() int64 {
	var z T
	return int64(len(d.vals)) * int64(unsafe.Sizeof(z))
}

func (d *fixedDict[T]) entries() int { return len(d.vals) }

func (d *fixedDict[T]) writeTo(b []byte) []byte {
	if len(d.vals) == 0 {
		return b
	}
	return appendPlain(b, d.vals)
}

func (d *fixedDict[T]) appendPlain(b []byte, id int32) []byte { return appendPlain(b, d.vals[id:id+1]) }

func (d *fixedDict[T]) reset() {
	if d.ids == nil || len(d.ids) > 0 {
		d.ids = make(map[T]int32)
	}
	d.vals = d.vals[:0]
	var z T
	d.prev, d.prevID = z, -1
}
