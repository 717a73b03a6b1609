package delta

import (
	"bytes"
	"hash/maphash"
)

// keyIndex maps the encoded keys of the MERGE source to the first source row holding
// each, and knows which keys several rows hold. It is an open-addressing table of 64-bit
// hashes (at most half full) with the keys back to back in one arena: a probe is mostly
// one cache miss for the slot, and a miss (most target rows of a large table) rarely
// looks at a key's bytes. Unlike a map[string]int32 it allocates nothing per key and
// holds no pointers for the garbage collector to scan.
type keyIndex struct {
	seed  maphash.Seed
	slots []keySlot // power-of-two length
	arena []byte    // the distinct keys, back to back
	ends  []int     // ends[id] is where key id ends in arena
	rows  []int32   // rows[id] is the first source row with key id
	dup   []bool    // dup[id]: more than one source row has key id
	ndup  int
}

type keySlot struct {
	hash uint64
	id   int32 // key id + 1; 0 is an empty slot
}

func newKeyIndex(capacity int) *keyIndex {
	n := 16
	for n < 2*capacity {
		n *= 2
	}
	return &keyIndex{seed: maphash.MakeSeed(), slots: make([]keySlot, n), ends: make([]int, 0, capacity), rows: make([]int32, 0, capacity)}
}

// len is the number of distinct keys.
func (x *keyIndex) len() int { return len(x.ends) }

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

// addBatch adds the keys of b, held by source rows lo, lo+1, ... (null keys skipped).
func (x *keyIndex) addBatch(b *keyBatch, lo int) {
	mask := uint64(len(x.slots) - 1)
	start := int32(0)
	for j := 0; j < b.n; j++ {
		if e := b.ends[j]; e >= 0 {
			b.hash[j] = maphash.Bytes(x.seed, b.buf[start:e])
			start = e
		}
	}
	for j := 0; j < b.n; j++ { // load the slots first (see probeBatch)
		b.slot[j] = x.slots[b.hash[j]&mask]
	}
	start = 0
	for j := 0; j < b.n; j++ {
		if e := b.ends[j]; e >= 0 {
			x.addHashed(b.buf[start:e], b.hash[j], int32(lo+j))
			start = e
		}
	}
}

// addHashed records that source row holds key, whose hash is h (the first row with a
// key is the one kept).
func (x *keyIndex) addHashed(key []byte, h uint64, row int32) {
	i, ok := x.find(key, h)
	if ok {
		id := x.slots[i].id - 1
		if !x.dup[id] {
			x.dup[id] = true
			x.ndup++
		}
		return
	}
	id := int32(len(x.ends))
	x.arena = append(x.arena, key...)
	x.ends = append(x.ends, len(x.arena))
	x.rows = append(x.rows, row)
	x.dup = append(x.dup, false)
	x.slots[i] = keySlot{hash: h, id: id + 1}
	if 2*len(x.ends) > len(x.slots) {
		x.grow()
	}
}

// lookup returns the first source row with key, and whether other rows have it too.
func (x *keyIndex) lookup(key []byte) (row int32, found, dup bool) {
	i, ok := x.find(key, maphash.Bytes(x.seed, key))
	if !ok {
		return 0, false, false
	}
	id := x.slots[i].id - 1
	return x.rows[id], true, x.dup[id]
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

// probeBatch is how many keys lookupBatch hashes before it touches the table: their
// slots are then loaded one after another with nothing in between, so the cache misses
// overlap instead of coming one per key.
const probeBatch = 64

// keyBatch is up to probeBatch encoded keys and what lookupBatch found for them.
type keyBatch struct {
	buf  []byte             // the keys back to back
	ends [probeBatch]int32  // ends[j] is where key j ends in buf; -1: null, matches nothing
	hash [probeBatch]uint64 // (filled by lookupBatch)
	slot [probeBatch]keySlot
	row  [probeBatch]int32 // the first source row with key j (when hit[j] > 0)
	hit  [probeBatch]uint8 // 0: no source row; 1: one; 2: several
	n    int
}

// encode sets b to the keys of rows lo .. lo+n-1.
func (b *keyBatch) encode(enc *keyEncoder, lo, n int) {
	b.n, b.buf = n, b.buf[:0]
	for j := 0; j < n; j++ {
		var ok bool
		if b.buf, ok = enc.key(b.buf, lo+j); ok {
			b.ends[j] = int32(len(b.buf))
		} else {
			b.ends[j] = -1
		}
	}
}

// lookupBatch resolves the keys of b.
func (x *keyIndex) lookupBatch(b *keyBatch) {
	mask := uint64(len(x.slots) - 1)
	start := int32(0)
	for j := 0; j < b.n; j++ {
		if e := b.ends[j]; e >= 0 {
			b.hash[j] = maphash.Bytes(x.seed, b.buf[start:e])
			start = e
		}
	}
	for j := 0; j < b.n; j++ {
		b.slot[j] = x.slots[b.hash[j]&mask]
	}
	start = 0
	for j := 0; j < b.n; j++ {
		b.hit[j] = 0
		e := b.ends[j]
		if e < 0 {
			continue
		}
		key := b.buf[start:e]
		start = e
		h := b.hash[j]
		s := b.slot[j]
		if s.id == 0 {
			continue
		}
		if s.hash != h || !bytes.Equal(x.key(s.id-1), key) {
			k, ok := x.find(key, h)
			if !ok {
				continue
			}
			s = x.slots[k]
		}
		id := s.id - 1
		b.row[j] = x.rows[id]
		b.hit[j] = 1
		if x.dup[id] {
			b.hit[j] = 2
		}
	}
}
