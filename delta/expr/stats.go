package expr

import (
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"

	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Stats are the statistics a data file carries of its columns: its row count, and per
// column (nested like the schema, by physical name) its least and greatest value and its
// count of nulls, as the stats JSON holds them (numbers as json.Number). Fields are nil
// when the file does not say.
type Stats struct {
	NumRecords          *int64
	Min, Max, NullCount map[string]any
}

// Nulls is the count of nulls of the column at path (physical names); ok is false when
// the file does not say.
func (s *Stats) Nulls(path []string) (n int64, ok bool) {
	raw, ok := lookupPath(s.NullCount, path)
	if !ok {
		return 0, false
	}
	num, ok := raw.(json.Number)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(num.String(), 10, 64)
	return n, err == nil
}

// Bounds are the least and greatest values the file's statistics allow for the column at
// path (physical names) of type dt, widened as StatBounds says.
func (s *Stats) Bounds(dt dschema.DataType, path []string) (lo, hi Value, hasLo, hasHi bool) {
	rawMin, _ := lookupPath(s.Min, path)
	rawMax, _ := lookupPath(s.Max, path)
	return StatBounds(dt, rawMin, rawMax)
}

func lookupPath(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		var found bool
		cur, found = mm[p]
		if !found {
			for k, v := range mm { // names are case-insensitive
				if strings.EqualFold(k, p) {
					cur, found = v, true
					break
				}
			}
		}
		if !found {
			return nil, false
		}
	}
	return cur, cur != nil
}

// statValue converts a min/max stat to a value of the column's type, as written (a
// float column's as the float32 it prints).
func statValue(dt dschema.DataType, raw any) (Value, bool) {
	var s string
	switch x := raw.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	case bool:
		return Value{kind: vBool, b: x}, true
	default:
		return Value{}, false
	}
	v, err := parseTyped(dt, s, false)
	return v, err == nil
}

// StatBounds reads a column's min and max statistics as bounds that hold for every
// non-null value in the file, whatever rounding or truncation the writer's JSON applied
// (PROTOCOL.md §Per-file Statistics lets statistics be wider than the data): a float
// column's stats are float32 values, widened by one float32 step each way, and a double's
// by one float64 step (a writer that prints them short of round-trip precision); a decimal
// of more than 15 digits may have gone through a double, so it is widened by a double's
// relative precision; timestamps are kept to milliseconds (truncated either way), so
// they are widened by 999µs; strings are prefix-truncated, so the max stands for every
// string it is a prefix of: the bound is the smallest string above them all (none when
// the max is empty or all 0xFF bytes). Integers, dates and booleans are exact.
func StatBounds(dt dschema.DataType, rawMin, rawMax any) (mn, mx Value, hasMin, hasMax bool) {
	if rawMin != nil {
		mn, hasMin = statValue(dt, rawMin)
	}
	if rawMax != nil {
		mx, hasMax = statValue(dt, rawMax)
	}
	switch t := dt.(type) {
	case *dschema.DecimalType:
		if t.Precision > 15 {
			if hasMin {
				mn.r = widenRat(mn.r, -1)
			}
			if hasMax {
				mx.r = widenRat(mx.r, 1)
			}
		}
	case *dschema.PrimitiveType:
		switch t.Name {
		case dschema.TypeFloat:
			if hasMin {
				mn.f = float64(math.Nextafter32(float32(mn.f), float32(math.Inf(-1))))
			}
			if hasMax {
				mx.f = float64(math.Nextafter32(float32(mx.f), float32(math.Inf(1))))
			}
		case dschema.TypeDouble:
			if hasMin {
				mn.f = math.Nextafter(mn.f, math.Inf(-1))
			}
			if hasMax {
				mx.f = math.Nextafter(mx.f, math.Inf(1))
			}
		case dschema.TypeTimestamp, dschema.TypeTimestampNTZ:
			if hasMin && mn.i > math.MinInt64+999 {
				mn.i -= 999
			}
			if hasMax && mx.i < math.MaxInt64-999 {
				mx.i += 999
			}
		case dschema.TypeString:
			if hasMax {
				mx.s, hasMax = prefixUpperBound(mx.s)
			}
		}
	}
	return mn, mx, hasMin, hasMax
}

// widenRat moves r away by |r|·2⁻⁵⁰ in direction dir (a double's rounding error, with
// room to spare).
func widenRat(r *big.Rat, dir int) *big.Rat {
	d := new(big.Rat).Abs(r)
	d.Mul(d, new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 50)))
	if dir < 0 {
		return d.Sub(r, d)
	}
	return d.Add(r, d)
}

