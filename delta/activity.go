package delta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// DataChange is the newest commit of a table that changed its data: Version and its
// commit Timestamp (the in-commit timestamp when the commit has one, else the commit
// file's modification time made monotonic, as History and time travel read it).
type DataChange struct {
	Version   int64
	Timestamp time.Time
	// Latest is the table's latest version (Version, or later commits that changed no
	// data: vacuum, OPTIMIZE, property changes).
	Latest int64
	// Found is false when no commit still in the log changed data (a table only
	// created, or whose data commits were cleaned from the log: then Version and
	// Timestamp are its oldest listed commit's, the newest data change known to be no
	// later than that).
	Found bool
}

// LastDataChange finds the newest commit of the table at root that added or removed
// data (an add, remove or cdc action with dataChange true), reading commits newest
// first without loading a snapshot: the freshness of a table. It reads only the log
// listing and the commit files after the last data change, usually one. A root without
// a log is an error wrapping objectstore.ErrNotExist.
func LastDataChange(ctx context.Context, store objectstore.Store, root string) (DataChange, error) {
	t, err := newTable(store, root, Options{})
	if err != nil {
		return DataChange{}, err
	}
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return DataChange{}, fmt.Errorf("last data change of table %s: %w", t.displayRoot(), err)
	}
	idx := indexLog(files)
	if len(idx.commits) == 0 {
		return DataChange{}, fmt.Errorf("last data change of table %s: %w", t.displayRoot(), errors.Join(errNoLog, objectstore.ErrNotExist))
	}
	mtimes := monotonicMtimes(idx.commits)
	dc := DataChange{Latest: idx.commits[len(idx.commits)-1].version}
	for i := len(idx.commits) - 1; i >= 0; i-- {
		c := idx.commits[i]
		acts, err := t.readCommit(ctx, c.version)
		if err != nil {
			return DataChange{}, fmt.Errorf("last data change of table %s: %w", t.displayRoot(), err)
		}
		dc.Version, dc.Timestamp = c.version, time.UnixMilli(mtimes[i]).UTC()
		if ci := findCommitInfo(acts); ci != nil && ci.InCommitTimestamp != nil {
			dc.Timestamp = time.UnixMilli(*ci.InCommitTimestamp).UTC()
		}
		if changesData(acts) {
			dc.Found = true
			return dc, nil
		}
	}
	return dc, nil
}

func changesData(acts []Action) bool {
	for _, a := range acts {
		switch {
		case a.Add != nil && a.Add.DataChange, a.Remove != nil && a.Remove.DataChange, a.CDC != nil && a.CDC.DataChange:
			return true
		}
	}
	return false
}

// CommitStats is what one commit added: data files, their bytes and rows (RowsKnown
// false when a file added has no numRecords statistic).
type CommitStats struct {
	Files, Bytes, Rows int64
	RowsKnown          bool
}

// CommitOutput sums the data files a commit of the table at root added (with
// dataChange), without loading a snapshot: the output statistics of the stage that
// committed it.
func CommitOutput(ctx context.Context, store objectstore.Store, root string, version int64) (CommitStats, error) {
	t, err := newTable(store, root, Options{})
	if err != nil {
		return CommitStats{}, err
	}
	acts, err := t.readCommit(ctx, version)
	if err != nil {
		return CommitStats{}, fmt.Errorf("table %s: %w", t.displayRoot(), err)
	}
	st := CommitStats{RowsKnown: true}
	for _, a := range acts {
		if a.Add == nil || !a.Add.DataChange {
			continue
		}
		st.Files++
		st.Bytes += a.Add.Size
		if n, ok := a.Add.NumRecords(); ok {
			st.Rows += n
		} else {
			st.RowsKnown = false
		}
	}
	return st, nil
}

// SchemaAt returns the schema of the table at root as of version.
func SchemaAt(ctx context.Context, store objectstore.Store, root string, version int64) (*StructType, error) {
	t, err := newTable(store, root, Options{})
	if err != nil {
		return nil, err
	}
	snap, err := t.SnapshotAt(ctx, version)
	if err != nil {
		return nil, err
	}
	return snap.Schema(), nil
}
