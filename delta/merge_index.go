package delta

import (
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
)

// sourceIndex maps the encoded keys of the MERGE source to the first source row holding
// each, and knows which keys several rows hold (keyindex does the hashing).
type sourceIndex struct {
	keys *keyindex.Index
	rows []int32 // rows[id] is the first source row with key id
	dup  []bool  // dup[id]: more than one source row has key id
}

func newSourceIndex(capacity int) *sourceIndex {
	return &sourceIndex{keys: keyindex.New(capacity), rows: make([]int32, 0, capacity)}
}

// len is the number of distinct keys.
func (x *sourceIndex) len() int { return x.keys.Len() }

// addBatch adds the keys of b, held by source rows lo, lo+1, ... (rows without a key, a
// null one, are skipped).
func (x *sourceIndex) addBatch(b *keyBatch, lo int) {
	x.keys.AddBlock(&b.keys)
	for j, id := range b.keys.IDs {
		switch {
		case id < 0:
		case int(id) == len(x.rows):
			x.rows = append(x.rows, int32(lo+j))
			x.dup = append(x.dup, false)
		default:
			x.dup[id] = true
		}
	}
}

// lookupBatch resolves the keys of b: hit and row.
func (x *sourceIndex) lookupBatch(b *keyBatch) {
	x.keys.LookupBlock(&b.keys)
	for j, id := range b.keys.IDs {
		b.hit[j] = 0
		if id < 0 {
			continue
		}
		b.row[j], b.hit[j] = x.rows[id], 1
		if x.dup[id] {
			b.hit[j] = 2
		}
	}
}

// probeBatch is how many target (or source) rows are encoded and looked up at once.
const probeBatch = 256

// keyBatch is up to probeBatch encoded keys and what lookupBatch found for them.
type keyBatch struct {
	keys keyindex.Block
	row  [probeBatch]int32 // the first source row with key j (when hit[j] > 0)
	hit  [probeBatch]uint8 // 0: no source row; 1: one; 2: several
	n    int
}

// encode sets b to the keys of rows lo .. lo+n-1; a row whose key has a null that
// matches nothing has no key (and leaves no bytes behind).
func (b *keyBatch) encode(enc *keyEncoder, lo, n int) {
	b.n = n
	b.keys.Reset()
	for j := 0; j < n; j++ {
		start := len(b.keys.Buf)
		buf, ok := enc.key(b.keys.Buf, lo+j)
		if ok {
			b.keys.Buf = buf
			b.keys.End()
		} else {
			b.keys.Buf = buf[:start]
			b.keys.Skip()
		}
	}
}
