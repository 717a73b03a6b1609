package keyindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestAddLookupAcrossGrowth(t *testing.T) {
	x := New(0)
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
	if x.Len() != n || string(x.Key(7)) != "key-7" {
		t.Fatalf("Len = %d, Key(7) = %q", x.Len(), x.Key(7))
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
func TestCollidingHashes(t *testing.T) {
	x := New(4)
	keys := []string{"a", "b", "ab", "ba", "abc"}
	for i, k := range keys {
		if _, found := x.find([]byte(k), 42); found {
			t.Fatalf("%q found before it was added", k)
		}
		if id, added := x.add([]byte(k), 42); !added || id != int32(i) {
			t.Fatalf("add(%q) = %d, %v", k, id, added)
		}
	}
	for i, k := range keys {
		s, found := x.find([]byte(k), 42)
		if !found || x.slots[s].id-1 != int32(i) {
			t.Fatalf("find(%q) = slot %d (id %d), %v; want id %d", k, s, x.slots[s].id-1, found, i)
		}
	}
	if _, found := x.find([]byte("c"), 42); found {
		t.Fatal(`find("c") found a key that was never added`)
	}
}

// The block calls agree with the single ones, across blocks, duplicates inside a block,
// rows without a key, and growth in the middle of a block.
func TestBlocks(t *testing.T) {
	x, y := New(0), New(0)
	var b Block
	for round := range 3 {
		b.Reset()
		var keys [][]byte
		for i := range 1000 {
			if i%97 == 5 {
				b.Skip()
				keys = append(keys, nil)
				continue
			}
			k := fmt.Appendf(nil, "k%d", (i*7+round*500)%1700)
			keys = append(keys, k)
			b.Buf = append(b.Buf, k...)
			b.End()
		}
		x.AddBlock(&b)
		for i, k := range keys {
			want := int32(-1)
			if k != nil {
				want, _ = y.Add(k)
			}
			if b.IDs[i] != want {
				t.Fatalf("round %d row %d (%s): AddBlock id %d, Add id %d", round, i, k, b.IDs[i], want)
			}
		}
	}
	probe := []string{"k0", "", "k1699", "k1700", "nope", "k5"}
	fillBlock(&b, probe)
	x.LookupBlock(&b)
	for i, id := range lookups(y, probe) {
		if b.IDs[i] != id {
			t.Errorf("LookupBlock(%q) = %d, Lookup = %d", probe[i], b.IDs[i], id)
		}
	}
}

// fillBlock makes b the rows of keys ("": a row without a key).
func fillBlock(b *Block, keys []string) {
	b.Reset()
	for _, k := range keys {
		if k == "" {
			b.Skip()
			continue
		}
		b.Buf = append(b.Buf, k...)
		b.End()
	}
}

// lookups is what Lookup gives each key (-1: absent, or no key).
func lookups(x *Index, keys []string) []int32 {
	ids := make([]int32, len(keys))
	for i, k := range keys {
		id, ok := x.Lookup([]byte(k))
		if !ok || k == "" {
			id = -1
		}
		ids[i] = id
	}
	return ids
}

// LookupBlock finds what Lookup finds, row by row, whatever the rows' order: the order
// keys were added in (with absent keys, gaps and rows without a key), no order, and in
// order for a while and then not (it changes how it looks up in the middle of a block).
func TestLookupBlockOrders(t *testing.T) {
	x := New(16)
	for i := range 5000 {
		x.Add(fmt.Appendf(nil, "k%d", i))
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	var inOrder []string
	for i := range 5000 {
		switch {
		case i%97 == 5:
			inOrder = append(inOrder, fmt.Sprintf("new%d", i)) // absent
		case i%89 == 3:
			inOrder = append(inOrder, "") // no key
		case i%83 == 1:
			continue // a gap: the next key is not the one after
		}
		inOrder = append(inOrder, fmt.Sprintf("k%d", i))
	}
	// Rows the table moved: in order but every tenth row's key taken from elsewhere.
	moved := slices.Clone(inOrder)
	for i := 7; i+50 < len(moved); i += 10 {
		moved[i], moved[i+50] = moved[i+50], moved[i]
	}
	shuffled := slices.Clone(inOrder)
	rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	thenNot := append(slices.Clone(inOrder[:2000]), shuffled[:3000]...)
	for name, keys := range map[string][]string{"in order": inOrder, "moved": moved, "shuffled": shuffled, "in order, then not": thenNot} {
		var b Block
		fillBlock(&b, keys)
		x.LookupBlock(&b)
		for i, want := range lookups(x, keys) {
			if b.IDs[i] != want {
				t.Fatalf("%s: row %d (%q): LookupBlock %d, Lookup %d", name, i, keys[i], b.IDs[i], want)
			}
		}
	}
}

// TestAppendLookedUpHalves: a block looked up in two halves and appended has the IDs a
// lookup of the whole block gives; a half not looked up drops them.
func TestAppendLookedUpHalves(t *testing.T) {
	x := New(16)
	for i := range 100 {
		x.Add(fmt.Appendf(nil, "k%d", i))
	}
	var whole, a, b Block
	fillBlock(&whole, []string{"k3", "", "nope", "k99", "k7", "k200"})
	x.LookupBlock(&whole)
	fillBlock(&a, []string{"k3", "", "nope"})
	fillBlock(&b, []string{"k99", "k7", "k200"})
	x.LookupBlock(&a)
	x.LookupBlock(&b)
	a.Append(&b)
	if !slices.Equal(a.IDs, whole.IDs) || a.Len() != whole.Len() {
		t.Fatalf("halves appended: IDs %v over %d rows, want %v", a.IDs, a.Len(), whole.IDs)
	}
	fillBlock(&a, []string{"k3"})
	x.LookupBlock(&a)
	fillBlock(&b, []string{"k7"})
	if a.Append(&b); len(a.IDs) != 0 {
		t.Fatalf("a half not looked up: IDs %v, want none", a.IDs)
	}
}

// BenchmarkIndex adds a million encoded customer keys and looks each up, one at a time
// and in blocks (the stage does one of each per source and per dimension row).
func BenchmarkIndex(b *testing.B) {
	keys := make([][]byte, 1<<20)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "\x01\x08C%07d", i)
	}
	// Building the index a block at a time (a table's keys in pass 1 of a snapshot).
	b.Run("add-block", func(b *testing.B) {
		var blk Block
		for b.Loop() {
			x := New(len(keys))
			for lo := 0; lo < len(keys); lo += 1 << 15 {
				blk.Reset()
				for _, k := range keys[lo:min(lo+1<<15, len(keys))] {
					blk.Buf = append(blk.Buf, k...)
					blk.End()
				}
				x.AddBlock(&blk)
			}
		}
	})
	x := New(len(keys))
	for _, k := range keys {
		x.Add(k)
	}
	b.Run("lookup", func(b *testing.B) {
		for b.Loop() {
			for _, k := range keys {
				x.Lookup(k)
			}
		}
	})
	lookupBlocks := func(b *testing.B, keys [][]byte) {
		var blk Block
		for b.Loop() {
			for lo := 0; lo < len(keys); lo += 1 << 15 {
				blk.Reset()
				for _, k := range keys[lo:min(lo+1<<15, len(keys))] {
					blk.Buf = append(blk.Buf, k...)
					blk.End()
				}
				x.LookupBlock(&blk)
			}
		}
	}
	// In the order the keys were added (a dimension scanned in the order its batch
	// came, an extract sorted as its table), and shuffled (ids, and so the keys' bytes,
	// in no order).
	b.Run("lookup-block", func(b *testing.B) { lookupBlocks(b, keys) })
	// In that order, but one row in ten from elsewhere (a table a MERGE rewrote).
	moved := slices.Clone(keys)
	for i := 7; i+50 < len(moved); i += 10 {
		moved[i], moved[i+50] = moved[i+50], moved[i]
	}
	b.Run("lookup-block-moved", func(b *testing.B) { lookupBlocks(b, moved) })
	shuffled := slices.Clone(keys)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b.Run("lookup-block-shuffled", func(b *testing.B) { lookupBlocks(b, shuffled) })
}

// After Grow(n), adding up to n bytes of keys does not move the arena (no copies).
func TestGrowMakesRoom(t *testing.T) {
	x := New(0)
	x.Add([]byte("first"))
	x.Grow(100 * 8)
	before := cap(x.arena)
	for i := range 100 {
		if id, added := x.Add(fmt.Appendf(nil, "key%05d", i)); !added || id != int32(i+1) {
			t.Fatalf("Add(key%05d) = %d, %v", i, id, added)
		}
	}
	if cap(x.arena) != before || before < 5+800 {
		t.Errorf("arena capacity %d after adding 800 bytes, %d after Grow", cap(x.arena), before)
	}
	if id, ok := x.Lookup([]byte("key00042")); !ok || id != 43 {
		t.Errorf("Lookup(key00042) = %d, %v", id, ok)
	}
}

// A block built in two parts and appended finds the same ids as one built at once.
func TestBlockAppend(t *testing.T) {
	x := New(4)
	var one, a, b Block
	for i, k := range []string{"a", "bb", "", "ccc", "a"} {
		one.Buf = append(one.Buf, k...)
		one.End()
		part := &a
		if i >= 2 {
			part = &b
		}
		part.Buf = append(part.Buf, k...)
		part.End()
	}
	x.AddBlock(&one)
	want := slices.Clone(one.IDs)
	a.Append(&b)
	x.LookupBlock(&a)
	if !slices.Equal(a.IDs, want) {
		t.Fatalf("appended block ids %v, want %v", a.IDs, want)
	}
}
