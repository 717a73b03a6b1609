package jobs

import (
	"bytes"
	"hash/maphash"
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
	h := maphash.Bytes(x.seed, key)
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
