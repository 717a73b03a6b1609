package jobs

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// factDim is one lookup's dimension as one version of it shows it: per business key,
// its versions' intervals [from, to) in microseconds (to math.MaxInt64 when open), sorted.
type factDim struct {
	lookup   *FactLookup
	decl     *Table
	tbl      *delta.Table
	snap     *delta.Snapshot
	factCols []string // the fact columns of the business key, in a fixed order
	dimCols  []string // the dimension columns they match
	sk       string
	from, to string
	// end is the valid_to of current versions (the dimension's open_end) when it is a
	// declared timestamp (hasEnd): it reads as open, as NULL does; endNull: it is NULL.
	end             int64
	hasEnd, endNull bool
	versions        map[string][]dimInterval
}

// dimInterval is one version of a business key.
type dimInterval struct {
	from, to int64
	sk       int64
}

// openFactDim opens a lookup's dimension at its latest version and finds its columns.
func openFactDim(ctx context.Context, env *Env, l *FactLookup) (*factDim, error) {
	d := &factDim{lookup: l}
	var err error
	if d.decl, err = env.declared(l.Dimension); err != nil {
		return nil, err
	}
	if d.tbl, err = env.openTable(ctx, d.decl); err != nil {
		return nil, err
	}
	if d.snap, err = d.tbl.Snapshot(ctx); err != nil {
		return nil, fmt.Errorf("dimension %s: %w", d.decl.Name, err)
	}
	cols := l.DimensionColumns()
	d.sk, d.from, d.to = cols.SurrogateKey, cols.ValidFrom, cols.ValidTo
	if d.sk == "" {
		ids, err := d.snap.IdentityColumns()
		if err != nil {
			return nil, fmt.Errorf("dimension %s: %w", d.decl.Name, err)
		}
		if len(ids) != 1 {
			return nil, fmt.Errorf("dimension %s has %d identity columns; its scd2_merge must declare columns.surrogate_key", d.decl.Name, len(ids))
		}
		d.sk = ids[0].Name
	}
	d.factCols, d.dimCols = l.factCols()
	if d.end, d.endNull, err = openEndOf(l.openEnd); err != nil {
		return nil, fmt.Errorf("dimension %s: open_end: %w", d.decl.Name, err)
	}
	d.hasEnd = l.openEnd.Text != ""
	schema := d.snap.Schema()
	for _, c := range append(slices.Clone(d.dimCols), d.sk, d.from, d.to) {
		if schema.Field(c) == nil {
			return nil, fmt.Errorf("dimension %s has no column %s", d.decl.Name, c)
		}
	}
	return d, nil
}

