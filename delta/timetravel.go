package delta

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
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

// VersionAsOf resolves a timestamp to a version as SnapshotAsOf does. On a table with
// in-commit timestamps it follows PROTOCOL.md: a time at or after
// delta.inCommitTimestampEnablementTimestamp is looked up among the versions from the
// enablement version on by their in-commit timestamps (a binary search, reading a few
// commits), an earlier one among the versions before it by their file times.
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
	target := ts.UnixMilli()
	ict, err := ictEnablement(latest.Metadata())
	if err != nil {
		return fail(err)
	}
	if ict == nil {
		return versionByStamps(commits, monotonicMtimes(commits), target, fail)
	}
	split := sort.Search(len(commits), func(i int) bool { return commits[i].version >= ict.version })
	before, after := commits[:split], commits[split:]
	if len(before) > 0 && (len(after) == 0 || target < ict.timestamp) {
		// Before in-commit timestamps: the versions before the enablement, by file times.
		return versionByStamps(before, monotonicMtimes(before), target, fail)
	}
	return t.versionByICT(ctx, after, target, fail)
}

// versionByStamps picks the newest commit whose stamp is at or before target.
func versionByStamps(commits []logFile, stamps []int64, target int64, fail func(error) (int64, error)) (int64, error) {
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

// versionByICT picks the newest commit whose in-commit timestamp is at or before target
// by binary search (in-commit timestamps increase with the version), reading the
// commitInfo of O(log n) commits.
func (t *Table) versionByICT(ctx context.Context, commits []logFile, target int64, fail func(error) (int64, error)) (int64, error) {
	stamp := func(i int) (int64, error) { return t.commitICT(ctx, commits[i].version) }
	first, err := stamp(0)
	if err != nil {
		return fail(err)
	}
	if target < first {
		return fail(fmt.Errorf("the timestamp is before the earliest available version %d (%s)", commits[0].version, fmtMillis(first)))
	}
	last := len(commits) - 1
	lastTS, err := stamp(last)
	if err != nil {
		return fail(err)
	}
	if target > lastTS {
		return fail(fmt.Errorf("the timestamp is after the latest version %d (%s)", commits[last].version, fmtMillis(lastTS)))
	}
	// Invariant: stamp(lo) <= target; stamp(hi+1) > target or hi == last.
	lo, hi := 0, last
	if lastTS <= target {
		lo = last
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		s, err := stamp(mid)
		if err != nil {
			return fail(err)
		}
		if s <= target {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return commits[lo].version, nil
}

// commitICT reads the in-commit timestamp of a version's commit.
func (t *Table) commitICT(ctx context.Context, version int64) (int64, error) {
	acts, err := t.readCommit(ctx, version)
	if err != nil {
		return 0, err
	}
	ci := findCommitInfo(acts)
	if ci == nil || ci.InCommitTimestamp == nil {
		return 0, fmt.Errorf("version %d has no inCommitTimestamp although the table enables them", version)
	}
	return *ci.InCommitTimestamp, nil
}

// ictStart is when a table's in-commit timestamps start: the enablement version and
// timestamp (0 and the minimum when the table was created with them).
type ictStart struct {
	version   int64
	timestamp int64
}

// ictEnablement reads the in-commit timestamp properties of md: nil when the table does
// not enable them.
func ictEnablement(md *Metadata) (*ictStart, error) {
	if md == nil || !strings.EqualFold(md.Configuration[PropEnableInCommitTimestamps], "true") {
		return nil, nil
	}
	st := &ictStart{timestamp: math.MinInt64}
	if ev, ok := md.Configuration[PropICTEnablementVersion]; ok {
		n, err := strconv.ParseInt(ev, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", PropICTEnablementVersion, ev, err)
		}
		st.version = n
		et, ok := md.Configuration[PropICTEnablementTimestamp]
		if !ok {
			return nil, fmt.Errorf("%s is set but %s is not", PropICTEnablementVersion, PropICTEnablementTimestamp)
		}
		if st.timestamp, err = strconv.ParseInt(et, 10, 64); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", PropICTEnablementTimestamp, et, err)
		}
	}
	return st, nil
}

// commitStamps returns the commit timestamp (ms) of each commit file, in order: the
// in-commit timestamp from delta.inCommitTimestampEnablementVersion on when md enables
// them (reading those commits, several at once), else the modification time made
// monotonic.
func (t *Table) commitStamps(ctx context.Context, commits []logFile, md *Metadata) ([]int64, error) {
	stamps := monotonicMtimes(commits)
	ict, err := ictEnablement(md)
	if err != nil || ict == nil {
		return stamps, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(checkpointReadParallelism)
	for i, c := range commits {
		if c.version < ict.version {
			continue
		}
		g.Go(func() error {
			ts, err := t.commitICT(gctx, c.version)
			stamps[i] = ts
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return stamps, nil
}

func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
