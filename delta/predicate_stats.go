package delta

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// fileStatsView is a parsed stats string.
type fileStatsView struct {
	numRecords *int64
	min, max   map[string]any
	nulls      map[string]any
}

func parseStatsView(s string) *fileStatsView {
	if s == "" {
		return nil
	}
	var raw struct {
		NumRecords *int64         `json:"numRecords"`
		MinValues  map[string]any `json:"minValues"`
		MaxValues  map[string]any `json:"maxValues"`
		NullCount  map[string]any `json:"nullCount"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if dec.Decode(&raw) != nil {
		return nil // unreadable stats never prune
	}
	return &fileStatsView{numRecords: raw.NumRecords, min: raw.MinValues, max: raw.MaxValues, nulls: raw.NullCount}
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
func statValue(dt DataType, raw any) (value, bool) {
	var s string
	switch x := raw.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	case bool:
		return value{kind: vBool, b: x}, true
	default:
		return value{}, false
	}
	v, err := parseTyped(dt, s, false)
	return v, err == nil
}

// statBounds reads a column's min and max statistics as bounds that hold for every
// non-null value in the file, whatever rounding or truncation the writer's JSON applied
// (PROTOCOL.md §Per-file Statistics lets statistics be wider than the data): a float
// column's stats are float32 values, widened by one float32 step each way, and a double's
// by one float64 step (a writer that prints them short of round-trip precision); a decimal
// of more than 15 digits may have gone through a double, so it is widened by a double's
// relative precision; timestamps are kept to milliseconds (truncated either way), so
// they are widened by 999µs; strings are prefix-truncated, so the max stands for every
// string it is a prefix of: the bound is the smallest string above them all (none when
// the max is empty or all 0xFF bytes). Integers, dates and booleans are exact.
func statBounds(dt DataType, rawMin, rawMax any) (mn, mx value, hasMin, hasMax bool) {
	if rawMin != nil {
		mn, hasMin = statValue(dt, rawMin)
	}
	if rawMax != nil {
		mx, hasMax = statValue(dt, rawMax)
	}
	switch t := dt.(type) {
	case *DecimalType:
		if t.Precision > 15 {
			if hasMin {
				mn.r = widenRat(mn.r, -1)
			}
			if hasMax {
				mx.r = widenRat(mx.r, 1)
			}
		}
	case *PrimitiveType:
		switch t.Name {
		case TypeFloat:
			if hasMin {
				mn.f = float64(math.Nextafter32(float32(mn.f), float32(math.Inf(-1))))
			}
			if hasMax {
				mx.f = float64(math.Nextafter32(float32(mx.f), float32(math.Inf(1))))
			}
		case TypeDouble:
			if hasMin {
				mn.f = math.Nextafter(mn.f, math.Inf(-1))
			}
			if hasMax {
				mx.f = math.Nextafter(mx.f, math.Inf(1))
			}
		case TypeTimestamp, TypeTimestampNTZ:
			if hasMin && mn.i > math.MinInt64+999 {
				mn.i -= 999
			}
			if hasMax && mx.i < math.MaxInt64-999 {
				mx.i += 999
			}
		case TypeString:
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

// mayMatchFile reports whether a file can hold a row for which the predicate is true:
// exactly for partition columns, conservatively from stats for others (a file without
// stats is never pruned).
func (b *boundPredicate) mayMatchFile(a *Add, isPart map[string]bool) (bool, error) {
	var sv *fileStatsView
	parsed := false
	var rec func(p *boundPredicate) (bool, error)
	rec = func(p *boundPredicate) (bool, error) {
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
		if len(p.path) == 1 && isPart[strings.ToLower(p.path[0])] {
			v, err := parsePartitionValue(p.typ, partitionValue(a, p.path[0], p.phys[0]))
			if err != nil {
				return false, err
			}
			return p.test(v) == tTrue, nil
		}
		if !parsed {
			sv, parsed = parseStatsView(a.Stats), true
		}
		return p.mayMatchStats(sv), nil
	}
	return rec(b)
}

func (b *boundPredicate) mayMatchStats(sv *fileStatsView) bool {
	if sv == nil || b.noStats {
		return true
	}
	var nullCount int64 = -1
	if raw, ok := lookupPath(sv.nulls, b.phys); ok {
		if n, ok := raw.(json.Number); ok {
			if x, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
				nullCount = x
			}
		}
	}
	allNull := nullCount >= 0 && sv.numRecords != nil && nullCount == *sv.numRecords
	if b.kind == bNull {
		if b.not {
			return !allNull
		}
		return nullCount != 0
	}
	if allNull {
		return false // every comparison with null is null
	}
	rawMin, _ := lookupPath(sv.min, b.phys)
	rawMax, _ := lookupPath(sv.max, b.phys)
	mn, mx, hasMin, hasMax := statBounds(b.typ, rawMin, rawMax)
	inRange := func(v value) bool {
		if hasMin && compareValues(v, mn) < 0 {
			return false
		}
		if hasMax && compareValues(v, mx) > 0 {
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
		if hasMin && hasMax && exactStats(b.typ) && compareValues(mn, mx) == 0 && compareValues(mn, v) == 0 {
			return false
		}
	case OpLt:
		return !hasMin || compareValues(mn, v) < 0
	case OpLe:
		return !hasMin || compareValues(mn, v) <= 0
	case OpGt:
		return !hasMax || compareValues(mx, v) > 0
	case OpGe:
		return !hasMax || compareValues(mx, v) >= 0
	}
	return true
}

// exactStats: the type's min/max stats are exact values (not truncated).
func exactStats(dt DataType) bool {
	if p, ok := dt.(*PrimitiveType); ok {
		switch p.Name {
		case TypeString, TypeTimestamp, TypeTimestampNTZ, TypeFloat, TypeDouble:
			return false
		}
	}
	return true
}
