package jobs

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// This file is the heart of scd2_merge: pure logic that folds a batch of change events
// into the versions a type 2 dimension already holds for the same keys, following the
// rules of STAGES.md. It knows nothing of Delta or Arrow; the stage feeds it rows and
// writes what it returns.
//
// The fold treats the existing versions of a key as events too (a version start is an
// upsert at valid_from; a version that ends without a successor is a delete at valid_to)
// and replays them together with the new events in sequence order. For events after
// everything merged before that is exact. An event at or before that point (late) may
// land among events the dimension kept no trace of (a repeat of the current values, a
// delete of an absent key), so such a key is folded from its events instead: those the
// stage's event log recorded (scd_events.go, rebuilt with the stored versions' values by
// loggedEvents) and the batch's, the stored versions serving only to find what changed.
// Together that makes the result depend only on the set of events ever merged: merging
// a stream in any split and order gives the same intervals and values as merging it at
// once, which the property tests check.

// SeqMax is the valid_to of a current version (9999-12-31 00:00:00 in microseconds since
// the epoch, when sequences are timestamps).
const SeqMax int64 = 253402214400000000

// scdEvent is one change for a key.
type scdEvent struct {
	seq    int64
	delete bool
	row    []any // full data row (dimension data columns), nil for deletes
	// existing marks an event derived from a stored version; sk is that version's key.
	existing bool
	sk       int64
	// commit is the source version that carried the event (change feed sources). phys
	// marks a delete of the source row itself (a delete in the change feed), which
	// carries no sequence of its own but the deleted row's (rowSeq):
	// placePhysicalDeletes places it.
	commit int64
	phys   bool
	rowSeq int64
	// hash is a hash of the data columns (rowHash; 0 for deletes), recorded the event
	// came from the event log, whose row holds the values of the version covering it.
	hash     uint64
	recorded bool
}

// scdVersion is one row of a type 2 dimension: a key's data during [from, to).
type scdVersion struct {
	SK        int64
	From, To  int64
	Current   bool
	Row       []any // data columns, in dimension order
	Tombstone bool  // a deletion marker (deletes: tombstone): non-key columns null
	// Inferred marks a fact_load's placeholder of a key the dimension had no version of
	// (columns.inferred): no event of the key, but the row its first version fills.
	Inferred bool
	at       dimRow
}

// dimRow is where a stored version is (placed: it was read from the dimension): its
// data file and its index there, and, when the scan kept the row (for the MERGE, which
// then need not read it from the file), where it kept it: row hrow of
// scdBatch.dimRows[held-1].
type dimRow struct {
	place  keyed.Place
	placed bool
	held   int32 // 0: not kept
	hrow   int32
}

// scdSpec says which data columns are keys, tracked (a change makes a new version) and
// type 1 (overwritten in place on every version of the key).
type scdSpec struct {
	keys    []int
	tracked []int
	type1   []int
	deletes string // ignore, close or tombstone
	end     int64  // valid_to of current versions
	// endNull: current versions' valid_to is written as NULL (open_end: null; end is
	// then SeqMax inside the fold), and a NULL valid_to reads as end.
	endNull bool
	// firstFrom is the valid_from of a key's first version when hasFirstFrom
	// (first_valid_from: a timestamp); else the first version starts at its sequence.
	firstFrom    int64
	hasFirstFrom bool
	// ignoreNulls: a NULL in an upsert means "unchanged" (ignore_null_updates).
	ignoreNulls bool
	// intervals: the sequences become intervals (scd2_merge; not scd1_merge), so an
	// event's must lie between first_valid_from and the open end (checkSequence).
	intervals bool
	// seqText shows a sequence value as the sequence_by column does, for errors.
	seqText func(int64) string
	// physByCommit: deletes of source rows are placed by commit order
	// (placePhysicalDeletes), since sequences are business times (sequence_by is set).
	physByCommit bool
}

// scdChange is what the fold decided for one dimension row.
type scdChange struct {
	Kind string // insert, update, delete; or close (the quick path, scd2.go)
	Old  *scdVersion
	New  *scdVersion
	// A quick insert takes its data columns from batch event ev, not from New.Row; a
	// quick close sets Old's valid_to to New.To and leaves the rest of the row as it is.
	quick bool
	ev    int32
}

