package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Snapshot loads the latest snapshot. After the first load it only lists the log after
// the newest version it has seen and applies the new commits.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	t.mu.Lock()
	base := t.latest
	t.mu.Unlock()
	var (
		s   *Snapshot
		err error
	)
	if base != nil {
		s, err = t.refresh(ctx, base)
	}
	if s == nil && err == nil {
		s, err = t.loadLatest(ctx)
	}
	if err != nil {
		return nil, err
	}
	t.remember(s)
	return s, nil
}

// remember keeps s as the base for later refreshes when it is the newest seen.
func (t *Table) remember(s *Snapshot) {
	t.mu.Lock()
	if t.latest == nil || s.version > t.latest.version {
		t.latest = s
	}
	t.mu.Unlock()
}

// SnapshotAt loads the snapshot of a version. The version must be reconstructable: a
// checkpoint at or before it and every commit after that checkpoint up to it.
func (t *Table) SnapshotAt(ctx context.Context, version int64) (*Snapshot, error) {
	if version < 0 {
		return nil, fmt.Errorf("snapshot of table %s: negative version %d", t.displayRoot(), version)
	}
	t.mu.Lock()
	base := t.latest
	t.mu.Unlock()
	if base != nil && base.version == version {
		return base, nil
	}
	fail := func(err error) (*Snapshot, error) {
		return nil, fmt.Errorf("snapshot of table %s at version %d: %w", t.displayRoot(), version, err)
	}
	// At or after the _last_checkpoint hint, listing from the hint is enough.
	hint, _ := t.readLastCheckpoint(ctx)
	if hint != nil && hint.Version <= version {
		files, err := t.listLog(ctx, hint.Version)
		if err != nil {
			return fail(err)
		}
		s, err := t.loadFromListing(ctx, indexLog(files), version, false, hint)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errNeedFullListing) && !errors.Is(err, errNoLog) {
			return fail(err)
		}
	}
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return fail(err)
	}
	s, err := t.loadFromListing(ctx, indexLog(files), version, true, hint)
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// loadLatest loads the newest version: it lists the log from the _last_checkpoint hint,
// and falls back to a full listing when the hint is missing, stale or wrong.
func (t *Table) loadLatest(ctx context.Context) (*Snapshot, error) {
	hint, herr := t.readLastCheckpoint(ctx)
	if herr != nil && !errors.Is(herr, objectstore.ErrNotExist) {
		t.opts.Logger.Warn("delta: ignoring unreadable _last_checkpoint", "table", t.displayRoot(), "err", herr)
	}
	if hint != nil {
		files, err := t.listLog(ctx, hint.Version)
		if err != nil {
			return nil, fmt.Errorf("load table %s: %w", t.displayRoot(), err)
		}
		s, err := t.loadFromListing(ctx, indexLog(files), -1, false, hint)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errNeedFullListing) && !errors.Is(err, errNoLog) {
			return nil, fmt.Errorf("load table %s: %w", t.displayRoot(), err)
		}
		t.opts.Logger.Debug("delta: _last_checkpoint hint not usable, listing the whole log", "table", t.displayRoot(), "hint", hint.Version)
	}
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", t.displayRoot(), err)
	}
	s, err := t.loadFromListing(ctx, indexLog(files), -1, true, hint)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", t.displayRoot(), err)
	}
	return s, nil
}

// loadFromListing builds the snapshot of target (-1 = latest) from an index. A checkpoint
// that fails to load, or disagrees with the _last_checkpoint hint (nil: none) about
// itself, is skipped in favour of an older one (or a replay from version 0); when there
// is none, the error names the checkpoint and why it was refused.
func (t *Table) loadFromListing(ctx context.Context, idx *logIndex, target int64, full bool, hint *lastCheckpoint) (*Snapshot, error) {
	idx.prefer(hint)
	bad := map[*checkpointRef]bool{}
	var skipped *checkpointLoadError
	for {
		seg, err := idx.segment(target, bad, full)
		if err != nil {
			if skipped != nil && !errors.Is(err, errNeedFullListing) {
				return nil, fmt.Errorf("%w; the log cannot be replayed without the refused %v", err, skipped)
			}
			return nil, err
		}
		s, err := t.loadSegment(ctx, seg, hint)
		var cpErr *checkpointLoadError
		if errors.As(err, &cpErr) {
			t.opts.Logger.Warn("delta: skipping unreadable checkpoint", "table", t.displayRoot(), "version", cpErr.version, "err", cpErr.err)
			bad[seg.checkpoint] = true
			skipped = cpErr
			continue
		}
		return s, err
	}
}

// checkpointLoadError marks a checkpoint that could not be read.
type checkpointLoadError struct {
	version int64
	err     error
}

func (e *checkpointLoadError) Error() string {
	return fmt.Sprintf("read checkpoint %d: %v", e.version, e.err)
}
func (e *checkpointLoadError) Unwrap() error { return e.err }

