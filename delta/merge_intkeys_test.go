package delta

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// intKeys finds each key's first source row and whether it has more, and answers range
// queries as a scan of the keys would: dense keys (the bitmap, ranges starting at any
// bit of a word and ending one past the last) and sparse ones (the map), with nulls,
// duplicates and negative keys; and keyValues.anyIn answers the same through it.
func TestIntKeys(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name      string
		n         int
		from, to  int64 // keys drawn from [from, to)
		nulls     bool
		wantDense bool
	}{
		{"dense", 3000, -500, 4000, false, true},
		{"dense with nulls and duplicates", 5000, 0, 2000, true, true},
		{"range of exactly 64", 200, 64, 128, false, true},
		{"one key", 1, 41, 42, false, true},
		{"sparse", 500, -1 << 40, 1 << 40, true, false},
		{"only nulls", 10, 0, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := array.NewInt64Builder(memory.DefaultAllocator)
			defer b.Release()
			first, dup := map[int64]int32{}, map[int64]bool{}
			for i := 0; i < tc.n; i++ {
				if tc.nulls && (tc.to == tc.from || i%9 == 0) {
					b.AppendNull()
					continue
				}
				k := tc.from + rnd.Int64N(tc.to-tc.from)
				if _, ok := first[k]; ok {
					dup[k] = true
				} else {
					first[k] = int32(i)
				}
				b.Append(k)
			}
			arr := b.NewInt64Array()
			defer arr.Release()
			ik := newIntKeys(arr, func(i int) int64 { return arr.Value(i) }, arr.Len())
			if dense := ik.bits != nil; dense != tc.wantDense {
				t.Fatalf("dense = %v, want %v", dense, tc.wantDense)
			}
			if ik.n != len(first) {
				t.Fatalf("%d distinct keys, want %d", ik.n, len(first))
			}
			probe := func(k int64) {
				row, hit := ik.lookup(k)
				want, ok := first[k]
				switch {
				case !ok && hit != 0:
					t.Fatalf("key %d: hit %d, want none", k, hit)
				case ok && (row != want || (hit == 2) != dup[k] || hit == 0):
					t.Fatalf("key %d: row %d hit %d, want row %d, more rows %v", k, row, hit, want, dup[k])
				}
			}
			for k := range first {
				probe(k)
				probe(k - 1)
				probe(k + 1)
			}
			for range 2000 {
				probe(tc.from - 70 + rnd.Int64N(tc.to-tc.from+140))
			}
			get, err := expr.ValueGetter(arr)
			if err != nil {
				t.Fatal(err)
			}
			kv := &keyValues{get: get, valid: arr.IsValid, n: arr.Len(), budget: arr.Len(), any: ik.n > 0,
				null: arr.NullN() > 0, lo: expr.IntValue(ik.min), hi: expr.IntValue(ik.max), ints: ik}
			for q := range 3000 {
				lo := tc.from - 70 + rnd.Int64N(tc.to-tc.from+140)
				hi := lo + rnd.Int64N(min(tc.to-tc.from, 1<<20)/8+2) - 1 // sometimes hi < lo
				want := false
				for k := range first {
					want = want || lo <= k && k <= hi
				}
				if in, ok := ik.anyIn(lo, hi); ok != tc.wantDense || ok && in != want {
					t.Fatalf("query %d: anyIn(%d, %d) = %v, %v; want %v (dense %v)", q, lo, hi, in, ok, want, tc.wantDense)
				}
				lv, hv := expr.IntValue(lo), expr.IntValue(hi)
				mn, mx := &lv, &hv
				switch q % 5 {
				case 3:
					mn, want = nil, false
					for k := range first {
						want = want || k <= hi
					}
				case 4:
					mx, want = nil, false
					for k := range first {
						want = want || lo <= k
					}
				}
				if got := kv.anyIn(mn, mx); got != want {
					t.Fatalf("query %d: keyValues.anyIn(%s, %s) = %v, want %v", q, bound(mn), bound(mx), got, want)
				}
			}
		})
	}
}

// BenchmarkIntKeys indexes 100,000 source keys spread over a million ids and looks up
// a million target keys, as a MERGE on an id does.
func BenchmarkIntKeys(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 1))
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	for range 100_000 {
		bld.Append(rnd.Int64N(1_000_000))
	}
	arr := bld.NewInt64Array()
	defer arr.Release()
	bld.Release()
	get := func(i int) int64 { return arr.Value(i) }
	for b.Loop() {
		ik := newIntKeys(arr, get, arr.Len())
		hits := 0
		for k := range int64(1_000_000) {
			if _, h := ik.lookup(k); h > 0 {
				hits++
			}
		}
		if hits != ik.n {
			b.Fatal(fmt.Sprint(hits, " hits, want ", ik.n))
		}
	}
}