// DuplicateSequenceError reports two different events for one key at one sequence in a
// batch (rule 3): the batch cannot be ordered.
type DuplicateSequenceError struct {
	Key string
	Seq int64
	// SeqText is Seq as the sequence_by column shows it (a timestamp, a date, a number).
	SeqText string
}

func (e *DuplicateSequenceError) Error() string {
	seq := e.SeqText
	if seq == "" {
		seq = fmt.Sprint(e.Seq)
	}
	return fmt.Sprintf("key %s has two different upserts at the same sequence value %s; make sequence_by unique per key or deduplicate the source", e.Key, seq)
}

// valuesEqual is null-safe equality of two data values (a change to or from NULL is a
// change; NULL equals NULL).
func valuesEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y)
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	}
	return a == b
}

func rowsEqualAt(a, b []any, cols []int) bool {
	for _, c := range cols {
		if !valuesEqual(a[c], b[c]) {
			return false
		}
	}
	return true
}

func rowsEqual(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !valuesEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// normalizeBatch sorts one key's events by sequence and applies rule 3 to them, in
// whatever batches they came: exact duplicates are dropped; at one sequence a delete
// wins over upserts; two different upserts at one sequence are an error (seqText shows
// the sequence in it). The result does not depend on the order of evs.
func normalizeBatch(key string, evs []scdEvent, seqText func(int64) string) ([]scdEvent, error) {
	slices.SortStableFunc(evs, func(a, b scdEvent) int { return cmp.Compare(a.seq, b.seq) })
	out := evs[:0]
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].seq == evs[i].seq {
			j++
		}
		chosen, err := resolveTie(key, evs[i:j], seqText)
		if err != nil {
			return nil, err
		}
		out = append(out, chosen)
		i = j
	}
	return out, nil
}

// resolveTie picks the event that stands for a key's events at one sequence: a delete if
// there is one (one marked by the source row before one of a deleted row), else the
// upserts, which must all be equal (an event with its own values before a recorded one).
func resolveTie(key string, group []scdEvent, seqText func(int64) string) (scdEvent, error) {
	var del, up *scdEvent
	for k := range group {
		e := &group[k]
		switch {
		case e.delete:
			if del == nil || del.phys && !e.phys {
				del = e
			}
		case up == nil:
			up = e
		case !sameEvent(up, e):
			text := fmt.Sprint(e.seq)
			if seqText != nil {
				text = seqText(e.seq)
			}
			return scdEvent{}, &DuplicateSequenceError{Key: key, Seq: e.seq, SeqText: text}
		case up.recorded && !e.recorded:
			up = e
		}
	}
	if del != nil {
		return *del, nil
	}
	return *up, nil
}

// sameEvent reports whether two upserts carry the same values: by their rows, or by
// their hashes when one was rebuilt from the event log.
func sameEvent(a, b *scdEvent) bool {
	if a.recorded || b.recorded {
		return a.hash == b.hash
	}
	return rowsEqual(a.row, b.row)
}

// placePhysicalDeletes dates the deletes of source rows when sequence_by orders events
// by a business time. Such a delete carries the deleted row's values, not a time of its
// own: it stands at its commit's timestamp, but not after the key's return — an upsert
// that a later source commit carried with a sequence after the deleted rows' (the key's
// rows deleted by that commit) — it moves to the earliest such return, and vanishes when
// it lands on it (the key came back at once). A later upsert with an older sequence is
// a late event from before the delete and leaves it where it is. evs are one key's
// events, with their commit versions.
func placePhysicalDeletes(evs []scdEvent) []scdEvent {
	rowSeq := map[int64]int64{} // per commit with deletes of source rows: the newest row deleted
	for _, e := range evs {
		if e.phys {
			if r, ok := rowSeq[e.commit]; !ok || e.rowSeq > r {
				rowSeq[e.commit] = e.rowSeq
			}
		}
	}
	if len(rowSeq) == 0 {
		return evs
	}
	out := evs[:0]
	for _, d := range evs {
		if d.phys {
			back, found := int64(0), false
			for _, e := range evs {
				if !e.delete && e.commit > d.commit && e.seq > rowSeq[d.commit] && (!found || e.seq < back) {
					back, found = e.seq, true
				}
			}
			if found && back <= d.seq {
				if back == d.seq || slices.ContainsFunc(evs, func(e scdEvent) bool { return !e.delete && e.seq == back }) {
					continue
				}
				d.seq = back
			}
		}
		out = append(out, d)
	}
	return out
}

