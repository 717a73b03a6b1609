package delta

import (
	"bytes"
	"encoding/json"
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

// statValue converts a min/max stat to a value of the column's type.
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
	var mn, mx value
	hasMin, hasMax := false, false
	if raw, ok := lookupPath(sv.min, b.phys); ok {
		mn, hasMin = statValue(b.typ, raw)
	}
	if raw, ok := lookupPath(sv.max, b.phys); ok {
		mx, hasMax = statValue(b.typ, raw)
		if p, ok := b.typ.(*PrimitiveType); ok && hasMax && (p.Name == TypeTimestamp || p.Name == TypeTimestampNTZ) {
			mx.i += 999 // stats are truncated to milliseconds
		}
	}
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
