package delta

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CleanupResult reports what CleanupLog did.
type CleanupResult struct {
	// Cutoff is now − delta.logRetentionDuration truncated to UTC midnight.
	Cutoff time.Time
	// CheckpointVersion is the checkpoint kept as the new start of the log (-1 when
	// nothing was eligible).
	CheckpointVersion int64
	// FilesDeleted are the deleted log files, relative to _delta_log, sorted, then the
	// deleted sidecar files (_sidecars/<name>).
	FilesDeleted []string
	// Skipped says why nothing was done, when that is the case.
	Skipped string
}

// CleanupLog removes expired log files (DELTA.md §7): with cutoff = (now −
// delta.logRetentionDuration) truncated to UTC midnight, it takes the newest checkpoint
// at or before the newest commit whose timestamp is at or before the cutoff, and deletes
// every commit, checkpoint, .crc and compacted file of older versions. That checkpoint
// and its commit file stay, so every version from it on can still be read, and time
// travel to an older one fails naming it as the earliest available version. Nothing is
// done when delta.enableExpiredLogCleanup is false, or when no such checkpoint exists.
// Commits call it after writing a checkpoint; the clock is Options.Now.
func (t *Table) CleanupLog(ctx context.Context) (*CleanupResult, error) {
	return t.CleanupLogWith(ctx, CleanupOptions{})
}

// CleanupOptions tune CleanupLogWith.
type CleanupOptions struct {
	// KeepVersionsFrom, when not nil, keeps the commit files of that version and later
	// whatever their age (the kept checkpoint is at or before it), for a consumer that
	// still reads the change feed from there.
	KeepVersionsFrom *int64
}

// CleanupLogWith is CleanupLog with options.
func (t *Table) CleanupLogWith(ctx context.Context, opts CleanupOptions) (*CleanupResult, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("clean up log of table %s: %w", t.displayRoot(), err)
	}
	limit := int64(-1)
	if opts.KeepVersionsFrom != nil {
		limit = max(*opts.KeepVersionsFrom, 0)
	}
	res, err := t.cleanupLog(ctx, snap, limit)
	if err != nil {
		return nil, fmt.Errorf("clean up log of table %s: %w", t.displayRoot(), err)
	}
	return res, nil
}

// cleanupAfterCheckpoint is the commit path's hook: it runs log cleanup after a
// checkpoint of snap was written and logs, never returns, a failure.
func (t *Table) cleanupAfterCheckpoint(ctx context.Context, snap *Snapshot) {
	res, err := t.cleanupLog(ctx, snap, -1)
	if err != nil {
		t.opts.Logger.Warn("delta: log cleanup failed (the commit and checkpoint stand)", "table", t.displayRoot(), "version", snap.version, "err", err)
		return
	}
	if len(res.FilesDeleted) > 0 {
		t.opts.Logger.Debug("delta: cleaned up expired log files", "table", t.displayRoot(), "files", len(res.FilesDeleted), "earliest", res.CheckpointVersion)
	}
}