// loggedEvents rebuilds a key's logged events as fold events. A delete needs no values;
// an upsert takes the values of the stored version covering its sequence (it started
// that version or repeated its tracked values; type 1 values are the newest on every
// version), with the hash it was logged with. An upsert no stored version covers (the
// dimension was changed by another writer) is left out and counted.
func loggedEvents(spec *scdSpec, facts []eventFact, versions []scdVersion) (evs []scdEvent, lost int) {
	evs = make([]scdEvent, 0, len(facts))
	for _, f := range facts {
		e := scdEvent{seq: f.seq, delete: f.del, phys: f.phys, rowSeq: f.rowSeq, commit: f.commit, hash: f.hash, recorded: true}
		if !f.del {
			// A version whose non-key columns are all NULL reads as a tombstone, but it
			// may be an upsert of NULLs: it covers one when no other version does.
			var nulls []any
			for i := range versions {
				if v := &versions[i]; !v.Inferred && v.From <= f.seq && f.seq < v.To {
					if !v.Tombstone {
						e.row = v.Row
						break
					}
					nulls = v.Row
				}
			}
			if e.row == nil {
				e.row = nulls
			}
			if e.row == nil {
				lost++
				continue
			}
			vals, err := decodeValues([]byte(f.type1))
			if err == nil && spec.ignoreNulls && len(vals) == len(spec.type1)+1 {
				// The columns the upsert had NULL, which the version's values filled.
				mask, _ := vals[len(vals)-1].(string)
				e.row, vals = applyNullMask(spec, e.row, mask), vals[:len(vals)-1]
			}
			if err == nil && len(vals) == len(spec.type1) && len(vals) > 0 {
				e.row = slices.Clone(e.row)
				for j, c := range spec.type1 {
					e.row[c] = vals[j]
				}
			}
		}
		evs = append(evs, e)
	}
	return evs, lost
}

// type1Values encodes a row's type 1 values for the event log ("" without any).
func type1Values(spec *scdSpec, row []any) string {
	if len(spec.type1) == 0 && !spec.ignoreNulls {
		return ""
	}
	vals := make([]any, len(spec.type1))
	for j, c := range spec.type1 {
		vals[j] = row[c]
	}
	if spec.ignoreNulls {
		vals = append(vals, nullMask(row))
	}
	return string(encodeValues(vals))
}

// withoutIgnoredDeletes drops the deletes of a key's events when the spec ignores them,
// before ties are resolved: an ignored delete has no effect at all.
func withoutIgnoredDeletes(spec *scdSpec, evs []scdEvent) []scdEvent {
	if spec.deletes != "ignore" {
		return evs
	}
	return slices.DeleteFunc(evs, func(e scdEvent) bool { return e.delete })
}

// foldKey merges a key's stored versions with its new (normalized) events and returns
// the changes to apply. nextSK hands out new surrogate keys. With allEvents, events are
// every event of the key (logged and new): the stored versions only say what changed.
func foldKey(spec *scdSpec, existing []scdVersion, events []scdEvent, allEvents bool, nextSK func() int64) []scdChange {
	slices.SortFunc(existing, func(a, b scdVersion) int { return cmp.Compare(a.From, b.From) })
	// A fact_load's placeholder is no version of the key's history: the key's first
	// version (at first_valid_from, where the placeholder starts) takes its row and its
	// surrogate key (diffVersions matches them by valid_from); without one it stays.
	placeholder := func(v scdVersion) bool { return v.Inferred }
	real, placeholders := existing, slices.ContainsFunc(existing, placeholder)
	if placeholders {
		real = slices.DeleteFunc(slices.Clone(existing), placeholder)
	}
	timeline := keyTimeline(spec, real, events, allEvents)
	out, latestType1 := replayVersions(spec, timeline)
	fillVersionRows(spec, out, real, events, latestType1)
	if spec.hasFirstFrom && len(out) > 0 && startsKey(spec, real, out[0]) {
		out[0].From = spec.firstFrom
	}
	if placeholders {
		existing = slices.DeleteFunc(slices.Clone(existing), func(v scdVersion) bool {
			return v.Inferred && !slices.ContainsFunc(out, func(o *scdVersion) bool { return o.From == v.From })
		})
	}
	return diffVersions(existing, out, nextSK)
}

