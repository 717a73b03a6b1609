package jobs

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// markDiffering finds exactly the rows whose values differ as text (NULL-safe), for
// each type it compares as values and for one it compares as text.
func TestMarkDiffering(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	types := []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32,
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, arrow.FixedWidthTypes.Date32,
		arrow.FixedWidthTypes.Boolean, &arrow.Decimal128Type{Precision: 10, Scale: 2}, arrow.PrimitiveTypes.Float64}
	for _, dt := range types {
		const n = 500
		build := func() arrow.Array {
			b := array.NewBuilder(memory.DefaultAllocator, dt)
			defer b.Release()
			for range n {
				if rng.IntN(5) == 0 {
					b.AppendNull()
					continue
				}
				if err := b.AppendValueFromString(valueText(dt, rng.IntN(3))); err != nil {
					t.Fatal(err)
				}
			}
			return b.NewArray()
		}
		sc, tc := build(), build()
		got := make([]bool, n)
		got[0] = true // (a row marked already stays marked)
		markDiffering(sc, tc, got)
		for r := range n {
			sn, tn := sc.IsNull(r), tc.IsNull(r)
			want := r == 0 || sn != tn || !sn && sc.ValueStr(r) != tc.ValueStr(r)
			if got[r] != want {
				t.Errorf("%s row %d: %s against %s: differ %v, want %v", dt, r, sc.ValueStr(r), tc.ValueStr(r), got[r], want)
			}
		}
		sc.Release()
		tc.Release()
	}
}

// valueText is the i-th of three values of dt, as text.
func valueText(dt arrow.DataType, i int) string {
	switch dt.ID() {
	case arrow.STRING:
		return fmt.Sprint("v", i)
	case arrow.TIMESTAMP:
		return fmt.Sprintf("2026-01-0%dT00:00:00Z", i+1)
	case arrow.DATE32:
		return fmt.Sprintf("2026-01-0%d", i+1)
	case arrow.BOOL:
		return fmt.Sprint(i%2 == 0)
	case arrow.DECIMAL128:
		return fmt.Sprintf("%d.25", i)
	}
	return fmt.Sprint(i)
}

// Re-keying skips the row groups whose times lie outside the changed ranges, in a fact
// table with deletion vectors: the second re-keying finds its facts by their places in
// files whose vectors the first one wrote, and every fact ends keyed to the version
// valid at its time.
func TestFactLoadRekeySkipsRowGroups(t *testing.T) {
	factFlushRows, factRowGroupSize = 8, 1 // (small row groups: a few days of sales each)
	t.Cleanup(func() { factFlushRows, factRowGroupSize = 32768, 0 })
	staging, dim := customerTables(t)
	raw, facts := salesTables(t)
	facts.Properties = map[string]string{"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
	merge := NewSCD2Merge("customers", scd2Config())
	load := NewFactLoad("sales", factConfig(false, ""))
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(1)}, []any{"C2", "Bo", "Boise", day(1)}, []any{"C1", "Ada", "Portland", day(28)})
	runStage(t, merge, env)
	// The sales of 28 days in time order, a source file a week.
	for week := range 4 {
		var rows [][]any
		for d := 7*week + 1; d <= 7*week+7; d++ {
			rows = append(rows, []any{fmt.Sprintf("S%02d", d), "C1", int64(d), day(d)}, []any{fmt.Sprintf("T%02d", d), "C2", int64(d), day(d)})
		}
		appendRows(t, env, raw, rows...)
	}
	runStage(t, load, env)
	check := func(when string, cityOf func(d int) string) {
		t.Helper()
		sks := map[string]string{}
		for _, r := range tableRows(t, env, dim, "customer_sk", "city") {
			sk, city, _ := strings.Cut(r, "|")
			sks[sk] = city
		}
		got, want := map[string]string{}, map[string]string{}
		for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
			id, sk, _ := strings.Cut(r, "|")
			got[id] = sks[sk]
		}
		for d := 1; d <= 28; d++ {
			want[fmt.Sprintf("S%02d", d)], want[fmt.Sprintf("T%02d", d)] = cityOf(d), "Boise"
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: facts keyed to\n%v\nwant\n%v", when, got, want)
		}
	}
	check("first load", func(d int) string { return map[bool]string{true: "Seattle", false: "Portland"}[d < 28] })
	skipped := func(res Result) {
		t.Helper()
		if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "row groups skipped by their stats") }) {
			t.Errorf("notes %q: want row groups skipped", res.Notes)
		}
	}
	// Ada lived in Tacoma from day 10: the sales of days 10..27 move there.
	appendRows(t, env, staging, []any{"C1", "Ada", "Tacoma", day(10)})
	runStage(t, merge, env)
	res := runStage(t, load, env)
	skipped(res)
	cityOf := func(d int) string {
		switch {
		case d < 10:
			return "Seattle"
		case d < 28:
			return "Tacoma"
		}
		return "Portland"
	}
	check("after the first late event", cityOf)
	// And in Olympia from day 20: days 20..27, whose facts the first re-keying wrote
	// anew (their old rows deleted by vector).
	appendRows(t, env, staging, []any{"C1", "Ada", "Olympia", day(20)})
	runStage(t, merge, env)
	res = runStage(t, load, env)
	skipped(res)
	cityOf2 := func(d int) string {
		if d >= 20 && d < 28 {
			return "Olympia"
		}
		return cityOf(d)
	}
	check("after the second late event", cityOf2)
	// In Kent from day 5, and in Everett from day 12: days 5..9 (never re-keyed) and
	// 12..19 (re-keyed once).
	appendRows(t, env, staging, []any{"C1", "Ada", "Kent", day(5)}, []any{"C1", "Ada", "Everett", day(12)})
	runStage(t, merge, env)
	runStage(t, load, env)
	check("after the third late event", func(d int) string {
		switch {
		case d >= 5 && d < 10:
			return "Kent"
		case d >= 12 && d < 20:
			return "Everett"
		}
		return cityOf2(d)
	})
}

