package jobs

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// This file holds scd2_merge's options on the shape of a dimension's intervals and on
// partial change rows (STAGES.md, scd2_merge; docs/scd2-options.md):
//
//   - ignore_null_updates: a NULL in an upsert means "unchanged" for that column. The
//     event takes, for each of its NULL non-key columns, the value the key had just
//     before it in sequence order (the version open at the event's sequence); with none
//     open (the key's first event, or after a delete) the NULL stays. An event whose only
//     differences are NULLs thus makes no new version. A late event takes the values of
//     the version before it, and the versions after it are replayed from their own
//     events, so their NULLs are filled again from what now precedes them. Type 1
//     columns take, on every version, the newest non-NULL value of the key's upserts.
//     The event log records which columns an upsert had NULL (appendType1), so a late
//     event's fold rebuilds each logged event as it came.
//   - open_end: the valid_to of current versions: 9999-12-31 00:00:00 (default), NULL, or
//     a declared timestamp. The fold works with one end value (scdSpec.end) and the
//     stage writes NULL for it (scdSpec.endNull) and reads a NULL valid_to as it.
//   - first_valid_from: the valid_from of a key's first version: its sequence_by value
//     (default), or a declared timestamp. The fold places events by their own sequences
//     and then starts the key's first version at the constant; a late event before the
//     key's first event becomes the first version (from the constant) and the former
//     first version starts at its own sequence, which the event log keeps (a change
//     feed source is needed: the constant hides that sequence in the dimension).

// SCDTime is a time option of scd2_merge as written in YAML: unset, null, or text
// (a timestamp, a date, or a word the option knows).
type SCDTime struct {
	Text string // as written; "" when unset or null
	Null bool   // written as null
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *SCDTime) UnmarshalText(b []byte) error {
	t.Text, t.Null = string(b), false
	return nil
}

// UnmarshalYAMLNull records an explicit YAML null (the pipeline decoder calls it).
func (t *SCDTime) UnmarshalYAMLNull() { t.Text, t.Null = "", true }

// IsSet reports whether the option was written.
func (t SCDTime) IsSet() bool { return t.Null || t.Text != "" }

// String shows the option as written.
func (t SCDTime) String() string {
	if t.Null {
		return "null"
	}
	return t.Text
}

// FirstValidFromSequence is first_valid_from's default: the key's first sequence.
const FirstValidFromSequence = "sequence"

// openEnd returns the valid_to of current versions (microseconds) and whether it is
// written as NULL.
func (c *SCD2Config) openEnd() (end int64, null bool, err error) { return openEndOf(c.OpenEnd) }

// openEndOf reads an open_end option (see SCD2Config.openEnd).
func openEndOf(o SCDTime) (end int64, null bool, err error) {
	switch {
	case o.Null:
		return SeqMax, true, nil
	case o.Text == "":
		return SeqMax, false, nil
	}
	t, err := parseOptionTime(o.Text)
	if err != nil {
		return 0, false, err
	}
	return t.UnixMicro(), false, nil
}

// firstValidFrom returns the declared valid_from of a key's first version (ok false:
// its sequence).
func (c *SCD2Config) firstValidFrom() (from int64, ok bool, err error) {
	return firstValidFromOf(c.FirstValidFrom)
}

// firstValidFromOf reads a first_valid_from option (ok false: the key's sequence).
func firstValidFromOf(o SCDTime) (from int64, ok bool, err error) {
	if o.Null {
		return 0, false, fmt.Errorf("expected %s or a timestamp such as 1900-01-01, got null", FirstValidFromSequence)
	}
	if o.Text == "" || o.Text == FirstValidFromSequence {
		return 0, false, nil
	}
	t, err := parseOptionTime(o.Text)
	if err != nil {
		return 0, false, err
	}
	return t.UnixMicro(), true, nil
}