// keyTimeline orders a key's events by sequence, with its stored versions (sorted by
// valid_from) turned into events unless allEvents: each version is an event at its
// valid_from, and a gap after it a delete at its valid_to. At one sequence a new event
// replaces what was stored there. Ignored deletes are dropped.
func keyTimeline(spec *scdSpec, existing []scdVersion, events []scdEvent, allEvents bool) []scdEvent {
	all := make([]scdEvent, 0, 2*len(existing)+len(events))
	starts := make(map[int64]bool, len(existing))
	for _, v := range existing {
		starts[v.From] = true
	}
	afterValue := false // the previous version was a value (not a tombstone) that ended at v.From
	for _, v := range existing {
		if allEvents {
			break
		}
		// A stored version whose non-key columns are all NULL is a tombstone only right
		// after a value version it closed (a delete); first, after a gap or after another
		// tombstone it is an upsert of NULLs (a delete there would have changed nothing).
		del := v.Tombstone && afterValue
		all = append(all, scdEvent{seq: v.From, delete: del, row: v.Row, existing: true, sk: v.SK})
		if v.To != spec.end && !starts[v.To] {
			all = append(all, scdEvent{seq: v.To, delete: true, existing: true})
		}
		afterValue = !del && starts[v.To]
	}
	for _, e := range events {
		if e.delete && spec.deletes == "ignore" {
			continue
		}
		all = append(all, e)
	}
	// Order by sequence; at one sequence a new event replaces what was stored there.
	slices.SortStableFunc(all, func(a, b scdEvent) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return cmp.Compare(boolInt(!a.existing), boolInt(!b.existing))
	})
	merged := all[:0]
	for _, e := range all {
		if n := len(merged); n > 0 && merged[n-1].seq == e.seq {
			if !e.existing {
				merged[n-1] = e
			}
			continue
		}
		merged = append(merged, e)
	}
	return merged
}

// replayVersions replays a key's timeline into its versions, oldest first: a change of a
// tracked column opens a new version, a delete closes the open one (and opens a tombstone
// when the spec keeps them). The last version stays open (valid_to is spec.end). It also
// returns the newest row, whose type 1 values every version takes (nil without one).
// Tombstone rows and type 1 values are filled in by fillVersionRows.
func replayVersions(spec *scdSpec, timeline []scdEvent) (out []*scdVersion, latestType1 []any) {
	var cur *scdVersion
	latestSeq := int64(math.MinInt64)
	for _, e := range timeline {
		if spec.ignoreNulls && !e.delete {
			// NULL is "unchanged": the values of the version open before the event
			// (a stored version's event is its values already), and type 1 columns
			// the newest non-NULL value.
			latestType1 = newestType1(spec, latestType1, e.row)
			if !e.existing && cur != nil && !cur.Tombstone {
				e.row = fillNulls(spec, e.row, cur.Row)
			}
		} else if !e.delete && e.seq >= latestSeq {
			latestSeq, latestType1 = e.seq, e.row
		}
		if e.delete {
			if cur == nil || cur.Tombstone {
				continue
			}
			cur.To = e.seq
			cur = nil
			if spec.deletes == "tombstone" {
				cur = &scdVersion{From: e.seq, Tombstone: true, SK: e.sk}
				out = append(out, cur)
			}
			continue
		}
		if cur != nil && !cur.Tombstone && rowsEqualAt(cur.Row, e.row, spec.tracked) {
			continue // no tracked change: not a new version
		}
		if cur != nil {
			cur.To = e.seq
		}
		cur = &scdVersion{From: e.seq, Row: slices.Clone(e.row)}
		if e.existing {
			cur.SK = e.sk
		}
		out = append(out, cur)
	}
	if cur != nil {
		cur.To = spec.end
	}
	return out, latestType1
}

