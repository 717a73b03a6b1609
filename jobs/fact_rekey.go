package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Re-keying: the facts in the ranges where a dimension's valid version changed are
// looked up again, and those whose key changed are updated.

// rekey looks the facts in the dimensions' changed ranges up again and emits those
// whose key changed (facts this run already emits are keyed already).
func (fr *factRun) rekey(ctx context.Context, f *flow, moved []bool, lastDim []int64, res *Result) error {
	ranges := make([]map[string][]dimInterval, len(fr.dims))
	all := false
	for i, d := range fr.dims {
		if !moved[i] {
			continue
		}
		if lastDim[i] < 0 {
			all = true // never keyed by this dimension (a new lookup)
			continue
		}
		rs, ok, err := d.changedRanges(ctx, lastDim[i])
		if err != nil {
			return fmt.Errorf("dimension %s: %w", d.decl.Name, err)
		}
		if !ok {
			res.Notes = append(res.Notes, fmt.Sprintf("the change feed of %s over versions %d..%d cannot be read: every fact is looked up again", d.decl.Name, lastDim[i]+1, d.snap.Version()))
			all = true
			continue
		}
		res.ChangesRead = append(res.ChangesRead, ChangeRange{Table: d.decl.Name, After: lastDim[i], Through: d.snap.Version()})
		ranges[i] = rs
	}
	if !all && !slices.ContainsFunc(ranges, func(m map[string][]dimInterval) bool { return len(m) > 0 }) {
		return nil
	}
	opts := delta.ScanOptions{}
	if !all {
		opts.Filter = fr.rekeyFilter(ranges)
	}
	sc, err := f.dstSnap.Scan(ctx, opts)
	if err != nil {
		return fmt.Errorf("read fact table %s: %w", f.dstDecl.Name, err)
	}
	defer sc.Release()
	what := "fact table " + f.dstDecl.Name
	var buf []byte
	for sc.Next() {
		rec := sc.RecordBatch()
		names := nameIndex(rec.Schema())
		cols := make([]int, len(fr.keyOf))
		for j := range cols {
			cols[j] = names[strings.ToLower(fr.out.Field(j).Name)]
		}
		for r := range int(rec.NumRows()) {
			key, kc, err := fr.factKey(rec, cols, r)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if fr.emitted(key) {
				continue
			}
			affected := all
			lc := fr.lookupColsOf(rec.Schema())
			for i := range fr.dims {
				if affected || ranges[i] == nil {
					continue
				}
				if buf, err = keyed.AppendKey(buf[:0], rec, lc.key[i], r); err != nil {
					return err
				}
				t, ok, err := timeMicros(rec.Column(lc.at[i]), r)
				if err != nil {
					return err
				}
				affected = ok && inRanges(ranges[i][string(buf)], t)
			}
			if !affected {
				continue
			}
			sks, err := fr.keysFor(rec, kc, r)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			same := true
			for i, l := range fr.s.cfg.Lookups {
				c := rec.Column(names[strings.ToLower(l.Key)])
				same = same && !c.IsNull(r) && c.(*array.Int64).Value(r) == sks[i]
			}
			if same {
				continue // looked up, unchanged: not counted, not written
			}
			fr.tally()
			fr.seen.Add(key)
			if err := fr.emit(rec, cols, r, sks, false); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

// rekeyFilter is a scan filter keeping the facts of the changed business keys (nil, no
// filter, when a lookup has a key of several columns).
func (fr *factRun) rekeyFilter(ranges []map[string][]dimInterval) expr.Predicate {
	var ors []expr.Predicate
	for i, d := range fr.dims {
		if ranges[i] == nil {
			continue
		}
		if len(d.factCols) != 1 {
			return nil
		}
		var vals []any
		for k := range ranges[i] {
			v, ok := decodeKeyValue(k)
			if !ok {
				return nil
			}
			vals = append(vals, v)
		}
		if len(vals) > 0 {
			ors = append(ors, expr.In(d.factCols[0], vals...))
		}
	}
	switch len(ors) {
	case 0:
		return nil
	case 1:
		return ors[0]
	}
	return expr.Or(ors...)
}

// decodeKeyValue decodes a one-column key as keyed.AppendKey encodes strings and integers.
func decodeKeyValue(k string) (any, bool) {
	if len(k) == 0 {
		return nil, false
	}
	switch k[0] {
	case 1:
		b := []byte(k[1:])
		n, w := uvarint(b)
		if w <= 0 || int(n) != len(b)-w {
			return nil, false
		}
		return string(b[w:]), true
	case 2:
		if len(k) != 9 {
			return nil, false
		}
		var v uint64
		for i := 8; i >= 1; i-- {
			v = v<<8 | uint64(k[i])
		}
		return int64(v), true
	}
	return nil, false
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		if c < 0x80 {
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

// differs is the UPDATE condition: the source row differs from the fact (null-safe).
func (fr *factRun) differs(rows arrow.RecordBatch) ([]bool, error) {
	names := nameIndex(rows.Schema())
	out := make([]bool, rows.NumRows())
	for j := range fr.keyOf {
		name := strings.ToLower(fr.out.Field(j).Name)
		si, ok1 := names["source."+name]
		ti, ok2 := names["target."+name]
		if !ok1 || !ok2 {
			for r := range out {
				out[r] = true
			}
			return out, nil
		}
		sc, tc := rows.Column(si), rows.Column(ti)
		for r := range out {
			if out[r] {
				continue
			}
			sn, tn := sc.IsNull(r), tc.IsNull(r)
			out[r] = sn != tn || !sn && sc.ValueStr(r) != tc.ValueStr(r)
		}
	}
	return out, nil
}

// nameIndex maps a schema's lower-cased column names to their indexes.
func nameIndex(s *arrow.Schema) map[string]int {
	m := make(map[string]int, s.NumFields())
	for i, f := range s.Fields() {
		m[strings.ToLower(f.Name)] = i
	}
	return m
}
