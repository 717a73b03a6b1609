package jobs

import (
	"bytes"
	"hash/maphash"
	"slices"
)

// keyIndex maps encoded keys to dense ids 0, 1, 2, … in the order they were first
// added. It is an open-addressing table of 64-bit hashes with the keys in one arena:
// a lookup is usually one cache miss for the slot and one for the key's bytes, which at
// a million keys is several times faster than a map[string]int32 and far lighter on
// the garbage collector (no pointers).
type keyIndex struct {
	seed  maphash.Seed
	slots []keySlot // power-of-two length, at most half full
	arena []byte    // the keys, back to back
	ends  []int     // ends[id] is where key id ends in arena
}

type keySlot struct {
	hash uint64
	id   int32 // id + 1; 0 is an empty slot
}

func newKeyIndex(capacity int) *keyIndex {
	n := 16
	for n < 2*capacity {
		n *= 2
	}
	return &keyIndex{seed: maphash.MakeSeed(), slots: make([]keySlot, n)}
}

// Len is the number of keys.
func (x *keyIndex) Len() int { return len(x.ends) }

func (x *keyIndex) key(id int32) []byte {
	start := 0
	if id > 0 {
		start = x.ends[id-1]
	}
	return x.arena[start:x.ends[id]]
}

// find returns key's slot and whether it holds key (else it is the empty slot to fill).
func (x *keyIndex) find(key []byte, h uint64) (int, bool) {
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s.id == 0 {
			return int(i), false
		}
		if s.hash == h && bytes.Equal(x.key(s.id-1), key) {
			return int(i), true
		}
	}
}

// Lookup returns key's id.
func (x *keyIndex) Lookup(key []byte) (int32, bool) {
	i, ok := x.find(key, maphash.Bytes(x.seed, key))
	return x.slots[i].id - 1, ok
}

// Add returns key's id, adding the key when it is new (added reports that).
func (x *keyIndex) Add(key []byte) (id int32, added bool) {
	return x.add(key, maphash.Bytes(x.seed, key))
}

func (x *keyIndex) add(key []byte, h uint64) (id int32, added bool) {
	i, ok := x.find(key, h)
	if ok {
		return x.slots[i].id - 1, false
	}
	id = int32(len(x.ends))
	x.arena = append(x.arena, key...)
	x.ends = append(x.ends, len(x.arena))
	x.slots[i] = keySlot{hash: h, id: id + 1}
	if 2*len(x.ends) > len(x.slots) {
		x.grow()
	}
	return id, true
}

func (x *keyIndex) grow() {
	old := x.slots
	x.slots = make([]keySlot, 2*len(old))
	mask := uint64(len(x.slots) - 1)
	for _, s := range old {
		if s.id == 0 {
			continue
		}
		i := s.hash & mask
		for x.slots[i].id != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// keyBlock holds the encoded keys of a block of rows (a record), for the batched
// LookupBlock and AddBlock: hashing every key first and then touching every slot and
// key before comparing lets the processor wait on many cache misses at once instead of
// one after the other, which roughly halves the cost of a probe into a large index.
type keyBlock struct {
	buf    []byte
	ends   []int
	hashes []uint64
	ids    []int32
}

func (kb *keyBlock) reset() {
	kb.buf, kb.ends = kb.buf[:0], kb.ends[:0]
}

// end closes the key appended to kb.buf since the last end.
func (kb *keyBlock) end() { kb.ends = append(kb.ends, len(kb.buf)) }

func (kb *keyBlock) len() int { return len(kb.ends) }

func (kb *keyBlock) key(i int) []byte {
	start := 0
	if i > 0 {
		start = kb.ends[i-1]
	}
	return kb.buf[start:kb.ends[i]]
}

// prefetchBlock is how many keys are hashed and touched ahead of their comparisons.
const prefetchBlock = 256

// prepare hashes the block's keys and sizes ids.
func (x *keyIndex) prepare(kb *keyBlock) {
	n := kb.len()
	kb.hashes = slices.Grow(kb.hashes[:0], n)[:n]
	kb.ids = slices.Grow(kb.ids[:0], n)[:n]
	for i := range n {
		kb.hashes[i] = maphash.Bytes(x.seed, kb.key(i))
	}
}

// touch loads the first slot of keys [lo, hi) and the key it holds, so that the
// comparisons after it mostly hit the cache.
func (x *keyIndex) touch(kb *keyBlock, lo, hi int) {
	mask := uint64(len(x.slots) - 1)
	var sink byte
	for i := lo; i < hi; i++ {
		if id := x.slots[kb.hashes[i]&mask].id; id > 0 {
			sink += x.arena[x.ends[id-1]-1]
		}
	}
	touchSink = sink
}

var touchSink byte

// LookupBlock sets kb.ids[i] to the id of key i, or -1.
func (x *keyIndex) LookupBlock(kb *keyBlock) {
	x.prepare(kb)
	for lo := 0; lo < kb.len(); lo += prefetchBlock {
		hi := min(lo+prefetchBlock, kb.len())
		x.touch(kb, lo, hi)
		for i := lo; i < hi; i++ {
			s, ok := x.find(kb.key(i), kb.hashes[i])
			kb.ids[i] = -1
			if ok {
				kb.ids[i] = x.slots[s].id - 1
			}
		}
	}
}

// AddBlock adds the block's keys in order, setting kb.ids[i] to key i's id; a key is
// new when its id is at least the Len before the call.
func (x *keyIndex) AddBlock(kb *keyBlock) {
	x.prepare(kb)
	for lo := 0; lo < kb.len(); lo += prefetchBlock {
		hi := min(lo+prefetchBlock, kb.len())
		x.touch(kb, lo, hi)
		for i := lo; i < hi; i++ {
			kb.ids[i], _ = x.add(kb.key(i), kb.hashes[i])
		}
	}
}
