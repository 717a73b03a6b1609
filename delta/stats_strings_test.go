package delta

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFoldStringsMatchesNaive checks the string min/max of leafStats (prefix shortcuts,
// skipping repeats) against a plain comparison of every value, over batches with nulls,
// slices, shared prefixes, short and empty strings, and bytes 0x00 and 0xFF.
func TestFoldStringsMatchesNaive(t *testing.T) {
	alphabets := map[string][]string{
		"shared prefix": {"customer-000", "customer-001", "customer-01", "customer-0", "customer-0001x"},
		"short":         {"", "a", "ab", "b", "a\x00", "\x00", "\xff", "a\xff"},
		"constant":      {"s3://bucket/some/long/path/file-000001.csv"},
		"runs":          {"seg-1", "seg-2", "seg-3"},
		"long prefix":   {"TX-000000001", "TX-000000002", "TX-0000000010", "TX-00000000", "TX-000000001\x00", "TX-00000000\x00\x00\x00\x00\x00\x00", "TX-0000000000000000a", "TX-0000000000000000"},
		"utf8":          {"é", "e", "ü", "z", "\U0010FFFF"},
	}
	for name, alpha := range alphabets {
		for _, nullRate := range []float64{0, 0.3, 1} {
			t.Run(fmt.Sprintf("%s/nulls=%v", name, nullRate), func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, uint64(len(alpha))))
				l := &leafStats{kind: kindString}
				var want []string
				for batch := 0; batch < 5; batch++ {
					b := array.NewStringBuilder(memory.DefaultAllocator)
					n := 1 + r.IntN(300)
					var vals []*string
					for i := 0; i < n; i++ {
						if r.Float64() < nullRate {
							b.AppendNull()
							vals = append(vals, nil)
							continue
						}
						v := alpha[r.IntN(len(alpha))]
						if r.IntN(4) == 0 { // runs of one value
							v = alpha[0]
						}
						b.Append(v)
						vals = append(vals, &v)
					}
					arr := b.NewArray()
					b.Release()
					off := r.IntN(n)
					sl := array.NewSlice(arr, int64(off), int64(n))
					for _, v := range vals[off:] {
						if v != nil {
							want = append(want, *v)
						}
					}
					l.update(sl, nil)
					sl.Release()
					arr.Release()
				}
				if len(want) == 0 {
					if l.has {
						t.Fatalf("has min/max %q/%q, want none", l.minS, l.maxS)
					}
					return
				}
				mn, mx := want[0], want[0]
				for _, v := range want {
					mn, mx = min(mn, v), max(mx, v)
				}
				if !l.has || l.minS != mn || l.maxS != mx {
					t.Errorf("min/max = %q/%q (has %v), want %q/%q", l.minS, l.maxS, l.has, mn, mx)
				}
			})
		}
	}
}

// TestFoldStringsUnderStructNulls checks that values under a null struct are left out.
func TestFoldStringsUnderStructNulls(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues([]string{"a", "zz", "m", "b"}, nil)
	arr := b.NewArray()
	defer arr.Release()
	l := &leafStats{kind: kindString}
	l.update(arr, []bool{false, false, true, true})
	if l.minS != "b" || l.maxS != "m" || l.nullCount != 2 {
		t.Errorf("min/max/nulls = %q/%q/%d, want b/m/2", l.minS, l.maxS, l.nullCount)
	}
}

func BenchmarkFoldStrings(b *testing.B) {
	for _, tc := range []struct {
		name string
		val  func(i int) string
	}{
		{"constant", func(int) string { return "s3://bucket/landing/sales/2026-01-01/part-000001.csv" }},
		{"ids", func(i int) string { return fmt.Sprintf("C-%09d", i) }},
		{"lowcard", func(i int) string { return "city-" + fmt.Sprint(i*7919%1000) }},
	} {
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		for i := 0; i < 1<<16; i++ {
			sb.Append(tc.val(i))
		}
		arr := sb.NewArray().(*array.String)
		sb.Release()
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				l := &leafStats{kind: kindString}
				l.update(arr, nil)
			}
		})
		arr.Release()
	}
}

// TestFoldDecimalsMatchesNaive checks the decimal min/max of leafStats against
// decimal128's own comparisons, over values of both signs in both 64-bit halves, with
// nulls and slices.
func TestFoldDecimalsMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	typ := &arrow.Decimal128Type{Precision: 38, Scale: 2}
	for round := range 50 {
		l := &leafStats{kind: kindDecimal}
		var mn, mx decimal128.Num
		has := false
		for range 4 {
			b := array.NewDecimal128Builder(memory.DefaultAllocator, typ)
			n := 1 + r.IntN(200)
			var vals []*decimal128.Num
			for range n {
				if r.IntN(5) == 0 {
					b.AppendNull()
					vals = append(vals, nil)
					continue
				}
				v := decimal128.FromI64(r.Int64() >> r.IntN(60))
				if round%2 == 1 {
					v = decimal128.New(r.Int64()>>r.IntN(63), r.Uint64())
				}
				b.Append(v)
				vals = append(vals, &v)
			}
			arr := b.NewArray()
			b.Release()
			off := r.IntN(n)
			sl := array.NewSlice(arr, int64(off), int64(n))
			for _, v := range vals[off:] {
				if v == nil {
					continue
				}
				if !has {
					mn, mx, has = *v, *v, true
				}
				if v.Less(mn) {
					mn = *v
				}
				if v.Greater(mx) {
					mx = *v
				}
			}
			l.update(sl, nil)
			sl.Release()
			arr.Release()
		}
		if l.has != has || has && (l.minD != mn || l.maxD != mx) {
			t.Fatalf("round %d: min %v max %v (has %v), want %v %v (%v)", round, l.minD, l.maxD, l.has, mn, mx, has)
		}
	}
}

func BenchmarkFoldDecimals(b *testing.B) {
	db := array.NewDecimal128Builder(memory.DefaultAllocator, &arrow.Decimal128Type{Precision: 10, Scale: 2})
	for i := 0; i < 1<<16; i++ {
		db.Append(decimal128.FromI64(int64(i*7919%10000000) - 5000000))
	}
	arr := db.NewArray()
	db.Release()
	defer arr.Release()
	for b.Loop() {
		l := &leafStats{kind: kindDecimal}
		l.update(arr, nil)
	}
}