// parseOptionTime reads a declared time: a date (midnight UTC), a timestamp without an
// offset (UTC) or RFC 3339.
func parseOptionTime(v string) (time.Time, error) {
	for _, layout := range []string{time.DateOnly, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is no timestamp or date (expected e.g. 1900-01-01 or 9999-12-31 23:59:59)", v)
}

// validateOptions checks open_end, first_valid_from and ignore_null_updates.
func (c *SCD2Config) validateOptions() []FieldError {
	var errs []FieldError
	add := func(f, format string, a ...any) { errs = append(errs, FieldError{f, fmt.Sprintf(format, a...)}) }
	end, _, endErr := c.openEnd()
	if endErr != nil {
		add("open_end", "%v; expected null or a timestamp", endErr)
	}
	from, fromSet, fromErr := c.firstValidFrom()
	if fromErr != nil {
		add("first_valid_from", "%v", fromErr)
	}
	if endErr == nil && fromErr == nil && fromSet && from >= end {
		add("first_valid_from", "%s is not before open_end %s", c.FirstValidFrom.Text, c.OpenEnd)
	}
	if fromSet && !c.SourceChanges {
		add("first_valid_from", "a declared first valid_from needs source_changes: true: the event log keeps each key's first sequence, which the dimension no longer shows once its first version starts at %s", c.FirstValidFrom.Text)
	}
	if c.Columns.Inferred != "" && fromErr == nil && !fromSet {
		add("columns.inferred", "needs first_valid_from: <timestamp> (e.g. 1900-01-01): a fact_load's placeholder version starts there, where the key's first real version starts too, so that the merge fills the placeholder in place")
	}
	if c.IgnoreNullUpdates && !c.SourceChanges {
		add("ignore_null_updates", "needs source_changes: true: it is for change rows that carry only some columns (a snapshot's NULL is a value)")
	}
	return errs
}

// applyOptions sets the options' part of the fold's spec (the config is valid).
func (c *SCD2Config) applyOptions(spec *scdSpec) error {
	end, null, err := c.openEnd()
	if err != nil {
		return fmt.Errorf("open_end: %w", err)
	}
	spec.end, spec.endNull = end, null
	if spec.firstFrom, spec.hasFirstFrom, err = c.firstValidFrom(); err != nil {
		return fmt.Errorf("first_valid_from: %w", err)
	}
	spec.ignoreNulls, spec.intervals = c.IgnoreNullUpdates, true
	return nil
}

// checkSequence refuses an event sequence no version can start at: at or after the open
// end (the interval [seq, end) would be empty), or at or before a declared first
// valid_from.
func (s *scdSpec) checkSequence(seq int64) error {
	if !s.intervals {
		return nil
	}
	if seq >= s.end {
		return fmt.Errorf("sequence_by value %s is at or after the open end %s of current versions (open_end); no version can start there", s.showSeq(seq), s.showSeq(s.end))
	}
	if s.hasFirstFrom && seq <= s.firstFrom {
		return fmt.Errorf("sequence_by value %s is at or before first_valid_from %s; every event must come after it", s.showSeq(seq), s.showSeq(s.firstFrom))
	}
	return nil
}

func (s *scdSpec) showSeq(v int64) string {
	if s.seqText != nil {
		return s.seqText(v)
	}
	return time.UnixMicro(v).UTC().Format("2006-01-02T15:04:05.999999")
}

// openEndText shows the open end as the dimension holds it.
func (l *scdLayout) openEndText() string {
	if l.spec.endNull {
		return "NULL"
	}
	return l.spec.showSeq(l.spec.end)
}

// fillNulls gives an upsert's NULL non-key columns the values of prev (the key's row
// just before it), for ignore_null_updates. row is cloned when it changes.
func fillNulls(spec *scdSpec, row, prev []any) []any {
	if prev == nil {
		return row
	}
	cloned := false
	for j := range row {
		if row[j] != nil || prev[j] == nil || isKeyIndex(spec.keys, j) {
			continue
		}
		if !cloned {
			row, cloned = append([]any(nil), row...), true
		}
		row[j] = prev[j]
	}
	return row
}

// nullMask is the part of an upsert's logged type 1 values that says, for
// ignore_null_updates, which of its data columns were NULL: a string with '1' for each.
func nullMask(row []any) string {
	b := make([]byte, len(row))
	for j, v := range row {
		b[j] = '0'
		if v == nil {
			b[j] = '1'
		}
	}
	return string(b)
}

// applyNullMask sets the columns mask marks NULL in a copy of row.
func applyNullMask(spec *scdSpec, row []any, mask string) []any {
	if len(mask) != len(row) {
		return row
	}
	out := append([]any(nil), row...)
	for j := range out {
		if mask[j] == '1' && !isKeyIndex(spec.keys, j) {
			out[j] = nil
		}
	}
	return out
}

// appendType1Mask is appendType1 for ignore_null_updates: row i's type 1 values and
// then its null mask (nullMask).
func appendType1Mask(dst []byte, vals []any, l *scdLayout, rec arrow.RecordBatch, cols []int, i int) ([]byte, error) {
	row := make([]any, len(cols))
	for j, c := range cols {
		if rec.Column(c).IsNull(i) {
			continue
		}
		row[j] = true // (only NULL or not matters)
	}
	vals = vals[:0]
	for _, c := range l.spec.type1 {
		v, err := keyed.Value(rec.Column(cols[c]), i)
		if err != nil {
			return dst, err
		}
		vals = append(vals, v)
	}
	return appendValues(dst, append(vals, nullMask(row))), nil
}
