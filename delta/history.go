package delta

import (
	"context"
	"fmt"
	"time"
)

// HistoryEntry is one version of a table's history: its commitInfo, as DESCRIBE HISTORY
// shows it.
type HistoryEntry struct {
	Version int64
	// Timestamp is the commit timestamp time travel uses: the in-commit timestamp when the
	// commit has one, else the commit file's modification time made monotonic.
	Timestamp           time.Time
	Operation           string
	OperationParameters map[string]any
	OperationMetrics    map[string]any
	ReadVersion         *int64
	IsolationLevel      string
	IsBlindAppend       *bool
	EngineInfo          string
	UserName            string
	UserMetadata        string
	TxnID               string
	// Lineage is what orchestrator recorded (nil for commits by other engines).
	Lineage *Lineage
	// CommitInfo is the raw action; nil when the commit has none.
	CommitInfo *CommitInfo
}

// History returns up to limit versions (all when limit <= 0), newest first. Versions whose
// commit files were cleaned from the log are not listed.
func (t *Table) History(ctx context.Context, limit int) ([]HistoryEntry, error) {
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("history of table %s: %w", t.displayRoot(), err)
	}
	idx := indexLog(files)
	if len(idx.commits) == 0 {
		return nil, fmt.Errorf("history of table %s: %w", t.displayRoot(), errNoLog)
	}
	mtimes := monotonicMtimes(idx.commits)
	// A version's time is its in-commit timestamp only where the table enables them (as
	// of its latest metadata); a commitInfo.inCommitTimestamp elsewhere is not the commit
	// time. A table whose snapshot cannot be loaded (an unsupported feature) uses one
	// wherever a commit has it.
	useICT := func(int64) bool { return true }
	if latest, err := t.Snapshot(ctx); err == nil {
		md := latest.Metadata()
		useICT = func(v int64) bool { return ictEnabledAt(md, v) }
	}
	n := len(idx.commits)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]HistoryEntry, 0, n)
	for i := len(idx.commits) - 1; i >= 0 && len(out) < n; i-- {
		c := idx.commits[i]
		acts, err := t.readCommit(ctx, c.version)
		if err != nil {
			return nil, fmt.Errorf("history of table %s: %w", t.displayRoot(), err)
		}
		e := HistoryEntry{Version: c.version, Timestamp: time.UnixMilli(mtimes[i])}
		if ci := findCommitInfo(acts); ci != nil {
			e.CommitInfo = ci
			if ci.InCommitTimestamp != nil && useICT(c.version) {
				e.Timestamp = time.UnixMilli(*ci.InCommitTimestamp)
			}
			e.Operation = ci.Operation
			e.OperationParameters = ci.OperationParameters
			e.OperationMetrics = ci.OperationMetrics
			e.ReadVersion = ci.ReadVersion
			e.IsolationLevel = ci.IsolationLevel
			e.IsBlindAppend = ci.IsBlindAppend
			e.EngineInfo = ci.EngineInfo
			e.UserName = ci.UserName
			e.UserMetadata = ci.UserMetadata
			e.TxnID = ci.TxnID
			e.Lineage = ci.Orchestrator
		}
		out = append(out, e)
	}
	return out, nil
}

// monotonicMtimes returns the commit files' modification times in milliseconds, each
// raised to one more than its predecessor when it is not later (Spark's
// DeltaHistoryManager does the same, since clocks and copies disturb mtimes).
func monotonicMtimes(commits []logFile) []int64 {
	out := make([]int64, len(commits))
	for i, c := range commits {
		ts := c.info.ModTime.UnixMilli()
		if i > 0 && ts <= out[i-1] {
			ts = out[i-1] + 1
		}
		out[i] = ts
	}
	return out
}
