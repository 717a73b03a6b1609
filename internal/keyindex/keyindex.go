package keyindex

import (
	"bytes"
	"hash/maphash"
	"slices"
	"unsafe"
)

// Index maps keys to ids. The zero Index is not usable; call New.
type Index struct {
	seed  maphash.Seed
	slots []slot // power-of-two length, at most half full
	arena []byte // the keys, back to back
	ends  []int  // ends[id] is where key id ends in arena
}

// A slot holds the upper half of its key's hash (the lower bits place it) and its id:
// 8 bytes, so the table of a million keys is 16 MB and stays in a large L3 cache.
type slot struct {
	tag uint32
	id  int32 // id + 1; 0 is an empty slot
}

func tagOf(h uint64) uint32 { return uint32(h >> 32) }

// New returns an empty index with room for capacity keys before it grows.
func New(capacity int) *Index {
	n := 16
	for n < 2*capacity {
		n *= 2
	}
	return &Index{seed: maphash.MakeSeed(), slots: newSlots(n), ends: make([]int, 0, capacity)}
}

// newSlots returns n empty slots, each page of them written once. A large table comes
// from the OS untouched, and the lookups read slots before they write them: a page read
// first maps the shared zero page, and the write after it faults again to copy it and
// flushes the page from every core's TLB. Written first, a page faults once.
func newSlots(n int) []slot {
	s := make([]slot, n)
	const perPage = 4096 / int(unsafe.Sizeof(slot{}))
	for i := 0; i < n; i += perPage {
		s[i] = slot{}
	}
	return s
}

// Grow makes room for n more bytes of new keys, so that adding them copies nothing.
func (x *Index) Grow(n int) { x.arena = slices.Grow(x.arena, n) }

// Bytes is the memory the index holds: its slots, its keys' arena and ends, as
// allocated.
func (x *Index) Bytes() int64 {
	return int64(cap(x.slots))*int64(unsafe.Sizeof(slot{})) + int64(cap(x.arena)) + int64(cap(x.ends))*int64(unsafe.Sizeof(int(0)))
}

// Len is the number of keys.
func (x *Index) Len() int { return len(x.ends) }

// Key returns key id's bytes (valid until the next Add).
func (x *Index) Key(id int32) []byte {
	start := 0
	if id > 0 {
		start = x.ends[id-1]
	}
	return x.arena[start:x.ends[id]]
}

// find returns key's slot and whether it holds key (else it is the empty slot to fill).
func (x *Index) find(key []byte, h uint64) (int, bool) {
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s.id == 0 {
			return int(i), false
		}
		if s.tag == tagOf(h) && bytes.Equal(x.Key(s.id-1), key) {
			return int(i), true
		}
	}
}

// Lookup returns key's id.
func (x *Index) Lookup(key []byte) (int32, bool) {
	i, ok := x.find(key, maphash.Bytes(x.seed, key))
	return x.slots[i].id - 1, ok
}

// Add returns key's id, adding the key when it is new (added reports that).
func (x *Index) Add(key []byte) (id int32, added bool) {
	return x.add(key, maphash.Bytes(x.seed, key))
}

func (x *Index) add(key []byte, h uint64) (id int32, added bool) {
	i, ok := x.find(key, h)
	if ok {
		return x.slots[i].id - 1, false
	}
	id = int32(len(x.ends))
	x.arena = append(x.arena, key...)
	x.ends = append(x.ends, len(x.arena))
	x.slots[i] = slot{tag: tagOf(h), id: id + 1}
	if 2*len(x.ends) > len(x.slots) {
		x.grow()
	}
	return id, true
}

func (x *Index) grow() {
	x.slots = newSlots(2 * len(x.slots))
	mask := uint64(len(x.slots) - 1)
	for id := range int32(len(x.ends)) {
		h := maphash.Bytes(x.seed, x.Key(id)) // (a slot keeps only half its hash)
		i := h & mask
		for x.slots[i].id != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = slot{tag: tagOf(h), id: id + 1}
	}
}

// Block is the keys of a block of rows for AddBlock and LookupBlock: append a row's key
// to Buf and call End, or call Skip for a row that has no key (a null one that matches
// nothing). The calls set IDs: per row its key's id, or -1.
type Block struct {
	Buf    []byte
	IDs    []int32
	ends   []int // -1: the row has no key
	hashes []uint64
	sink   byte
}

// Reset empties the block.
func (b *Block) Reset() { b.Buf, b.ends, b.IDs = b.Buf[:0], b.ends[:0], b.IDs[:0] }

// End closes the key appended to Buf since the previous row.
func (b *Block) End() { b.ends = append(b.ends, len(b.Buf)) }

// Skip adds a row without a key.
func (b *Block) Skip() { b.ends = append(b.ends, -1) }

// Keyed reports whether row i has a key.
func (b *Block) Keyed(i int) bool { return b.ends[i] >= 0 }

// Len is the number of rows.
func (b *Block) Len() int { return len(b.ends) }

// Append adds the rows of o after b's (a block built in parts at once), with their IDs
// when both blocks were looked up.
func (b *Block) Append(o *Block) {
	if len(b.IDs) == len(b.ends) && len(o.IDs) == len(o.ends) {
		b.IDs = append(b.IDs, o.IDs...)
	} else {
		b.IDs = b.IDs[:0]
	}
	base := len(b.Buf)
	b.Buf = append(b.Buf, o.Buf...)
	for _, e := range o.ends {
		if e >= 0 {
			e += base
		}
		b.ends = append(b.ends, e)
	}
}

