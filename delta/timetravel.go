package delta

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// SnapshotAsOf loads the snapshot of the newest version whose commit timestamp is at or
// before ts (DELTA.md §6). The commit timestamp is the in-commit timestamp from
// delta.inCommitTimestampEnablementVersion on when the table enables them, else the
// commit file's modification time made monotonic. A ts before the earliest
// reconstructable version or after the latest version is an error.
func (t *Table) SnapshotAsOf(ctx context.Context, ts time.Time) (*Snapshot, error) {
	v, err := t.VersionAsOf(ctx, ts)
	if err != nil {
		return nil, err
	}
	return t.SnapshotAt(ctx, v)
}

// VersionAsOf resolves a timestamp to a version as SnapshotAsOf does.
func (t *Table) VersionAsOf(ctx context.Context, ts time.Time) (int64, error) {
	fail := func(err error) (int64, error) {
		return -1, fmt.Errorf("time travel on table %s to %s: %w", t.displayRoot(), ts.UTC().Format(time.RFC3339Nano), err)
	}
	latest, err := t.Snapshot(ctx)
	if err != nil {
		return fail(err)
	}
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return fail(err)
	}
	idx := indexLog(files)
	earliest := idx.earliestVersion()
	var commits []logFile
	for _, c := range idx.commits {
		if c.version >= earliest && c.version <= latest.version {
			commits = append(commits, c)
		}
	}
	if len(commits) == 0 {
		return fail(fmt.Errorf("no commit files in the log"))
	}
	stamps, err := t.commitStamps(ctx, commits, latest.Metadata())
	if err != nil {
		return fail(err)
	}
	target := ts.UnixMilli()
	if target < stamps[0] {
		return fail(fmt.Errorf("the timestamp is before the earliest available version %d (%s)", commits[0].version, fmtMillis(stamps[0])))
	}
	last := len(commits) - 1
	if target > stamps[last] {
		return fail(fmt.Errorf("the timestamp is after the latest version %d (%s)", commits[last].version, fmtMillis(stamps[last])))
	}
	for i := last; i >= 0; i-- {
		if stamps[i] <= target {
			return commits[i].version, nil
		}
	}
	return fail(fmt.Errorf("no version at or before the timestamp"))
}

// commitStamps returns the commit timestamp (ms) of each commit file, in order: the
// in-commit timestamp from delta.inCommitTimestampEnablementVersion on when md enables
// them (reading those commits), else the modification time made monotonic.
func (t *Table) commitStamps(ctx context.Context, commits []logFile, md *Metadata) ([]int64, error) {
	stamps := monotonicMtimes(commits)
	if md == nil || md.Configuration[PropEnableInCommitTimestamps] != "true" {
		return stamps, nil
	}
	enable := int64(0)
	if ev, ok := md.Configuration["delta.inCommitTimestampEnablementVersion"]; ok {
		if n, err := strconv.ParseInt(ev, 10, 64); err == nil {
			enable = n
		}
	}
	for i, c := range commits {
		if c.version < enable {
			continue
		}
		acts, err := t.readCommit(ctx, c.version)
		if err != nil {
			return nil, err
		}
		ci := findCommitInfo(acts)
		if ci == nil || ci.InCommitTimestamp == nil {
			return nil, fmt.Errorf("version %d has no inCommitTimestamp although the table enables them", c.version)
		}
		stamps[i] = *ci.InCommitTimestamp
	}
	return stamps, nil
}

func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
