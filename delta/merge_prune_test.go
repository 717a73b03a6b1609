package delta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// keyValues.anyIn answers as a scan of every value would, through all three of its ways:
// the min/max check, the early-stopping scan, and (once the scans used up their budget)
// binary search in the sorted values.
func TestKeyValuesAnyIn(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name  string
		n     int
		span  int64
		nulls bool
	}{
		{"dense", 200, 300, false},
		{"sparse with nulls", 50, 10_000, true},
		{"one value", 1, 10, false},
		{"only nulls", 5, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := array.NewInt64Builder(memory.DefaultAllocator)
			defer b.Release()
			var vals []int64
			for i := 0; i < tc.n; i++ {
				if tc.nulls && (tc.span == 0 || i%7 == 0) {
					b.AppendNull()
					continue
				}
				v := rnd.Int64N(tc.span)
				vals = append(vals, v)
				b.Append(v)
			}
			arr := b.NewArray()
			defer arr.Release()
			get, err := expr.ValueGetter(arr)
			if err != nil {
				t.Fatal(err)
			}
			kv := newKeyValues(get, arr.IsValid, arr.Len())
			if kv.null != (len(vals) < tc.n) {
				t.Errorf("null = %v, want %v", kv.null, len(vals) < tc.n)
			}
			sortedOnce := false
			for q := 0; q < 400; q++ {
				lo := rnd.Int64N(tc.span+20) - 10
				hi := lo + rnd.Int64N(tc.span/4+3)
				lv, hv := expr.IntValue(lo), expr.IntValue(hi)
				mn, mx := &lv, &hv
				switch q % 5 {
				case 3:
					mn = nil
				case 4:
					mx = nil
				}
				want := slices.ContainsFunc(vals, func(v int64) bool { return (mn == nil || v >= lo) && (mx == nil || v <= hi) })
				if got := kv.anyIn(mn, mx); got != want {
					t.Fatalf("query %d: anyIn(%s, %s) = %v, want %v (sorted: %v)", q, bound(mn), bound(mx), got, want, kv.sorted != nil)
				}
				sortedOnce = sortedOnce || kv.sorted != nil
			}
			if tc.n > 10 && len(vals) > 0 && !sortedOnce {
				t.Errorf("400 queries never needed the sorted values")
			}
		})
	}
}

func bound(v *expr.Value) string {
	if v == nil {
		return "open"
	}
	i, _ := v.Int()
	return fmt.Sprint(i)
}

// keyIndex finds every key added, the first row of each, which keys several rows hold,
// and nothing else, one key at a time or in batches.
func TestKeyIndex(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	sch := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true}}, nil)
	build := func(n int, space int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		defer b.Release()
		for i := 0; i < n; i++ {
			k := rnd.IntN(space)
			if k%11 == 0 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("C%07d", k))
			}
			if k%13 == 0 { // a null in the second key column: no partial key may linger
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(k % 3))
			}
		}
		return b.NewRecordBatch()
	}
	for _, nullSafe := range []bool{false, true} {
		t.Run(fmt.Sprintf("nullSafe=%v", nullSafe), func(t *testing.T) {
			src := build(3000, 2000)
			defer src.Release()
			s := &mergeSource{rec: src, n: src.NumRows(), keyCols: []int{0, 1}}
			if err := s.buildIndex(&mergePlan{keys: []string{"s", "ts"}, nullSafe: nullSafe}); err != nil {
				t.Fatal(err)
			}
			enc, _ := newKeyEncoder(src, []int{0, 1}, nullSafe)
			first, count := map[string]int32{}, map[string]int{}
			for i := 0; i < int(src.NumRows()); i++ {
				k, ok := enc.key(nil, i)
				if !ok {
					continue
				}
				if _, seen := first[string(k)]; !seen {
					first[string(k)] = int32(i)
				}
				count[string(k)]++
			}
			if s.distinctKeys() != len(first) {
				t.Errorf("%d distinct keys, want %d", s.distinctKeys(), len(first))
			}
			tgt := build(5000, 4000)
			defer tgt.Release()
			pr, err := s.newProber(tgt, []int{0, 1}, nullSafe)
			if err != nil {
				t.Fatal(err)
			}
			tenc, _ := newKeyEncoder(tgt, []int{0, 1}, nullSafe)
			n := int(tgt.NumRows())
			for lo := 0; lo < n; lo += 37 { // batches of every size up to probeBatch
				size := min(1+lo%probeBatch, n-lo)
				b := pr.probe(lo, size)
				for j := 0; j < b.n; j++ {
					k, ok := tenc.key(nil, lo+j)
					wantRow, wantHit := first[string(k)]
					wantHit = wantHit && ok
					if (b.hit[j] > 0) != wantHit || (wantHit && (b.row[j] != wantRow || (b.hit[j] == 2) != (count[string(k)] > 1))) {
						t.Fatalf("row %d: hit %d row %d; want hit %v row %d count %d", lo+j, b.hit[j], b.row[j], wantHit, wantRow, count[string(k)])
					}
				}
			}
		})
	}
}
