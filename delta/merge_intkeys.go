package delta

import (
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
)

// intKeys is the MERGE source's keys when they are one integer column (not null-safe).
// Keys dense enough in their range (at most 64 bits of range a key, at most 64 Mi
// bits) are a bitmap of the range with the count of keys before each word: a key's rank
// among the distinct keys is its place in rows (its first source row) and dups (it has
// more). A range query (does a target file's min..max hold a key) is two ranks. Other
// keys are a map.
type intKeys struct {
	n int // distinct keys

	// dense
	min, max int64
	bits     []uint64 // bit k-min: k is a source key
	ranks    []int32  // keys before each word of bits
	rows     []int32  // per rank: the key's first source row
	dups     []uint64 // per rank: the key has more source rows

	// sparse (bits nil)
	rowOf map[int64]int32
	dupOf map[int64]bool
}

// maxIntKeyBits bounds the bitmap: 8 MiB, and its ranks 4 MiB.
const maxIntKeyBits = 8 << 23

// newIntKeys indexes the n source rows' keys; get reads row i's key (arr tells nulls,
// which match nothing).
func newIntKeys(arr arrow.Array, get func(int) int64, n int) *intKeys {
	ik := &intKeys{}
	present := 0
	for i := 0; i < n; i++ {
		if arr.IsNull(i) {
			continue
		}
		k := get(i)
		if present == 0 {
			ik.min, ik.max = k, k
		}
		ik.min, ik.max = min(ik.min, k), max(ik.max, k)
		present++
	}
	span := uint64(ik.max - ik.min) // wraps for huge ranges, which the bounds below refuse
	if present == 0 || ik.max-ik.min < 0 || span >= 64*uint64(present)+1<<16 || span >= maxIntKeyBits {
		ik.rowOf, ik.dupOf = make(map[int64]int32, present), map[int64]bool{}
		for i := 0; i < n; i++ {
			if arr.IsNull(i) {
				continue
			}
			k := get(i)
			if _, seen := ik.rowOf[k]; seen {
				ik.dupOf[k] = true
				continue
			}
			ik.rowOf[k] = int32(i)
		}
		ik.n = len(ik.rowOf)
		return ik
	}
	ik.bits = make([]uint64, span/64+1)
	for i := 0; i < n; i++ {
		if !arr.IsNull(i) {
			d := uint64(get(i) - ik.min)
			ik.bits[d/64] |= 1 << (d % 64)
		}
	}
	ik.ranks = make([]int32, len(ik.bits))
	total := 0
	for w, b := range ik.bits {
		ik.ranks[w] = int32(total)
		total += bits.OnesCount64(b)
	}
	ik.n = total
	ik.rows, ik.dups = make([]int32, total), make([]uint64, (total+63)/64)
	for r := range ik.rows {
		ik.rows[r] = -1
	}
	for i := 0; i < n; i++ {
		if arr.IsNull(i) {
			continue
		}
		r := ik.rank(uint64(get(i) - ik.min))
		if ik.rows[r] < 0 {
			ik.rows[r] = int32(i)
		} else {
			ik.dups[r/64] |= 1 << (r % 64)
		}
	}
	return ik
}

// rank is the number of keys below min+d (d within the range, or one past it).
func (ik *intKeys) rank(d uint64) int {
	w := d / 64
	if w >= uint64(len(ik.bits)) {
		return ik.n
	}
	return int(ik.ranks[w]) + bits.OnesCount64(ik.bits[w]&(1<<(d%64)-1))
}

// lookup returns key k's first source row and 1, or 2 when the key has more than one
// source row, or 0 when no source row has it.
func (ik *intKeys) lookup(k int64) (int32, uint8) {
	if ik.bits == nil {
		row, found := ik.rowOf[k]
		switch {
		case !found:
			return 0, 0
		case ik.dupOf[k]:
			return row, 2
		}
		return row, 1
	}
	if k < ik.min || k > ik.max {
		return 0, 0
	}
	d := uint64(k - ik.min)
	if ik.bits[d/64]&(1<<(d%64)) == 0 {
		return 0, 0
	}
	r := ik.rank(d)
	if ik.dups[r/64]&(1<<(r%64)) != 0 {
		return ik.rows[r], 2
	}
	return ik.rows[r], 1
}

// anyIn reports whether a source key k has lo <= k <= hi; ok is false for sparse keys,
// which it does not know.
func (ik *intKeys) anyIn(lo, hi int64) (in, ok bool) {
	if ik.bits == nil {
		return false, false
	}
	lo, hi = max(lo, ik.min), min(hi, ik.max)
	if lo > hi {
		return false, true
	}
	return ik.rank(uint64(hi-ik.min)+1) > ik.rank(uint64(lo-ik.min)), true
}
