package jobs

import (
	"bytes"
	"cmp"
	"context"
	"slices"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// foldChanges folds a batch into the stored versions the dimension scan found for its
// keys (work) and closes the current versions of the keys a snapshot source lost
// (missing, at deleteAt): the changes to apply, in key order (the batch's keys in the
// order they came, the late ones after them, then the lost ones), and which keys were
// late (by key id).
func (s *SCD2Merge) foldChanges(ctx context.Context, batch *scdBatch, work *scdWork, missing []scdVersion, l *scdLayout, log *eventLog, dstSnap *delta.Snapshot, deleteAt *snapshotDeletes, res *Result) ([]scdChange, []bool, error) {
	// A key with an event at or before the highest sequence merged before (the
	// watermark), or before the end of one of its stored versions, is folded from its
	// logged events with the batch's (a change feed source; a snapshot source keeps no
	// log, its late events are placed by the stored versions).
	watermark, hasWatermark, _ := log.derivedWatermark(dstSnap.TxnVersion(s.watermarkID()))
	isLate := func(first int64, versions []scdVersion) bool {
		if log == nil {
			return false
		}
		if hasWatermark && first <= watermark {
			return true
		}
		for _, v := range versions {
			if v.From >= first || v.To != l.spec.end && v.To >= first {
				return true
			}
			if !hasWatermark && l.spec.hasFirstFrom && v.From == l.spec.firstFrom {
				return true // (where the key's events start, only its log tells)
			}
		}
		// A current version whose non-key columns are all NULL, right after another
		// version, is a tombstone or an upsert of NULLs (after a value, or after an upsert
		// of NULLs or a tombstone, whose stored rows look the same): a delete or a NULL
		// upsert after it does different things to each, and only the log tells them
		// apart.
		return l.spec.deletes == "tombstone" && ambiguousTombstone(versions)
	}
	late := make([]bool, work.len())
	changes, lateKeys, err := foldBatch(batch, work, &l.spec, isLate, late)
	if err != nil {
		return nil, nil, err
	}
	if lateKeys > 0 {
		lateChanges, err := s.foldLate(ctx, batch, work, l, log, late, res)
		if err != nil {
			return nil, nil, err
		}
		changes = append(changes, lateChanges...)
	}
	// The lost keys in key hash order, whatever the dimension's files (their new
	// versions, tombstones, get surrogate keys in this order).
	sortByKeyHash(missing, l.spec.keys)
	noSK := func() int64 { return 0 }
	for _, v := range missing {
		del := scdEvent{seq: deleteAt.of(v), delete: true, row: v.Row}
		changes = append(changes, foldKey(&l.spec, []scdVersion{v}, []scdEvent{del}, false, noSK)...)
	}
	return changes, late, nil
}

// sortByKeyHash orders versions by the keyHash of their keys (then by the keys).
func sortByKeyHash(vs []scdVersion, keys []int) {
	type kv struct {
		h   int64
		key []byte
		v   scdVersion
	}
	tmp := make([]kv, len(vs))
	for i, v := range vs {
		k := keyed.AppendRowKey(nil, v.Row, keys)
		tmp[i] = kv{keyed.Hash(k), k, v}
	}
	slices.SortFunc(tmp, func(a, b kv) int { return cmp.Or(cmp.Compare(a.h, b.h), bytes.Compare(a.key, b.key)) })
	for i := range tmp {
		vs[i] = tmp[i].v
	}
}

// ambiguousTombstone reports whether a key's current stored version has all non-key
// columns NULL and directly follows another version: it may be the tombstone of a delete
// or an upsert of NULLs (after a value; and after an all-NULL version, which may itself
// be either).
func ambiguousTombstone(versions []scdVersion) bool {
	var cur *scdVersion
	for i := range versions {
		if versions[i].Current {
			cur = &versions[i]
		}
	}
	if cur == nil || !cur.Tombstone {
		return false
	}
	for i := range versions {
		if v := &versions[i]; v.To == cur.From {
			return true
		}
	}
	return false
}

// snapshotDeletes is when a snapshot source's missing keys are deleted: at the snapshot's
// time (at: its newest sequence_by value, else the time its load recorded, else its
// commit time); a key whose current version starts at or after it (the snapshot cannot
// be older than what the dimension saw of the key) at the source version's commit time
// (seen), when its absence was seen.
type snapshotDeletes struct{ at, seen int64 }

// of is the time key version v (current) is closed at.
func (d *snapshotDeletes) of(v scdVersion) int64 {
	if d.at > v.From {
		return d.at
	}
	return d.seen
}