// cleanupLog does the work; keepFrom >= 0 caps the kept checkpoint at that version.
func (t *Table) cleanupLog(ctx context.Context, snap *Snapshot, keepFrom int64) (*CleanupResult, error) {
	res := &CleanupResult{CheckpointVersion: -1}
	keep, err := t.cleanupCheckpoint(ctx, snap, keepFrom, res)
	if err != nil {
		return nil, err
	}
	if res.Skipped != "" {
		return res, nil
	}
	res.CheckpointVersion = keep
	if err := t.deleteLogBefore(ctx, keep, res); err != nil {
		return nil, err
	}
	if err := t.deleteUnusedSidecars(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

// cleanupCheckpoint finds the checkpoint log cleanup keeps: the newest at or before the
// newest commit older than the cutoff (which it sets in res), and before keepFrom when
// that is >= 0. When there is none, res.Skipped says why.
func (t *Table) cleanupCheckpoint(ctx context.Context, snap *Snapshot, keepFrom int64, res *CleanupResult) (int64, error) {
	if !snap.ExpiredLogCleanupEnabled() {
		res.Skipped = PropEnableExpiredLogCleanup + " is false"
		return -1, nil
	}
	now := t.opts.Now().UTC()
	res.Cutoff = now.Add(-snap.LogRetention()).Truncate(24 * time.Hour)
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return -1, err
	}
	idx := indexLog(files)
	var commits []logFile
	for _, c := range idx.commits {
		if c.version <= snap.version {
			commits = append(commits, c)
		}
	}
	if len(commits) == 0 {
		res.Skipped = "no commit files"
		return -1, nil
	}
	stamps, err := t.commitStamps(ctx, commits, snap.Metadata())
	if err != nil {
		return -1, err
	}
	newestExpired := int64(-1)
	cut := res.Cutoff.UnixMilli()
	for i, c := range commits {
		if stamps[i] <= cut {
			newestExpired = c.version
		}
	}
	if keepFrom >= 0 && newestExpired > keepFrom {
		newestExpired = keepFrom
	}
	if newestExpired < 0 {
		res.Skipped = "no commit is older than the cutoff"
		return -1, nil
	}
	keep := int64(-1)
	for _, cp := range idx.checkpoints {
		if cp.version <= newestExpired && cp.version > keep {
			keep = cp.version
		}
	}
	if keep <= 0 {
		res.Skipped = "no checkpoint at or before the newest expired commit"
		return -1, nil
	}
	return keep, nil
}

// deleteLogBefore deletes the log files of versions before checkpoint keep, oldest
// first, once that checkpoint loads, and lists them in res.
func (t *Table) deleteLogBefore(ctx context.Context, keep int64, res *CleanupResult) error {
	prefix := t.logPrefix()
	infos, err := t.store.List(ctx, prefix, "")
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	var doomed []string
	for _, info := range infos {
		name := strings.TrimPrefix(info.Key, prefix)
		if v, ok := logFileVersion(name); ok && v < keep {
			doomed = append(doomed, name)
		}
	}
	if len(doomed) == 0 {
		return nil
	}
	sort.Strings(doomed)
	// The kept checkpoint becomes the only way into the older part of the log: make sure
	// it loads before deleting what it replaces (a bad one is skipped for an older one).
	if s, err := t.SnapshotAt(ctx, keep); err != nil || s.CheckpointVersion() != keep {
		if err == nil {
			err = fmt.Errorf("it does not load (the snapshot came from checkpoint %d)", s.CheckpointVersion())
		}
		return fmt.Errorf("checkpoint %d cannot replace the log before it: %w", keep, err)
	}
	// Oldest first: a crash midway leaves a log that still starts at a readable point.
	for _, name := range doomed {
		if err := t.store.Delete(ctx, prefix+name); err != nil {
			return fmt.Errorf("delete %s: %w", name, err)
		}
		res.FilesDeleted = append(res.FilesDeleted, name)
	}
	return nil
}

// logFileVersion returns the version a _delta_log file belongs to, for the files log
// cleanup may delete: N.json, N.crc, N.checkpoint*.parquet|json and
// M.N.compacted.json (version N, the end of the compacted range). Anything else
// (_last_checkpoint, subdirectories, temp files) gives ok false.
func logFileVersion(name string) (int64, bool) {
	if strings.Contains(name, "/") || len(name) < 21 || name[20] != '.' {
		return 0, false
	}
	v, err := strconv.ParseUint(name[:20], 10, 63)
	if err != nil {
		return 0, false
	}
	rest := name[21:]
	switch {
	case rest == "json", rest == "crc":
		return int64(v), true
	case strings.HasPrefix(rest, "checkpoint.") && (strings.HasSuffix(rest, ".parquet") || strings.HasSuffix(rest, ".json")):
		return int64(v), true
	case strings.HasSuffix(rest, ".compacted.json") && len(rest) == 20+len(".compacted.json"):
		end, err := strconv.ParseUint(rest[:20], 10, 63)
		if err != nil {
			return 0, false
		}
		return int64(end), true
	}
	return 0, false
}