// coverageChanges gives the times where the surrogate key covering a time changed.
func TestCoverageChanges(t *testing.T) {
	const open = math.MaxInt64
	for _, tc := range []struct {
		name     string
		old, now []skInterval
		want     []dimInterval
	}{
		{"a version split by a late event", []skInterval{{dimInterval{10, 20}, 1}}, []skInterval{{dimInterval{10, 15}, 1}, {dimInterval{15, 20}, 2}}, []dimInterval{{15, 20}}},
		{"a type 1 change", []skInterval{{dimInterval{10, open}, 1}}, []skInterval{{dimInterval{10, open}, 1}}, nil},
		{"a new key", nil, []skInterval{{dimInterval{5, open}, 3}}, []dimInterval{{5, open}}},
		{"a version deleted", []skInterval{{dimInterval{1, 5}, 1}, {dimInterval{5, open}, 2}}, []skInterval{{dimInterval{1, open}, 1}}, []dimInterval{{5, open}}},
		{"first version moved earlier", []skInterval{{dimInterval{10, 20}, 1}}, []skInterval{{dimInterval{math.MinInt64, 20}, 1}}, []dimInterval{{math.MinInt64, 10}}},
		{"two splits, joined where adjacent", []skInterval{{dimInterval{0, 30}, 1}}, []skInterval{{dimInterval{0, 10}, 1}, {dimInterval{10, 20}, 2}, {dimInterval{20, 30}, 3}}, []dimInterval{{10, 30}}},
	} {
		if got := coverageChanges(tc.old, tc.now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The changed keys' bits let every changed key's value through, from a string, a long
// or an int column, and keep most other values out.
func TestChangedKeysBits(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32} {
		b := array.NewBuilder(memory.DefaultAllocator, dt)
		for i := range 20000 {
			switch b := b.(type) {
			case *array.StringBuilder:
				b.Append(fmt.Sprintf("C%07d", i))
			case *array.Int64Builder:
				b.Append(int64(i) - 10000)
			case *array.Int32Builder:
				b.Append(int32(i) - 10000)
			}
		}
		col := b.NewArray()
		b.Release()
		rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "k", Type: dt}}, nil), []arrow.Array{col}, int64(col.Len()))
		changed := map[string][]dimInterval{}
		isChanged := map[int]bool{}
		for i := 0; i < col.Len(); i += 50 { // 400 changed keys
			k, err := keyed.AppendKey(nil, rec, []int{0}, i)
			if err != nil {
				t.Fatal(err)
			}
			changed[string(k)] = []dimInterval{{from: 0, to: 1}}
			isChanged[i] = true
		}
		c := newChangedKeys(&factDim{lookup: &FactLookup{}}, changed)
		if c.bits.words == nil {
			t.Fatalf("%s: no bits for keys of one %s column", dt, dt)
		}
		passed := 0
		for r := range col.Len() {
			ok := c.mayHold(col, r)
			if isChanged[r] && !ok {
				t.Fatalf("%s: changed key at row %d kept out", dt, r)
			}
			if ok && !isChanged[r] {
				passed++
			}
		}
		if passed > col.Len()/20 {
			t.Errorf("%s: %d of %d other values let through", dt, passed, col.Len()-len(isChanged))
		}
		rec.Release()
		col.Release()
	}
}

// A set of surrogate keys holds exactly its keys, the unknown key's too.
func TestSKSetExact(t *testing.T) {
	var sks []int64
	for k := int64(-3); k < 30000; k += 7 {
		sks = append(sks, k)
	}
	s := newSKSet(sks)
	for k := int64(-100); k < 40000; k++ {
		want := k >= -3 && k < 30000 && (k+3)%7 == 0
		if s.has(k) != want {
			t.Fatalf("has(%d) = %v, want %v", k, s.has(k), want)
		}
	}
	if newSKSet(nil).has(0) {
		t.Fatal("the empty set holds 0")
	}
	wide := []int64{math.MinInt64, -1, 0, math.MaxInt64}
	for _, k := range wide {
		if !newSKSet(wide).has(k) {
			t.Fatalf("has(%d) = false", k)
		}
	}
}
