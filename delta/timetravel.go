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
	stamps := monotonicMtimes(commits)
	if md := latest.Metadata(); md.Configuration[PropEnableInCommitTimestamps] == "true" {
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
				return fail(err)
			}
			ci := findCommitInfo(acts)
			if ci == nil || ci.InCommitTimestamp == nil {
				return fail(fmt.Errorf("version %d has no inCommitTimestamp although the table enables them", c.version))
			}
			stamps[i] = *ci.InCommitTimestamp
		}
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

func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
