package delta

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// keyValues answers, for one key column of the MERGE source, whether some source value
// lies in a range (a file's min/max stats, or a partition value). It starts from the
// column's min and max, which settle most files in O(1); only a range strictly inside
// them needs the values themselves: a scan for one in range (stopping at the first),
// and, once such scans have cost as much as the column's length, the values sorted once
// for binary search. A merge with one candidate file never sorts.
type keyValues struct {
	get   func(int) expr.Value // row i's expr.Value (valid only where valid(i))
	valid func(int) bool
	n     int // source rows

	any    bool       // some non-null expr.Value
	null   bool       // some null
	lo, hi expr.Value // min and max non-null expr.Value (when any)

	ints *intKeys // a single integer key's index: its bitmap answers anyIn

	mu     sync.Mutex   // guards budget and sorted (files are pruned while commits check conflicts)
	budget int          // rows the scans may still read before the values are sorted
	sorted []expr.Value // sorted distinct non-null values, once built
}

// newKeyValues makes one pass over a key column for its null flag, min and max.
func newKeyValues(get func(int) expr.Value, valid func(int) bool, n int) *keyValues {
	kv := &keyValues{get: get, valid: valid, n: n, budget: n}
	for i := 0; i < n; i++ {
		if !valid(i) {
			kv.null = true
			continue
		}
		v := get(i)
		switch {
		case !kv.any:
			kv.lo, kv.hi, kv.any = v, v, true
		case expr.Compare(v, kv.lo) < 0:
			kv.lo = v
		case expr.Compare(v, kv.hi) > 0:
			kv.hi = v
		}
	}
	return kv
}

// anyIn reports whether some non-null source value v has mn <= v <= mx (a nil bound is
// open).
func (kv *keyValues) anyIn(mn, mx *expr.Value) bool {
	if !kv.any {
		return false
	}
	if kv.ints != nil {
		lo, hi := kv.ints.min, kv.ints.max
		loOK, hiOK := true, true
		if mn != nil {
			lo, loOK = mn.Int()
		}
		if mx != nil {
			hi, hiOK = mx.Int()
		}
		if loOK && hiOK {
			if in, ok := kv.ints.anyIn(lo, hi); ok {
				return in
			}
		}
	}
	if (mn != nil && expr.Compare(kv.hi, *mn) < 0) || (mx != nil && expr.Compare(kv.lo, *mx) > 0) {
		return false // disjoint
	}
	// The ranges overlap: the source's min or max is inside unless the range lies
	// strictly between them.
	if mn == nil || expr.Compare(kv.lo, *mn) >= 0 || mx == nil || expr.Compare(kv.hi, *mx) <= 0 {
		return true
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.sorted == nil && kv.budget > 0 {
		for i := 0; i < kv.n; i++ {
			if !kv.valid(i) {
				continue
			}
			if v := kv.get(i); expr.Compare(v, *mn) >= 0 && expr.Compare(v, *mx) <= 0 {
				kv.budget -= i + 1
				return true
			}
		}
		kv.budget -= kv.n
		return false
	}
	if kv.sorted == nil {
		kv.sort()
	}
	vals := kv.sorted
	i := sort.Search(len(vals), func(i int) bool { return expr.Compare(vals[i], *mn) >= 0 })
	return i < len(vals) && expr.Compare(vals[i], *mx) <= 0
}

// sort builds kv.sorted; the caller holds kv.mu.
func (kv *keyValues) sort() {
	vals := make([]expr.Value, 0, kv.n)
	for i := 0; i < kv.n; i++ {
		if kv.valid(i) {
			vals = append(vals, kv.get(i))
		}
	}
	slices.SortFunc(vals, expr.Compare)
	kv.sorted = slices.CompactFunc(vals, func(a, b expr.Value) bool { return expr.Compare(a, b) == 0 })
}

// collectKeyValues prepares the pruning of target files by the source's key values.
func (s *mergeSource) collectKeyValues(plan *mergePlan) error {
	n := int(s.n)
	s.keyVals = make([]*keyValues, len(s.keyCols))
	for k, c := range s.keyCols {
		arr := s.rec.Column(c)
		get, err := expr.ValueGetter(arr)
		if err != nil {
			return fmt.Errorf("key column %s: %w", plan.keys[k], err)
		}
		if s.ints != nil {
			// The index has the key's range already.
			s.keyVals[k] = &keyValues{get: get, valid: arr.IsValid, n: n, budget: n, any: s.ints.n > 0,
				null: arr.NullN() > 0, lo: expr.IntValue(s.ints.min), hi: expr.IntValue(s.ints.max), ints: s.ints}
			continue
		}
		s.keyVals[k] = newKeyValues(get, arr.IsValid, n)
	}
	return nil
}

// mayHoldKeys reports whether a target file can hold a row whose key equals a source key:
// for every key column, a source value within the file's partition value or min/max
// stats (or, with nullSafe, a null on both sides).
func (s *mergeSource) mayHoldKeys(plan *mergePlan, a *Add, isPart map[string]bool) (bool, error) {
	if s.distinctKeys() == 0 {
		return false, nil
	}
	var sv *expr.Stats
	parsed := false
	for k, name := range plan.keys {
		f := plan.schema.Fields[plan.keyIdx[k]]
		kv := s.keyVals[k]
		if isPart[strings.ToLower(name)] {
			v, err := expr.ParsePartitionValue(f.Type, partitionValue(a, f.Name, physicalName(f)))
			if err != nil {
				return false, fmt.Errorf("file %s: %w", a.Path, err)
			}
			if v.IsNull() {
				if !(plan.nullSafe && kv.null) {
					return false, nil
				}
				continue
			}
			if !kv.anyIn(&v, &v) {
				return false, nil
			}
			continue
		}
		if !parsed {
			sv, parsed = parseStatsView(a.Stats), true
		}
		if sv == nil {
			continue
		}
		path := []string{physicalName(f)}
		if plan.nullSafe && kv.null {
			if n, ok := sv.Nulls(path); !ok || n != 0 {
				continue // the file may hold null keys, which match
			}
		}
		if sv.NumRecords != nil {
			if n, ok := sv.Nulls(path); ok && n == *sv.NumRecords {
				return false, nil // only null keys, and those match nothing here
			}
		}
		var mn, mx *expr.Value
		lo, hi, hasLo, hasHi := sv.Bounds(f.Type, path)
		if hasLo {
			mn = &lo
		}
		if hasHi {
			mx = &hi
		}
		if !kv.anyIn(mn, mx) {
			return false, nil
		}
	}
	return true, nil
}
