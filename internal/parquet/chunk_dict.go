package parquet

import (
	"encoding/binary"
	"hash/maphash"
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
	ids    idTable // value -> index, by the values' hashes
	hashes []uint64
	data   []byte  // the values, one after another
	offs   []int32 // where each starts and ends (len = entries + 1)
	size   int64   // 4 + len per value
	prev   []byte  // the value added last, and its index: a repeated value costs no lookup
	prevID int32
}

// dictSeed seeds the dictionaries' value hashes.
var dictSeed = maphash.MakeSeed()

// add appends the index of v to idx, adding v.
func (d *bytesDict) add(idx []int32, v []byte) []int32 {
	if d.prevID >= 0 && string(v) == string(d.prev) {
		return append(idx, d.prevID)
	}
	h := maphash.Bytes(dictSeed, v)
	slot, id := d.ids.find(h, func(id int32) bool { return d.hashes[id] == h && string(d.value(id)) == string(v) })
	if id < 0 {
		id = int32(len(d.offs) - 1)
		d.data = append(d.data, v...)
		d.offs = append(d.offs, int32(len(d.data)))
		d.hashes = append(d.hashes, h)
		d.size += int64(len(v)) + 4
		d.ids.insert(slot, id, d.hashes)
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
	d.ids.reset()
	d.data, d.offs, d.hashes, d.size = d.data[:0], append(d.offs[:0], 0), d.hashes[:0], 0
	d.prev, d.prevID = nil, -1
}

// fixedDict is the dictionary of an INT32 or INT64 column.
type fixedDict[T int32 | int64] struct {
	ids    idTable // value -> index, by the values' hashes
	hashes []uint64
	vals   []T
	prev   T
	prevID int32
}

// add appends the indices of vals to idx, adding new values.
func (d *fixedDict[T]) add(idx []int32, vals []T) []int32 {
	prev, prevID := d.prev, d.prevID
	for _, v := range vals {
		if prevID < 0 || v != prev {
			h := mixInt(uint64(v))
			slot, id := d.ids.find(h, func(id int32) bool { return d.vals[id] == v })
			if id < 0 {
				id = int32(len(d.vals))
				d.vals = append(d.vals, v)
				d.hashes = append(d.hashes, h)
				d.ids.insert(slot, id, d.hashes)
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
	d.ids.reset()
	d.vals, d.hashes = d.vals[:0], d.hashes[:0]
	var z T
	d.prev, d.prevID = z, -1
}

// mixInt is a hash of an integer: its bits spread over the word (a multiply and a
// fold, as splitmix64 finishes).
func mixInt(x uint64) uint64 {
	x *= 0x9e3779b97f4a7c15
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	return x ^ x>>32
}

// idTable finds a dictionary's index of a value by the value's hash: open addressing,
// linear probing, slots holding index+1 (0: empty), at most half full. The dictionary
// keeps each index's hash (to grow the table) and says whether an index holds a value.
type idTable struct {
	slots []int32
	n     int
}

// find returns the slot where the value of hash h is, and its index (the slot's, or -1
// with the empty slot where it goes when absent); same says whether index id holds it.
func (t *idTable) find(h uint64, same func(id int32) bool) (slot int, id int32) {
	if len(t.slots) == 0 {
		t.slots = make([]int32, 1024)
	}
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return i, -1
		}
		if same(s - 1) {
			return i, s - 1
		}
	}
}

// insert puts index id at slot (as find returned it), growing the table when it is half
// full; hashes are the indexes' hashes.
func (t *idTable) insert(slot int, id int32, hashes []uint64) {
	t.slots[slot] = id + 1
	t.n++
	if 2*t.n <= len(t.slots) {
		return
	}
	t.slots = make([]int32, 2*len(t.slots))
	mask := len(t.slots) - 1
	for k, h := range hashes[:t.n] {
		i := int(h) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = int32(k) + 1
	}
}

// reset empties the table, keeping its room.
func (t *idTable) reset() {
	clear(t.slots)
	t.n = 0
}
