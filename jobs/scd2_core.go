package jobs

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// This file is the heart of scd2_merge: pure logic that folds a batch of change events
// into the versions a type 2 dimension already holds for the same keys, following the
// rules of STAGES.md. It knows nothing of Delta or Arrow; the stage feeds it rows and
// writes what it returns.
//
// The fold treats the existing versions of a key as events too (a version start is an
// upsert at valid_from; a version that ends without a successor is a delete at valid_to)
// and replays them together with the new events in sequence order. For events after
// everything merged before that is exact; an event at or before that point (late) is
// folded with the key's whole event history instead (historyNeeded), because the
// dimension does not keep the events that changed nothing. Together that makes the
// result independent of how a stream, in any order, was split into batches: merging it
// in any split gives the same intervals and values as merging it at once, which the
// property test checks.

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
	// commit orders events of a key's whole history at one sequence (the source
	// version that carried it); batch events need not set it.
	commit int64
}

// scdVersion is one row of a type 2 dimension: a key's data during [from, to).
type scdVersion struct {
	SK        int64
	From, To  int64
	Current   bool
	Row       []any // data columns, in dimension order
	Tombstone bool  // a deletion marker (deletes: tombstone): non-key columns null
	at        dimRow
}

// dimRow is where a stored version is: its data file and its index there, and, when
// the scan kept the row (for the MERGE, which then need not read it from the file),
// where it kept it: row hrow of scdBatch.dimRows[held-1].
type dimRow struct {
	file string // Add.Path; "" for a version not read from the dimension
	row  int64
	held int32 // 0: not kept
	hrow int32
}

// scdSpec says which data columns are keys, tracked (a change makes a new version) and
// type 1 (overwritten in place on every version of the key).
type scdSpec struct {
	keys    []int
	tracked []int
	type1   []int
	deletes string // ignore, close or tombstone
	end     int64  // valid_to of current versions
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
}

func (e *DuplicateSequenceError) Error() string {
	return fmt.Sprintf("key %s has two different changes at the same sequence value %d; make sequence_by unique per key or deduplicate the source", e.Key, e.Seq)
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

// normalizeBatch sorts one key's new events by sequence and applies rule 3: exact
// duplicates are dropped; at one sequence a delete wins over upserts; two different
// upserts at one sequence are an error.
func normalizeBatch(key string, evs []scdEvent) ([]scdEvent, error) {
	slices.SortStableFunc(evs, func(a, b scdEvent) int { return cmp.Compare(a.seq, b.seq) })
	out := evs[:0]
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].seq == evs[i].seq {
			j++
		}
		group := evs[i:j]
		chosen := group[0]
		for _, e := range group[1:] {
			switch {
			case chosen.delete:
			case e.delete:
				chosen = e
			case !rowsEqual(chosen.row, e.row):
				return nil, &DuplicateSequenceError{Key: key, Seq: e.seq}
			}
		}
		out = append(out, chosen)
		i = j
	}
	return out, nil
}

// historyNeeded reports whether a key's batch events, the earliest at sequence first,
// must be folded with the key's whole event history instead of its stored versions: an
// event at or before
// the highest sequence merged before (the watermark) may land among events the
// dimension does not keep — a repeat that changed nothing, a delete of an absent key,
// the event that set the newest type 1 values — and only the history places it exactly
// (rule 4). Events after the watermark come after everything merged, so the stored
// versions are all the fold needs.
func historyNeeded(first, watermark int64, hasWatermark bool) bool {
	return hasWatermark && first <= watermark
}

// normalizeHistory orders a key's whole event history for a refold. At one sequence
// only the events of the latest source commit count (a later commit corrects an
// earlier one, as a later batch's event replaces a stored one at its sequence); among
// those, rule 3 applies as in a batch.
func normalizeHistory(key string, evs []scdEvent) ([]scdEvent, error) {
	latest := make(map[int64]int64, len(evs))
	for _, e := range evs {
		if c, ok := latest[e.seq]; !ok || e.commit > c {
			latest[e.seq] = e.commit
		}
	}
	kept := make([]scdEvent, 0, len(evs))
	for _, e := range evs {
		if e.commit == latest[e.seq] {
			kept = append(kept, e)
		}
	}
	return normalizeBatch(key, kept)
}

// foldKey merges a key's stored versions with its new (normalized) events and returns
// the changes to apply. nextSK hands out new surrogate keys.
func foldKey(spec *scdSpec, existing []scdVersion, events []scdEvent, nextSK func() int64) []scdChange {
	slices.SortFunc(existing, func(a, b scdVersion) int { return cmp.Compare(a.From, b.From) })
	all := make([]scdEvent, 0, 2*len(existing)+len(events))
	starts := make(map[int64]bool, len(existing))
	for _, v := range existing {
		starts[v.From] = true
	}
	for _, v := range existing {
		all = append(all, scdEvent{seq: v.From, delete: v.Tombstone, row: v.Row, existing: true, sk: v.SK})
		if v.To != spec.end && !starts[v.To] {
			all = append(all, scdEvent{seq: v.To, delete: true, existing: true})
		}
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

	// Replay into intervals.
	var out []*scdVersion
	var cur *scdVersion
	var latestType1 []any
	latestSeq := int64(math.MinInt64)
	for _, e := range merged {
		if !e.delete && e.seq >= latestSeq {
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
	// Tombstones carry the key and nulls; type 1 columns take the newest values everywhere.
	var keyRow []any
	if len(existing) > 0 {
		keyRow = existing[0].Row
	} else if len(events) > 0 {
		keyRow = events[0].row
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

	// Diff against what is stored.
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
