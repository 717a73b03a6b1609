package delta

import (
	"context"
	"fmt"
	"time"
)

// Horizons says how far back a table's versions can be read, and how far a vacuum and a
// log cleanup run now with the table's retention settings would move that, so that a
// reader of the change feed (a consumer at some version) can be told whether they would
// break it.
type Horizons struct {
	// Now is the table's clock when they were computed.
	Now time.Time
	// Latest is the current version; Earliest the oldest version whose commit is in the
	// log (older ones were cleaned up).
	Latest, Earliest int64
	// Timestamps are the commit timestamps of versions Earliest..Latest, in order.
	Timestamps []time.Time
	// DeletedFileRetention is delta.deletedFileRetentionDuration; VacuumCutoff is now
	// minus it. A vacuum now deletes the files removed before the cutoff and the change
	// data files written before it: the change feed (and time travel) survives from
	// VacuumVersion on, the first version committed at or after the cutoff (Latest+1 when
	// every version is older: then only the live files remain).
	DeletedFileRetention time.Duration
	VacuumCutoff         time.Time
	VacuumVersion        int64
	// LogRetention is delta.logRetentionDuration; LogCutoff is now minus it, at UTC
	// midnight. A log cleanup now keeps the log from LogVersion on: the newest
	// checkpoint at or before the newest commit older than the cutoff (Earliest when
	// there is none, or delta.enableExpiredLogCleanup is false).
	LogRetention time.Duration
	LogCutoff    time.Time
	LogVersion   int64
}

// Horizons computes the table's Horizons at its clock's now. It lists the log and reads
// no data file (and a commit only when in-commit timestamps are on).
func (t *Table) Horizons(ctx context.Context) (*Horizons, error) {
	h, err := t.horizons(ctx)
	if err != nil {
		return nil, fmt.Errorf("retention horizons of table %s: %w", t.displayRoot(), err)
	}
	return h, nil
}

func (t *Table) horizons(ctx context.Context) (*Horizons, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return nil, err
	}
	idx := indexLog(files)
	var commits []logFile
	for _, c := range idx.commits {
		if c.version <= snap.version {
			commits = append(commits, c)
		}
	}
	if len(commits) == 0 {
		return nil, errNoLog
	}
	stamps, err := t.commitStamps(ctx, commits, snap.Metadata())
	if err != nil {
		return nil, err
	}
	now := t.opts.Now().UTC()
	h := &Horizons{
		Now: now, Latest: snap.version, Earliest: commits[0].version,
		DeletedFileRetention: snap.DeletedFileRetention(), LogRetention: snap.LogRetention(),
	}
	h.VacuumCutoff = now.Add(-h.DeletedFileRetention)
	h.LogCutoff = now.Add(-h.LogRetention).Truncate(24 * time.Hour)
	h.VacuumVersion = h.Latest + 1
	newestExpired := int64(-1)
	for i, c := range commits {
		ts := time.UnixMilli(stamps[i]).UTC()
		h.Timestamps = append(h.Timestamps, ts)
		if !ts.Before(h.VacuumCutoff) && h.VacuumVersion > h.Latest {
			h.VacuumVersion = c.version
		}
		if stamps[i] <= h.LogCutoff.UnixMilli() {
			newestExpired = c.version
		}
	}
	h.LogVersion = h.Earliest
	if snap.ExpiredLogCleanupEnabled() {
		for _, cp := range idx.checkpoints {
			if cp.version <= newestExpired && cp.version > h.LogVersion {
				h.LogVersion = cp.version
			}
		}
	}
	return h, nil
}