// prefixUpperBound returns the smallest byte string greater than every string that
// starts with p (ok false when there is none: p empty or all 0xFF bytes).
func prefixUpperBound(p string) (string, bool) {
	b := []byte(p)
	for len(b) > 0 && b[len(b)-1] == 0xFF {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "", false
	}
	b[len(b)-1]++
	return string(b), true
}

// File is what a data file says of its rows without being read.
type File struct {
	// PartitionValues are the file's serialized partition values by column (physical)
	// name, nil meaning null.
	PartitionValues map[string]*string
	// IsPartition holds the lower-case names of the table's partition columns.
	IsPartition map[string]bool
	// Stats returns the file's statistics (nil: none, which never prunes). It is called
	// at most once, and only when a column other than a partition column is tested.
	Stats func() *Stats
}

// MayMatchFile reports whether a file can hold a row for which the predicate is true:
// exactly for partition columns, conservatively from stats for others (a file without
// stats is never pruned).
func (b *Bound) MayMatchFile(f File) (bool, error) {
	var sv *Stats
	parsed := false
	var rec func(p *Bound) (bool, error)
	rec = func(p *Bound) (bool, error) {
		switch p.kind {
		case bAnd:
			for _, t := range p.terms {
				if ok, err := rec(t); err != nil || !ok {
					return ok, err
				}
			}
			return true, nil
		case bOr:
			for _, t := range p.terms {
				if ok, err := rec(t); err != nil || ok {
					return ok, err
				}
			}
			return false, nil
		}
		if len(p.path) == 1 && f.IsPartition[strings.ToLower(p.path[0])] {
			v, err := ParsePartitionValue(p.typ, partitionValue(f.PartitionValues, p.path[0], p.phys[0]))
			if err != nil {
				return false, err
			}
			return p.test(v) == True, nil
		}
		if !parsed && f.Stats != nil {
			sv, parsed = f.Stats(), true
		}
		return p.MayMatchStats(sv), nil
	}
	return rec(b)
}

// partitionValue is the serialized value of the partition column of logical name name
// and physical name phys: by its physical name when the column has one of its own, else
// by its name in any case.
func partitionValue(pv map[string]*string, name, phys string) *string {
	if phys != name {
		return pv[phys]
	}
	for k, v := range pv {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

// MayMatchStats reports whether a file of statistics sv (nil: none) can hold a row for
// which the leaf predicate b is true.
func (b *Bound) MayMatchStats(sv *Stats) bool {
	if sv == nil || b.noStats {
		return true
	}
	var nullCount int64 = -1
	if n, ok := sv.Nulls(b.phys); ok {
		nullCount = n
	}
	allNull := nullCount >= 0 && sv.NumRecords != nil && nullCount == *sv.NumRecords
	if b.kind == bNull {
		if b.not {
			return !allNull
		}
		return nullCount != 0
	}
	if allNull {
		return false // every comparison with null is null
	}
	mn, mx, hasMin, hasMax := sv.Bounds(b.typ, b.phys)
	inRange := func(v Value) bool {
		if hasMin && Compare(v, mn) < 0 {
			return false
		}
		if hasMax && Compare(v, mx) > 0 {
			return false
		}
		return true
	}
	if b.kind == bIn {
		for _, v := range b.vals {
			if inRange(v) {
				return true
			}
		}
		return false
	}
	v := b.vals[0]
	switch b.op {
	case OpEq:
		return inRange(v)
	case OpNe:
		if hasMin && hasMax && exactStats(b.typ) && Compare(mn, mx) == 0 && Compare(mn, v) == 0 {
			return false
		}
	case OpLt:
		return !hasMin || Compare(mn, v) < 0
	case OpLe:
		return !hasMin || Compare(mn, v) <= 0
	case OpGt:
		return !hasMax || Compare(mx, v) > 0
	case OpGe:
		return !hasMax || Compare(mx, v) >= 0
	}
	return true
}

// exactStats: the type's min/max stats are exact values (not truncated).
func exactStats(dt dschema.DataType) bool {
	if p, ok := dt.(*dschema.PrimitiveType); ok {
		switch p.Name {
		case dschema.TypeString, dschema.TypeTimestamp, dschema.TypeTimestampNTZ, dschema.TypeFloat, dschema.TypeDouble:
			return false
		}
	}
	return true
}
