package jobs

import (
	"fmt"
	"testing"
)

func TestKeyIndexAddLookupAcrossGrowth(t *testing.T) {
	x := newKeyIndex(0)
	const n = 100_000
	for i := range n {
		id, added := x.Add(fmt.Appendf(nil, "key-%d", i))
		if !added || id != int32(i) {
			t.Fatalf("Add(key-%d) = %d, %v; want %d, true", i, id, added, i)
		}
	}
	// Adding again returns the first id; a prefix or extension of a key is another key.
	for i := range n {
		if id, added := x.Add(fmt.Appendf(nil, "key-%d", i)); added || id != int32(i) {
			t.Fatalf("second Add(key-%d) = %d, %v; want %d, false", i, id, added, i)
		}
		if id, ok := x.Lookup(fmt.Appendf(nil, "key-%d", i)); !ok || id != int32(i) {
			t.Fatalf("Lookup(key-%d) = %d, %v", i, id, ok)
		}
	}
	for _, k := range []string{"key-", "key-100000", "key-1x", "", "ke"} {
		if id, ok := x.Lookup([]byte(k)); ok {
			t.Fatalf("Lookup(%q) found id %d; want absent", k, id)
		}
	}
	if x.Len() != n {
		t.Fatalf("Len = %d, want %d", x.Len(), n)
	}
	// The empty key is a key like any other.
	if id, added := x.Add(nil); !added || id != n {
		t.Fatalf("Add(empty) = %d, %v", id, added)
	}
	if id, ok := x.Lookup([]byte{}); !ok || id != n {
		t.Fatalf("Lookup(empty) = %d, %v", id, ok)
	}
}

// With every hash equal (a worst case the seed makes practically impossible), keys are
// still told apart by their bytes.
func TestKeyIndexCollidingHashes(t *testing.T) {
	x := newKeyIndex(4)
	keys := []string{"a", "b", "ab", "ba", "abc"}
	for i, k := range keys {
		h := uint64(42)
		slot, found := x.find([]byte(k), h)
		if found {
			t.Fatalf("%q found before it was added", k)
		}
		x.arena = append(x.arena, k...)
		x.ends = append(x.ends, len(x.arena))
		x.slots[slot] = keySlot{hash: h, id: int32(i) + 1}
	}
	for i, k := range keys {
		slot, found := x.find([]byte(k), 42)
		if !found || x.slots[slot].id-1 != int32(i) {
			t.Fatalf("find(%q) = slot %d (id %d), %v; want id %d", k, slot, x.slots[slot].id-1, found, i)
		}
	}
	if _, found := x.find([]byte("c"), 42); found {
		t.Fatal(`find("c") found a key that was never added`)
	}
}

// The batched calls agree with the single ones, across blocks, duplicates inside a block
// and growth in the middle of a block.
func TestKeyIndexBlocks(t *testing.T) {
	x, y := newKeyIndex(0), newKeyIndex(0)
	var kb keyBlock
	for round := range 3 {
		kb.reset()
		var keys [][]byte
		for i := range 1000 {
			k := fmt.Appendf(nil, "k%d", (i*7+round*500)%1700)
			keys = append(keys, k)
			kb.buf = append(kb.buf, k...)
			kb.end()
		}
		x.AddBlock(&kb)
		for i, k := range keys {
			id, _ := y.Add(k)
			if kb.ids[i] != id {
				t.Fatalf("round %d key %s: AddBlock id %d, Add id %d", round, k, kb.ids[i], id)
			}
		}
	}
	kb.reset()
	for _, k := range []string{"k0", "k1699", "k1700", "nope", "k5"} {
		kb.buf = append(kb.buf, k...)
		kb.end()
	}
	x.LookupBlock(&kb)
	for i, k := range []string{"k0", "k1699", "k1700", "nope", "k5"} {
		id, ok := y.Lookup([]byte(k))
		if !ok {
			id = -1
		}
		if kb.ids[i] != id {
			t.Errorf("LookupBlock(%s) = %d, Lookup = %d", k, kb.ids[i], id)
		}
	}
}