// load reads the dimension's versions (its keys and intervals only).
func (d *factDim) load(ctx context.Context) error {
	sc, err := d.snap.Scan(ctx, delta.ScanOptions{Columns: append(slices.Clone(d.dimCols), d.sk, d.from, d.to)})
	if err != nil {
		return fmt.Errorf("read dimension %s: %w", d.decl.Name, err)
	}
	defer sc.Release()
	// Sized for the keys a dimension of this many rows holds at a few versions each: a
	// map grown row by row rehashes its keys several times.
	d.versions = map[string][]dimInterval{}
	if n, ok := d.snap.NumRecords(); ok {
		d.versions = make(map[string][]dimInterval, n/2)
	}
	n := len(d.dimCols)
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	var buf []byte
	for sc.Next() {
		rec := sc.RecordBatch()
		for r := range int(rec.NumRows()) {
			if buf, err = keyed.AppendKey(buf[:0], rec, cols, r); err != nil {
				return fmt.Errorf("dimension %s: %w", d.decl.Name, err)
			}
			skCol := rec.Column(n)
			if skCol.IsNull(r) {
				continue // not a version facts can have (a tombstone without a key)
			}
			sk, err := keyed.Value(skCol, r)
			if err != nil {
				return err
			}
			from, ok, err := timeMicros(rec.Column(n+1), r)
			if err != nil || !ok {
				return fmt.Errorf("dimension %s: a version of key %s has no %s", d.decl.Name, keyText(rec, cols, r), d.from)
			}
			to, ok, err := timeMicros(rec.Column(n+2), r)
			if err != nil {
				return err
			}
			to = d.openTo(to, ok)
			k := string(buf)
			d.versions[k] = append(d.versions[k], dimInterval{from: from, to: to, sk: sk.(int64)})
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read dimension %s: %w", d.decl.Name, err)
	}
	for _, vs := range d.versions {
		slices.SortFunc(vs, func(a, b dimInterval) int { return cmp.Compare(a.from, b.from) })
	}
	return nil
}

// keyAt returns the surrogate key of the version of business key k valid at t.
func (d *factDim) keyAt(k string, t int64) (int64, bool) {
	vs := d.versions[k]
	i, _ := slices.BinarySearchFunc(vs, t, func(v dimInterval, t int64) int {
		if v.from <= t {
			return -1
		}
		return 1
	})
	// vs[i-1] is the last version starting at or before t.
	if i == 0 || t >= vs[i-1].to {
		return 0, false
	}
	return vs[i-1].sk, true
}

// changedRanges reads the dimension's change feed over (after, its version] and returns,
// per business key, the time ranges where the version valid may have changed: the
// intervals of every row the feed shows (inserted, deleted, before and after an update).
// A fact outside them keeps its key. ok is false when the feed cannot be read (off, or
// its versions cleaned up): then every fact must be looked up again.
func (d *factDim) changedRanges(ctx context.Context, after int64) (ranges map[string][]dimInterval, ok bool, err error) {
	start, end := after+1, d.snap.Version()
	if start > end {
		return map[string][]dimInterval{}, true, nil
	}
	if !d.snap.ChangeDataFeedEnabled() {
		return nil, false, nil
	}
	ch, err := d.tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &start, EndVersion: &end, Columns: append(slices.Clone(d.dimCols), d.from, d.to)})
	if err != nil {
		return nil, false, nil // e.g. versions cleaned up or the feed off for a while
	}
	defer ch.Release()
	ranges = map[string][]dimInterval{}
	n := len(d.dimCols)
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	var buf []byte
	for ch.Next() {
		rec := ch.RecordBatch()
		for r := range int(rec.NumRows()) {
			if isMemberRow(rec, cols, r) {
				continue // the unknown member: no fact with a business key falls there
			}
			if buf, err = keyed.AppendKey(buf[:0], rec, cols, r); err != nil {
				return nil, false, err
			}
			from, okf, err := timeMicros(rec.Column(n), r)
			if err != nil {
				return nil, false, err
			}
			if !okf {
				from = math.MinInt64
			}
			to, okt, err := timeMicros(rec.Column(n+1), r)
			if err != nil {
				return nil, false, err
			}
			to = d.openTo(to, okt)
			ranges[string(buf)] = append(ranges[string(buf)], dimInterval{from: from, to: to})
		}
	}
	if err := ch.Err(); err != nil {
		return nil, false, nil
	}
	return ranges, true, nil
}

// openTo is a version's valid_to as an interval's end: a NULL or the declared open end
// is open (math.MaxInt64).
func (d *factDim) openTo(to int64, ok bool) int64 {
	if !ok || d.hasEnd && to == d.end {
		return math.MaxInt64
	}
	return to
}

// inRanges reports whether t falls in one of the ranges.
func inRanges(rs []dimInterval, t int64) bool {
	for _, r := range rs {
		if r.from <= t && t < r.to {
			return true
		}
	}
	return false
}

// timeMicros reads a time value as microseconds since the epoch: a timestamp, a date
// (its midnight) or an integer (a version number, taken as is). ok is false for NULL.
func timeMicros(arr arrow.Array, i int) (int64, bool, error) {
	if arr.IsNull(i) {
		return 0, false, nil
	}
	switch a := arr.(type) {
	case *array.Timestamp:
		return keyed.Micros(int64(a.Value(i)), a.DataType().(*arrow.TimestampType).Unit), true, nil
	case *array.Date32:
		return int64(a.Value(i)) * 86_400_000_000, true, nil
	case *array.Date64:
		return int64(a.Value(i)) * 1000, true, nil
	case *array.Int64:
		return a.Value(i), true, nil
	case *array.Int32:
		return int64(a.Value(i)), true, nil
	}
	return 0, false, fmt.Errorf("column type %s is not a time (expected timestamp, date or an integer)", arr.DataType())
}
