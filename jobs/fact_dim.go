package jobs

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// factDim is one lookup's dimension as one version of it shows it: its business keys in
// a key index, and per key its versions' intervals [from, to) in microseconds (to
// math.MaxInt64 when open) and surrogate keys, in columns sorted by key id and from.
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
	keys            *keyindex.Index
	// Key id k's versions are rows first[k]..first[k+1] of vFrom, vTo and vSK.
	first           []int32
	vFrom, vTo, vSK []int64
	// With missing: inferred, inferred is the dimension's columns.inferred and
	// firstFrom its first_valid_from (where a placeholder starts); placeholders holds
	// the surrogate keys of its placeholder versions (flagged true).
	inferred     string
	firstFrom    int64
	placeholders map[int64]bool
	// loaded is the snapshot whose every version load read last (nil: none).
	loaded *delta.Snapshot
	// moved are, per business key with changed ranges (changedRanges), the versions the
	// feed shows as they are now: every version valid at a changed time (loadMoved).
	moved map[string][]movedVersion
	// before are the surrogate keys of the versions of those business keys before the
	// feed (changedRanges): a fact in a changed range was keyed to one of them, or to the
	// unknown key (no version was valid at its time), as the versions of a key do not
	// overlap.
	before []int64
}

// movedVersion is a version as the change feed shows it now.
type movedVersion struct {
	iv          dimInterval
	fromOK      bool
	sk          int64
	placeholder bool
}

// dimInterval is a time range [from, to) of a business key.
type dimInterval struct {
	from, to int64
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
	need := append(slices.Clone(d.dimCols), d.sk, d.from, d.to)
	if l.Missing == MissingInferred {
		d.inferred = cols.Inferred
		var ok bool
		if d.firstFrom, ok, err = firstValidFromOf(l.firstFrom); err != nil || !ok || d.inferred == "" {
			return nil, fmt.Errorf("dimension %s: missing: inferred needs its scd2_merge's columns.inferred and first_valid_from: <timestamp>", d.decl.Name)
		}
		need = append(need, d.inferred)
	}
	for _, c := range need {
		if schema.Field(c) == nil {
			return nil, fmt.Errorf("dimension %s has no column %s", d.decl.Name, c)
		}
	}
	return d, nil
}

// versionInterval reads the interval of row r of a dimension version: its valid_from
// and valid_to columns. It is the one place that reads them: from is ok false when
// valid_from is NULL; a NULL valid_to is an open end (math.MaxInt64), as is the
// sentinel the SCD2 merge writes (a time after every fact's), and the dimension's
// declared open_end.
func (d *factDim) versionInterval(fromCol, toCol arrow.Array, r int) (from int64, fromOK bool, to int64, err error) {
	if from, fromOK, err = timeMicros(fromCol, r); err != nil {
		return 0, false, 0, err
	}
	to, ok, err := timeMicros(toCol, r)
	if err != nil {
		return 0, false, 0, err
	}
	return from, fromOK, d.openTo(to, ok), nil
}

// openTo is a valid_to read as microseconds (ok false: NULL), math.MaxInt64 when open.
func (d *factDim) openTo(to int64, ok bool) int64 {
	if !ok || d.hasEnd && to == d.end {
		return math.MaxInt64
	}
	return to
}

// versionIntervals reads the intervals of a batch's n versions as versionInterval does.
func (d *factDim) versionIntervals(iv *dimIntervals, fromCol, toCol arrow.Array, n int) error {
	var err error
	if iv.from, iv.fromOK, err = fillTimes(iv.from, iv.fromOK, fromCol, n); err != nil {
		return err
	}
	if iv.to, iv.toOK, err = fillTimes(iv.to, iv.toOK, toCol, n); err != nil {
		return err
	}
	for r := range n {
		iv.to[r] = d.openTo(iv.to[r], iv.toOK[r])
	}
	return nil
}

// dimIntervals are a batch's intervals (versionIntervals), buffers reused batch after
// batch.
type dimIntervals struct {
	from, to     []int64
	fromOK, toOK []bool
}