// loadSegment replays a segment into a snapshot and runs the reader gate.
func (t *Table) loadSegment(ctx context.Context, seg *logSegment, hint *lastCheckpoint) (*Snapshot, error) {
	st := newTableState()
	cpVersion := int64(-1)
	if seg.checkpoint != nil {
		cd, err := t.readCheckpoint(ctx, seg.checkpoint)
		if err == nil {
			err = hint.check(seg.checkpoint, cd)
		}
		if err != nil {
			return nil, &checkpointLoadError{seg.checkpoint.version, err}
		}
		var adds []*Add
		for i := range cd.actions {
			if a := cd.actions[i].Add; a != nil {
				adds = append(adds, a)
			}
			st.apply(&cd.actions[i])
		}
		if len(adds) != len(st.files) {
			// A checkpoint holds each logical file once; a repeat means a part or sidecar
			// holds what another one does, and another file is missing.
			return nil, &checkpointLoadError{seg.checkpoint.version, fmt.Errorf("%s: %d add actions name %d distinct files", seg.checkpoint.files[0].Key, len(adds), len(st.files))}
		}
		// Checkpoints list their adds by path (ours do): then the sorted file list
		// costs no sort.
		if !sortedByKey(adds) {
			slices.SortFunc(adds, func(a, b *Add) int { return compareFileKeys(addKey(a), addKey(b)) })
		}
		st.setBase(adds)
		cpVersion = seg.checkpoint.version
	}
	var lastInfo *CommitInfo
	for _, c := range seg.commits {
		actions, err := t.readCommit(ctx, c.version)
		if err != nil {
			return nil, err
		}
		lastInfo = nil
		for i := range actions {
			if actions[i].CommitInfo != nil {
				lastInfo = actions[i].CommitInfo
			}
			st.apply(&actions[i])
		}
	}
	return t.finishSnapshot(ctx, st, seg.version, cpVersion, seg.versionFile, lastInfo)
}

// finishSnapshot validates a replayed state and wraps it as a Snapshot. info is the
// commitInfo of version when it was read; versionFile its commit file when listed.
func (t *Table) finishSnapshot(ctx context.Context, st *tableState, version, cpVersion int64, versionFile *logFile, info *CommitInfo) (*Snapshot, error) {
	if st.protocol == nil {
		return nil, fmt.Errorf("version %d has no protocol action in its log", version)
	}
	if st.metadata == nil {
		return nil, fmt.Errorf("version %d has no metaData action in its log", version)
	}
	if err := checkRead(st.protocol, st.metadata); err != nil {
		return nil, err
	}
	schema, err := st.metadata.Schema()
	if err != nil {
		return nil, fmt.Errorf("version %d: %w", version, err)
	}
	s := &Snapshot{
		table:             t,
		version:           version,
		state:             st,
		schema:            schema,
		checkpointVersion: cpVersion,
	}
	if versionFile != nil {
		s.ts = versionFile.info.ModTime
	}
	if ictEnabledAt(st.metadata, version) {
		if info == nil && versionFile != nil {
			if acts, err := t.readCommit(ctx, version); err == nil {
				info = findCommitInfo(acts)
			}
		}
		if info != nil && info.InCommitTimestamp != nil {
			s.ts = time.UnixMilli(*info.InCommitTimestamp)
		}
	}
	return s, nil
}

// refresh brings base up to the newest version by applying the commits after it. It
// returns nil, nil when that is not possible (a gap, a cleaned log), so the caller loads
// from scratch.
func (t *Table) refresh(ctx context.Context, base *Snapshot) (*Snapshot, error) {
	files, err := t.listLog(ctx, base.version+1)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", t.displayRoot(), err)
	}
	idx := indexLog(files)
	if len(idx.commits) == 0 {
		if len(idx.checkpoints) == 0 {
			return base, nil
		}
		return nil, nil
	}
	next := base.version + 1
	for _, c := range idx.commits {
		if c.version != next {
			return nil, nil
		}
		next++
	}
	if len(idx.commits) > 64 {
		// A long way behind: a checkpoint is cheaper than copying state per commit.
		return nil, nil
	}
	st := base.state.clone()
	st.setBase(base.Files())
	var lastInfo *CommitInfo
	for _, c := range idx.commits {
		actions, err := t.readCommit(ctx, c.version)
		if err != nil {
			return nil, fmt.Errorf("load table %s: %w", t.displayRoot(), err)
		}
		lastInfo = nil
		for i := range actions {
			if actions[i].CommitInfo != nil {
				lastInfo = actions[i].CommitInfo
			}
			st.apply(&actions[i])
		}
	}
	last := idx.commits[len(idx.commits)-1]
	s, err := t.finishSnapshot(ctx, st, last.version, base.checkpointVersion, &last, lastInfo)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", t.displayRoot(), err)
	}
	return s, nil
}

// findCommitInfo returns the commitInfo among actions, or nil.
func findCommitInfo(actions []Action) *CommitInfo {
	for i := range actions {
		if actions[i].CommitInfo != nil {
			return actions[i].CommitInfo
		}
	}
	return nil
}

// ictEnabledAt says whether in-commit timestamps are in force at version.
func ictEnabledAt(md *Metadata, version int64) bool {
	if md == nil || !strings.EqualFold(md.Configuration[PropEnableInCommitTimestamps], "true") {
		return false
	}
	if ev, ok := md.Configuration[PropICTEnablementVersion]; ok {
		if n, err := strconv.ParseInt(ev, 10, 64); err == nil {
			return version >= n
		}
	}
	return true
}

// numRecordsFromStats reads numRecords from an add's stats JSON.
func numRecordsFromStats(stats string) (int64, bool) {
	if stats == "" {
		return 0, false
	}
	var v struct {
		NumRecords *json.Number `json:"numRecords"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(stats)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || v.NumRecords == nil {
		return 0, false
	}
	n, err := v.NumRecords.Int64()
	return n, err == nil
}