// Offsets appends to dst where each row's key starts in Buf, then where the last ends
// (the offsets of a binary array over Buf: a row without a key is an empty one), and
// reports whether every row has a key.
func (b *Block) Offsets(dst []int32) (offs []int32, allKeyed bool) {
	allKeyed, start := true, 0
	for _, e := range b.ends {
		dst = append(dst, int32(start))
		if e < 0 {
			allKeyed = false
			continue
		}
		start = e
	}
	return append(dst, int32(start)), allKeyed
}

// Each calls fn with each row's key (nil for a row without one), in order.
func (b *Block) Each(fn func(i int, key []byte)) {
	start := 0
	for i := range b.ends {
		key, next, _ := b.key(i, start)
		fn(i, key)
		start = next
	}
}

// key returns row i's key bytes and where the next row's start (ok false: no key).
func (b *Block) key(i, start int) (key []byte, next int, ok bool) {
	e := b.ends[i]
	if e < 0 {
		return nil, start, false
	}
	return b.Buf[start:e], e, true
}

// touchAhead is how many keys are hashed and touched ahead of their comparisons.
const touchAhead = 256

// prepare hashes the keys of rows from on (the first of them at byte start of Buf) and
// sizes IDs.
func (x *Index) prepare(b *Block, from, start int) {
	n := b.Len()
	b.hashes = slices.Grow(b.hashes[:0], n)[:n]
	b.IDs = slices.Grow(b.IDs[:0], n)[:n]
	for i := from; i < n; i++ {
		var key []byte
		var ok bool
		if key, start, ok = b.key(i, start); ok {
			b.hashes[i] = maphash.Bytes(x.seed, key)
		}
	}
}

// touch loads the first slot of rows [lo, hi) and, when its tag is the row's, the key it
// holds, so that the comparisons after it mostly hit the cache. (A slot of another tag
// is passed over without comparing keys: loading its key would be a cache miss for
// nothing, as it is for most slots a new key meets.)
func (x *Index) touch(b *Block, lo, hi int) {
	mask := uint64(len(x.slots) - 1)
	var ids [touchAhead]int32
	// First the slots, each load independent of the others, then the keys they hold.
	for i := lo; i < hi; i++ {
		h := b.hashes[i]
		if s := x.slots[h&mask]; s.tag == tagOf(h) {
			ids[i-lo] = s.id
		} else {
			ids[i-lo] = 0
		}
	}
	var ends [touchAhead]int
	for k, id := range ids[:hi-lo] {
		if id > 0 {
			ends[k] = x.ends[id-1]
		}
	}
	var sink byte
	for _, e := range ends[:hi-lo] {
		if e > 0 {
			sink += x.arena[e-1]
		}
	}
	b.sink = sink // keeps the loads from being optimized away
}

// each runs fn for the rows with a key from row from on (its key at byte start of
// Buf), a touched block at a time.
func (x *Index) each(b *Block, from, start int, fn func(i int, key []byte)) {
	x.prepare(b, from, start)
	for lo := from; lo < b.Len(); lo += touchAhead {
		hi := min(lo+touchAhead, b.Len())
		x.touch(b, lo, hi)
		for i := lo; i < hi; i++ {
			key, next, ok := b.key(i, start)
			start = next
			b.IDs[i] = -1
			if ok {
				fn(i, key)
			}
		}
	}
}

// inOrderProbe is the rows LookupBlock tries in order before it judges the block's
// order; it goes on in order while at most one row in inOrderMissShare misses (a miss,
// looked up alone, costs about what three rows looked up by hash do).
const (
	inOrderProbe     = 512
	inOrderMissShare = 4
)

// LookupBlock sets b.IDs[i] to the id of row i's key, or -1 (absent, or no key). Keys
// that come in about the order they were added (an extract sorted as the table it is
// compared with) are found in order: a row's key is compared with the key after the
// previous row's, or, after a row found elsewhere (a row the table moved), with the key
// the order was at before it; a row that is neither is looked up alone. When rows miss
// often, the rest of the block is looked up by hash, a touched block at a time. Lookups
// (with their own blocks) may run concurrently with each other, not with adds.
func (x *Index) LookupBlock(b *Block) {
	n := b.Len()
	b.IDs = slices.Grow(b.IDs[:0], n)[:n]
	is := func(id int32, key []byte) bool {
		return id >= 0 && int(id) < len(x.ends) && bytes.Equal(x.Key(id), key)
	}
	next, resume := int32(-1), int32(-1) // the ids the next row's key is tried as
	misses, start := 0, 0
	i := 0
	for ; i < n; i++ {
		if i >= inOrderProbe && misses*inOrderMissShare > i {
			break // not in order: by hash
		}
		key, end, ok := b.key(i, start)
		start = end
		b.IDs[i] = -1
		switch {
		case !ok:
			continue // a row without a key keeps the order of the rows around it
		case is(next, key):
			b.IDs[i], next, resume = next, next+1, -1
			continue
		case is(resume, key):
			b.IDs[i], next, resume = resume, resume+1, -1
			continue
		}
		misses++
		if next >= 0 {
			resume = next
		}
		next = -1
		if id, found := x.Lookup(key); found {
			b.IDs[i], next = id, id+1
		}
	}
	if i < n {
		x.each(b, i, start, func(i int, key []byte) {
			if s, ok := x.find(key, b.hashes[i]); ok {
				b.IDs[i] = x.slots[s].id - 1
			}
		})
	}
}

// AddBlock adds the rows' keys in order, setting b.IDs[i] to row i's key id (-1: no key);
// a key is new when its id is at least the Len before the call.
func (x *Index) AddBlock(b *Block) {
	x.each(b, 0, 0, func(i int, key []byte) {
		b.IDs[i], _ = x.add(key, b.hashes[i])
	})
}