// load reads the dimension's versions (its keys and intervals only), a batch at a time:
// the keys go into the index, the intervals into columns sorted by key id and from.
// With only set, it may read just the versions of those business keys (a scan filter
// on a one-column key; it reads every version otherwise). With need set, it keeps just
// the versions of need's keys, need being the index (a key without any has no version).
func (d *factDim) load(ctx context.Context, only map[string][]dimInterval, need *keyindex.Index) error {
	if only == nil && need == nil && d.loaded == d.snap {
		return nil // (inferMembers read it, and added nothing since)
	}
	d.loaded = nil
	opts := delta.ScanOptions{Columns: append(slices.Clone(d.dimCols), d.sk, d.from, d.to)}
	var flags *array.Boolean
	if d.inferred != "" {
		opts.Columns = append(opts.Columns, d.inferred)
		d.placeholders = map[int64]bool{}
	}
	if only != nil && len(d.dimCols) == 1 {
		opts.Filter = keysFilter(d.dimCols[0], only)
	}
	sc, err := d.snap.Scan(ctx, opts)
	if err != nil {
		return fmt.Errorf("read dimension %s: %w", d.decl.Name, err)
	}
	defer sc.Release()
	capacity := 1024
	if n, ok := d.snap.NumRecords(); ok {
		capacity = int(n)
	}
	switch {
	case opts.Filter != nil:
		capacity = min(capacity, 4*len(only)) // a few versions per key
	case need != nil:
		capacity = min(capacity, 4*need.Len()+16)
	}
	d.keys = need
	if need == nil {
		d.keys = keyindex.New(capacity / 2)
	}
	n := len(d.dimCols)
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	// The versions in scan order, with their key ids; sorted by key id below.
	ids := make([]int32, 0, capacity)
	from, to, sks := make([]int64, 0, capacity), make([]int64, 0, capacity), make([]int64, 0, capacity)
	var block keyindex.Block
	var iv dimIntervals
	for sc.Next() {
		rec := sc.RecordBatch()
		block.Reset()
		if err := keyed.AppendKeys(&block, rec, cols, 0, int(rec.NumRows())); err != nil {
			return fmt.Errorf("dimension %s: %w", d.decl.Name, err)
		}
		if need != nil {
			need.LookupBlock(&block)
		} else {
			d.keys.AddBlock(&block)
		}
		skCol, ok := rec.Column(n).(*array.Int64)
		if !ok {
			return fmt.Errorf("dimension %s: column %s is %s; expected bigint", d.decl.Name, d.sk, rec.Column(n).DataType())
		}
		if d.inferred != "" {
			if flags, ok = rec.Column(n + 3).(*array.Boolean); !ok {
				return fmt.Errorf("dimension %s: column %s is %s; expected boolean", d.decl.Name, d.inferred, rec.Column(n+3).DataType())
			}
		}
		if err := d.versionIntervals(&iv, rec.Column(n+1), rec.Column(n+2), int(rec.NumRows())); err != nil {
			return fmt.Errorf("dimension %s: %w", d.decl.Name, err)
		}
		noKey := skCol.NullN() > 0
		for r := range int(rec.NumRows()) {
			if noKey && skCol.IsNull(r) || block.IDs[r] < 0 {
				continue // not a version facts can have (a tombstone without a key), or not needed
			}
			if !iv.fromOK[r] {
				return fmt.Errorf("dimension %s: a version of key %s has no %s", d.decl.Name, keyText(rec, cols, r), d.from)
			}
			ids = append(ids, block.IDs[r])
			from, to, sks = append(from, iv.from[r]), append(to, iv.to[r]), append(sks, skCol.Value(r))
			if flags != nil && !flags.IsNull(r) && flags.Value(r) {
				d.placeholders[skCol.Value(r)] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read dimension %s: %w", d.decl.Name, err)
	}
	d.index(ids, from, to, sks)
	if only == nil && need == nil {
		d.loaded = d.snap
	}
	return nil
}

// loadMoved makes the versions changedRanges found moved the versions looked up: a
// run that only re-keys looks up only times in the changed ranges, and in a dimension
// whose versions of a key do not overlap (as scd2_merge writes it) the version valid
// at such a time, if any, is one the feed shows (a version it does not show covers the
// same times as before, where no shown one could, before or now). So the dimension is
// not read.
func (d *factDim) loadMoved() error {
	d.loaded = nil
	d.keys = keyindex.New(len(d.moved))
	if d.inferred != "" {
		d.placeholders = map[int64]bool{}
	}
	var ids []int32
	var from, to, sks []int64
	for k, vs := range d.moved {
		id, _ := d.keys.Add([]byte(k))
		for _, v := range vs {
			if !v.fromOK {
				text := k
				if val, ok := decodeKeyValue(k); ok {
					text = fmt.Sprint(val)
				}
				return fmt.Errorf("dimension %s: a version of key %s has no %s", d.decl.Name, text, d.from)
			}
			ids = append(ids, id)
			from, to, sks = append(from, v.iv.from), append(to, v.iv.to), append(sks, v.sk)
			if v.placeholder {
				d.placeholders[v.sk] = true
			}
		}
	}
	d.index(ids, from, to, sks)
	return nil
}

// index makes the versions (each with its key id, interval and surrogate key) the
// versions looked up, by key id and within a key by from.
func (d *factDim) index(ids []int32, from, to, sks []int64) {
	// A counting sort by key id, then each key's few versions by from.
	d.first = make([]int32, d.keys.Len()+1)
	for _, id := range ids {
		d.first[id+1]++
	}
	for k := 1; k < len(d.first); k++ {
		d.first[k] += d.first[k-1]
	}
	// ids[j] becomes where version j goes; the versions are then moved there in place
	// (each swap puts one where it belongs), not copied: the dimension's versions are
	// most of what a fact_load holds.
	next := slices.Clone(d.first[:len(d.first)-1])
	for j, id := range ids {
		ids[j] = next[id]
		next[id]++
	}
	for j := range ids {
		for p := ids[j]; p != int32(j); p = ids[j] {
			from[j], from[p] = from[p], from[j]
			to[j], to[p] = to[p], to[j]
			sks[j], sks[p] = sks[p], sks[j]
			ids[j], ids[p] = ids[p], p
		}
	}
	d.vFrom, d.vTo, d.vSK = from, to, sks
	for k := range d.keys.Len() {
		lo, hi := int(d.first[k]), int(d.first[k+1])
		for i := lo + 1; i < hi; i++ { // insertion sort: a key has a few versions
			for j := i; j > lo && d.vFrom[j] < d.vFrom[j-1]; j-- {
				d.vFrom[j], d.vFrom[j-1] = d.vFrom[j-1], d.vFrom[j]
				d.vTo[j], d.vTo[j-1] = d.vTo[j-1], d.vTo[j]
				d.vSK[j], d.vSK[j-1] = d.vSK[j-1], d.vSK[j]
			}
		}
	}
}

// isPlaceholder reports whether surrogate key sk is an inferred member's placeholder.
func (d *factDim) isPlaceholder(sk int64) bool { return d.placeholders[sk] }

// keyAt returns the surrogate key of the version of key id valid at t.
func (d *factDim) keyAt(id int32, t int64) (int64, bool) {
	lo, hi := int(d.first[id]), int(d.first[id+1])
	// The first version starting after t; the one before it is the last starting at or
	// before t.
	i, j := lo, hi
	for i < j {
		m := int(uint(i+j) >> 1)
		if d.vFrom[m] <= t {
			i = m + 1
		} else {
			j = m
		}
	}
	if i == lo || t >= d.vTo[i-1] {
		return 0, false
	}
	return d.vSK[i-1], true
}

// keyOf returns the surrogate key of the version of encoded business key k valid at t.
func (d *factDim) keyOf(k []byte, t int64) (int64, bool) {
	id, ok := d.keys.Lookup(k)
	if !ok {
		return 0, false
	}
	return d.keyAt(id, t)
}

// changedRanges reads the dimension's change feed over (after, its version] and returns,
// per business key, the time ranges where the version valid changed: where the
// surrogate keys the versions the feed shows covered before it (their first change's
// old state) differ from those they cover after it (their last change's new state).
// Versions the feed does not show cover the same times before and after, so a fact
// outside the ranges keeps its key (a change of a version's other columns, as the fill
// of an inferred member, moves no fact). ok is false when the feed cannot be read (off,
// or its versions cleaned up): then every fact must be looked up again.
func (d *factDim) changedRanges(ctx context.Context, after int64) (ranges map[string][]dimInterval, ok bool, err error) {
	start, end := after+1, d.snap.Version()
	if start > end {
		return map[string][]dimInterval{}, true, nil
	}
	if !d.snap.ChangeDataFeedEnabled() {
		return nil, false, nil
	}
	columns := append(slices.Clone(d.dimCols), d.from, d.to, d.sk)
	if d.inferred != "" {
		columns = append(columns, d.inferred)
	}
	ch, err := d.tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &start, EndVersion: &end, Columns: columns})
	if err != nil {
		return nil, false, nil // e.g. versions cleaned up or the feed off for a while
	}
	defer ch.Release()
	n := len(d.dimCols)
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	// Per business key, per surrogate key: its state before the feed and after it.
	type change struct {
		version int64
		order   int // within a version: delete, preimage, postimage, insert
		v       movedVersion
		exists  bool // the version exists in this state
	}
	type states struct{ old, new change }
	keys := map[string]map[int64]*states{}
	var buf []byte
	for ch.Next() {
		rec := ch.RecordBatch()
		skCol, ok := rec.Column(n + 2).(*array.Int64)
		if !ok {
			return nil, false, fmt.Errorf("dimension %s: column %s is %s; expected bigint", d.decl.Name, d.sk, rec.Column(n+2).DataType())
		}
		var flags *array.Boolean
		extra := n + 3
		if d.inferred != "" {
			if flags, ok = rec.Column(extra).(*array.Boolean); !ok {
				return nil, false, fmt.Errorf("dimension %s: column %s is %s; expected boolean", d.decl.Name, d.inferred, rec.Column(extra).DataType())
			}
			extra++
		}
		typCol, verCol := rec.Column(extra).(*array.String), rec.Column(extra+1).(*array.Int64)
		for r := range int(rec.NumRows()) {
			if isMemberRow(rec, cols, r) {
				continue // the unknown member: no fact with a business key falls there
			}
			if skCol.IsNull(r) {
				continue // not a version facts can have (a tombstone without a key), as for load
			}
			if buf, err = keyed.AppendKey(buf[:0], rec, cols, r); err != nil {
				return nil, false, err
			}
			from, okf, to, err := d.versionInterval(rec.Column(n), rec.Column(n+1), r)
			if err != nil {
				return nil, false, err
			}
			if !okf {
				from = math.MinInt64
			}
			sk := skCol.Value(r)
			c := change{version: verCol.Value(r), v: movedVersion{iv: dimInterval{from: from, to: to}, fromOK: okf, sk: sk,
				placeholder: flags != nil && flags.IsValid(r) && flags.Value(r)}}
			// The state a change row shows: before the change (a delete's, a preimage's)
			// or after it (an insert's, a postimage's).
			var before bool
			switch typCol.Value(r) {
			case "delete":
				c.order, before = 0, true
			case "update_preimage":
				c.order, before = 1, true
			case "update_postimage":
				c.order = 2
			default: // insert
				c.order = 3
			}
			byKey := keys[string(buf)]
			if byKey == nil {
				byKey = map[int64]*states{}
				keys[string(buf)] = byKey
			}
			// Old state: from the earliest change (a version first inserted did not
			// exist); new state: from the latest (one last deleted does not exist).
			old, now := c, c
			old.exists, now.exists = before, !before
			st := byKey[sk]
			if st == nil {
				byKey[sk] = &states{old: old, new: now}
				continue
			}
			if c.version < st.old.version || c.version == st.old.version && c.order < st.old.order {
				st.old = old
			}
			if c.version > st.new.version || c.version == st.new.version && c.order > st.new.order {
				st.new = now
			}
		}
	}
	if err := ch.Err(); err != nil {
		return nil, false, nil
	}
	ranges, d.moved, d.before = map[string][]dimInterval{}, map[string][]movedVersion{}, nil
	for k, byKey := range keys {
		var old, now []skInterval
		var vs []movedVersion
		for sk, st := range byKey {
			if st.old.exists {
				old = append(old, skInterval{st.old.v.iv, sk})
			}
			if st.new.exists {
				now = append(now, skInterval{st.new.v.iv, sk})
				vs = append(vs, st.new.v)
			}
		}
		if rs := coverageChanges(old, now); len(rs) > 0 {
			ranges[k], d.moved[k] = rs, vs
			for _, v := range old {
				d.before = append(d.before, v.sk)
			}
		}
	}
	return ranges, true, nil
}

// skInterval is a version's interval and surrogate key.
type skInterval struct {
	iv dimInterval
	sk int64
}

// coverageChanges returns the ranges where the surrogate keys covering a time differ
// between two sets of versions, in order, adjacent ones joined.
func coverageChanges(old, now []skInterval) []dimInterval {
	var bounds []int64
	for _, v := range append(slices.Clone(old), now...) {
		bounds = append(bounds, v.iv.from, v.iv.to)
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	covering := func(vs []skInterval, from, to int64) []int64 {
		var sks []int64
		for _, v := range vs {
			if v.iv.from <= from && to <= v.iv.to {
				sks = append(sks, v.sk)
			}
		}
		slices.Sort(sks)
		return sks
	}
	var out []dimInterval
	for i := 0; i+1 < len(bounds); i++ {
		lo, hi := bounds[i], bounds[i+1]
		if slices.Equal(covering(old, lo, hi), covering(now, lo, hi)) {
			continue
		}
		if len(out) > 0 && out[len(out)-1].to == lo {
			out[len(out)-1].to = hi
		} else {
			out = append(out, dimInterval{from: lo, to: hi})
		}
	}
	return out
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