// newestType1 updates the newest non-NULL type 1 values (ignore_null_updates) with an
// upsert's row, in sequence order.
func newestType1(spec *scdSpec, latest, row []any) []any {
	if latest == nil {
		latest = make([]any, len(row))
	}
	for _, c := range spec.type1 {
		if row[c] != nil {
			latest[c] = row[c]
		}
	}
	return latest
}

// startsKey reports whether replayed version first (the earliest) is the key's first
// version, which first_valid_from starts at the constant: the key had no stored version,
// or its stored first version starts at the constant, or first starts before all of them
// (a dimension merged before the option was declared).
func startsKey(spec *scdSpec, existing []scdVersion, first *scdVersion) bool {
	if len(existing) == 0 {
		return true
	}
	return existing[0].From == spec.firstFrom || first.From < existing[0].From // (sorted by From)
}

// fillVersionRows marks the current version and fills the rows of a key's replayed
// versions: tombstones carry the key (taken from a stored version, else from an event)
// and nulls; type 1 columns take the newest values everywhere.
func fillVersionRows(spec *scdSpec, out []*scdVersion, existing []scdVersion, events []scdEvent, latestType1 []any) {
	var keyRow []any
	if len(existing) > 0 {
		keyRow = existing[0].Row
	}
	for _, e := range events {
		if keyRow != nil {
			break
		}
		keyRow = e.row
	}
	for _, v := range out {
		v.Current = v.To == spec.end
		if v.Tombstone {
			v.Row = make([]any, len(keyRow))
			for _, k := range spec.keys {
				v.Row[k] = keyRow[k]
			}
			continue
		}
		if latestType1 != nil {
			for _, c := range spec.type1 {
				v.Row[c] = latestType1[c]
			}
		}
	}
}

// diffVersions compares a key's replayed versions with its stored ones and returns the
// changes that turn one into the other: a version keeping a stored surrogate key is an
// update when anything of it differs, a new one an insert (with a key from nextSK), and a
// stored version no longer there a delete.
func diffVersions(existing []scdVersion, out []*scdVersion, nextSK func() int64) []scdChange {
	old := make(map[int64]*scdVersion, len(existing))
	for i := range existing {
		old[existing[i].SK] = &existing[i]
	}
	// A new version starting where a stored one that is not kept started replaces it in
	// place (an update of that row), so that (key, valid_from) stays a row's identity.
	byFrom := make(map[int64]int64, len(existing))
	kept := make(map[int64]bool, len(out))
	for _, v := range out {
		if v.SK != 0 {
			kept[v.SK] = true
		}
	}
	for _, e := range existing {
		if !kept[e.SK] {
			byFrom[e.From] = e.SK
		}
	}
	var changes []scdChange
	for _, v := range out {
		if sk, ok := byFrom[v.From]; ok && v.SK == 0 {
			v.SK = sk
			delete(byFrom, v.From)
		}
		if v.SK != 0 {
			if o, ok := old[v.SK]; ok {
				delete(old, v.SK)
				if o.From != v.From || o.To != v.To || o.Current != v.Current || !rowsEqual(o.Row, v.Row) {
					changes = append(changes, scdChange{Kind: "update", Old: o, New: v})
				}
				continue
			}
		}
		v.SK = nextSK()
		changes = append(changes, scdChange{Kind: "insert", New: v})
	}
	for i := range existing {
		if o, ok := old[existing[i].SK]; ok {
			changes = append(changes, scdChange{Kind: "delete", Old: o})
		}
	}
	return changes
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// keyString renders key values for error messages and map keys.
func keyString(row []any, keys []int) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		if row[k] == nil {
			parts[i] = "NULL"
		} else {
			parts[i] = fmt.Sprintf("%v", row[k])
		}
	}
	return strings.Join(parts, "|")
}
