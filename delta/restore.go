package delta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// RestoreOptions name the version to restore: Version, or else the version as of
// Timestamp (the newest committed at or before it).
type RestoreOptions struct {
	Version   *int64
	Timestamp time.Time
	// Lineage is recorded in the RESTORE commit.
	Lineage *Lineage
	// Keys, when set, name the columns that identify a row: in the change data, a row
	// the restore removes and one it brings back with the same key are an
	// update_preimage and update_postimage pair rather than a delete and an insert.
	Keys []string
	// ResetTxns commits, with the restore, each txn (an idempotent writer's progress)
	// whose version differs between the latest and the restored version with its
	// version in the restored one: the writers' progress goes back with the rows. (A txn
	// is never removed: an appId the restored version has no txn for keeps its latest
	// version, and RestoreMetrics.TxnsKept names it.) Without it every txn keeps its
	// latest version, as Spark's RESTORE does.
	ResetTxns bool
	// Txns are txn actions (appId → version) committed with the restore, after those of
	// ResetTxns: a rollback sets the progress of the stages that write the table.
	Txns map[string]int64
}

// RestoreMetrics are the operationMetrics of a RESTORE commit (Spark's names).
type RestoreMetrics struct {
	NumRestoredFiles       int64 // files of the target version added back
	RestoredFilesSize      int64
	NumRemovedFiles        int64 // live files not in the target version, removed
	RemovedFilesSize       int64
	NumOfFilesAfterRestore int64
	TableSizeAfterRestore  int64
	// RowsDeleted, RowsInserted and RowsUpdated count the rows of the restore's change
	// data (the net difference; see restore_changes.go): all 0 when the change data
	// feed is off. FileLevelChanges is true when the change feed was left to the files
	// (the partition columns changed between the two versions).
	RowsDeleted, RowsInserted, RowsUpdated int64
	FileLevelChanges                       bool
	// ChangeData: the table has its change data feed on, and the restore wrote change
	// data (or found no row changed).
	ChangeData bool
	// TxnsReset lists the txns ResetTxns set back (appId → version); TxnsKept the appIds
	// it could not (the restored version has no txn for them).
	TxnsReset map[string]int64
	TxnsKept  []string
}

// Restore makes the table's content that of an earlier version with one new commit
// (Spark's RESTORE TABLE … TO VERSION AS OF / TIMESTAMP AS OF): live files that are not
// in the target version are removed and files of the target version that are not live
// are added back. When the change data feed is on, the commit carries change data with
// the net difference of the rows (restore_changes.go), so the feed shows only the rows
// that really change, not every row of every file removed or brought back. The target's metadata (schema, properties) comes back too when it
// differs; the protocol is never downgraded. commitInfo has operation "RESTORE",
// operationParameters {version, timestamp} and the metrics above. It fails, before
// committing anything, when a file it needs was already deleted by VACUUM.
func (t *Table) Restore(ctx context.Context, opts RestoreOptions) (int64, *RestoreMetrics, error) {
	v, m, err := t.restore(ctx, opts)
	if err != nil {
		return -1, nil, fmt.Errorf("restore table %s: %w", t.displayRoot(), err)
	}
	return v, m, nil
}

func (t *Table) restore(ctx context.Context, opts RestoreOptions) (int64, *RestoreMetrics, error) {
	latest, err := t.Snapshot(ctx)
	if err != nil {
		return -1, nil, err
	}
	if err := checkWrite(latest.Protocol(), latest.Metadata()); err != nil {
		return -1, nil, err
	}
	params := map[string]any{"version": nil, "timestamp": nil}
	var target *Snapshot
	switch {
	case opts.Version != nil:
		if *opts.Version > latest.version {
			return -1, nil, fmt.Errorf("cannot restore to version %d: the latest version is %d", *opts.Version, latest.version)
		}
		target, err = t.SnapshotAt(ctx, *opts.Version)
		params["version"] = *opts.Version
	case !opts.Timestamp.IsZero():
		target, err = t.SnapshotAsOf(ctx, opts.Timestamp)
		params["timestamp"] = opts.Timestamp.UTC().Format("2006-01-02 15:04:05.000")
	default:
		return -1, nil, errors.New("a version or timestamp to restore is required")
	}
	if err != nil {
		return -1, nil, err
	}
	if err := checkWrite(target.Protocol(), target.Metadata()); err != nil {
		return -1, nil, fmt.Errorf("version %d: %w", target.version, err)
	}

	restore, remove, m, err := t.restoreFiles(ctx, latest, target)
	if err != nil {
		return -1, nil, err
	}
	tx := t.NewTransaction(latest, TxOptions{Operation: "RESTORE", OperationParameters: params, Lineage: opts.Lineage,
		OperationMetrics: map[string]int64{
			"numRestoredFiles":       m.NumRestoredFiles,
			"restoredFilesSize":      m.RestoredFilesSize,
			"numRemovedFiles":        m.NumRemovedFiles,
			"removedFilesSize":       m.RemovedFilesSize,
			"numOfFilesAfterRestore": m.NumOfFilesAfterRestore,
			"tableSizeAfterRestore":  m.TableSizeAfterRestore,
		}})
	md, err := keepHighWaterMarks(target.Metadata(), latest.Schema())
	if err != nil {
		return -1, nil, err
	}
	if md, err = keepColumnMapping(md, latest.Metadata()); err != nil {
		return -1, nil, err
	}
	dataChange := true
	if cdfEnabled(md) && len(restore)+len(remove) > 0 {
		recs, n, ok, err := t.restoreChanges(ctx, target, latest, restore, remove, opts.Keys)
		if err != nil {
			return -1, nil, err
		}
		defer arrowx.ReleaseRecords(recs)
		m.RowsDeleted, m.RowsInserted, m.RowsUpdated, m.FileLevelChanges, m.ChangeData = n.deleted, n.inserted, n.updated, !ok, true
		switch {
		case ok && len(recs) > 0:
			schema, err := tableSchema(md)
			if err != nil {
				return -1, nil, err
			}
			cdcs, err := WriteChangeFiles(ctx, t.store, t.root, schema, md.PartitionColumns, recs, WriteOptions{})
			if err != nil {
				return -1, nil, err
			}
			tx.AddCDC(cdcs...)
		case ok: // the files differ, the rows do not: a rewrite, no change
			dataChange = false
		}
	}
	if cdfEnabled(md) && !m.FileLevelChanges { // the rows of its change data, as a MERGE counts them
		tx.opts.OperationMetrics["numInsertedRows"] = m.RowsInserted
		tx.opts.OperationMetrics["numUpdatedRows"] = m.RowsUpdated
		tx.opts.OperationMetrics["numDeletedRows"] = m.RowsDeleted
	}
	tx.ReadWholeTable()
	for _, a := range restore {
		c := *a
		c.DataChange = dataChange
		tx.AddFiles(&c)
	}
	if dataChange {
		tx.RemoveAdds(remove...)
	} else {
		for _, a := range remove {
			sz := a.Size
			tx.RemoveFiles(&Remove{Path: a.Path, DataChange: false, PartitionValues: a.PartitionValues, Size: &sz, Stats: a.Stats, Tags: a.Tags, DeletionVector: a.DeletionVector})
		}
	}
	if opts.ResetTxns {
		m.TxnsReset = map[string]int64{}
		for app, old := range target.state.txns {
			if now, ok := latest.state.txns[app]; !ok || now.Version != old.Version {
				m.TxnsReset[app] = old.Version
			}
		}
		for app := range latest.state.txns {
			if _, ok := target.state.txns[app]; !ok {
				m.TxnsKept = append(m.TxnsKept, app)
			}
		}
		slices.Sort(m.TxnsKept)
	}
	for app, v := range m.TxnsReset {
		if _, override := opts.Txns[app]; !override {
			tx.SetTxn(app, v)
		}
	}
	for app, v := range opts.Txns {
		tx.SetTxn(app, v)
	}
	if !sameMetadata(md, latest.Metadata()) {
		tx.UpdateMetadata(md)
	}
	v, err := tx.Commit(ctx)
	if err != nil {
		return -1, nil, err
	}
	return v, m, nil
}

// restoreFiles compares the files of the latest snapshot with those of the target: the
// files to bring back (each of which must still exist: VACUUM may have deleted it) and
// the files to remove, sorted by path, with the counts of the RESTORE.
func (t *Table) restoreFiles(ctx context.Context, latest, target *Snapshot) (restore, remove []*Add, m *RestoreMetrics, err error) {
	m = &RestoreMetrics{}
	for k, a := range target.state.files {
		m.NumOfFilesAfterRestore++
		m.TableSizeAfterRestore += a.Size
		if _, live := latest.state.files[k]; !live {
			restore = append(restore, a)
		}
	}
	for k, a := range latest.state.files {
		if _, keep := target.state.files[k]; !keep {
			remove = append(remove, a)
		}
	}
	sortAddSlice(restore)
	sortAddSlice(remove)
	var missing []string
	for _, a := range restore {
		rel, ok := t.relPath(a.Path)
		if !ok {
			continue
		}
		if _, err := t.store.Stat(ctx, t.key(rel)); isNotExist(err) {
			missing = append(missing, a.Path)
		} else if err != nil {
			return nil, nil, nil, err
		}
	}
	if len(missing) > 0 {
		return nil, nil, nil, fmt.Errorf("%w: cannot restore to version %d: %d of its data files were deleted (by VACUUM), e.g. %s",
			ErrVersionCleaned, target.version, len(missing), missing[0])
	}
	for _, a := range restore {
		m.NumRestoredFiles++
		m.RestoredFilesSize += a.Size
	}
	for _, a := range remove {
		m.NumRemovedFiles++
		m.RemovedFilesSize += a.Size
	}
	return restore, remove, m, nil
}

// sameMetadata compares what RESTORE brings back: schema, partitioning and properties.
func sameMetadata(a, b *Metadata) bool {
	if a.SchemaString != b.SchemaString || len(a.PartitionColumns) != len(b.PartitionColumns) || len(a.Configuration) != len(b.Configuration) {
		return false
	}
	for i := range a.PartitionColumns {
		if a.PartitionColumns[i] != b.PartitionColumns[i] {
			return false
		}
	}
	for k, v := range a.Configuration {
		if bv, ok := b.Configuration[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func sortAddSlice(adds []*Add) {
	m := make(map[fileKey]*Add, len(adds))
	for _, a := range adds {
		m[fileKey{a.Path, a.DeletionVector.UniqueID()}] = a
	}
	copy(adds, sortAdds(m))
}

// keepColumnMapping returns the restored metadata with the latest version's column
// mapping kept: its mode (a restored version from before mapping was turned on gets it
// as name, its columns keeping their names as physical names, as when it was turned
// on) and its delta.columnMapping.maxColumnId when higher, so that no id is handed out
// twice (a column added after the restore must never read the files of one added
// before it, in time travel and the change feed).
func keepColumnMapping(md, now *Metadata) (*Metadata, error) {
	mode := columnMappingMode(now)
	if mode == "none" {
		return md, nil
	}
	schema, err := md.Schema()
	if err != nil {
		return nil, err
	}
	out := *md
	out.Configuration = copyConfig(md.Configuration)
	maxID := max(maxColumnID(md, schema), maxColumnID(now, &StructType{}))
	if columnMappingMode(md) == "none" {
		schema = withoutColumnMapping(schema)
		maxID = assignColumnMapping(schema, maxID, true)
		out.Configuration[propColumnMappingMode] = mode
		if out.SchemaString, err = schema.SchemaString(); err != nil {
			return nil, err
		}
	}
	out.Configuration[propColumnMappingMaxID] = strconv.FormatInt(maxID, 10)
	return &out, nil
}

// keepHighWaterMarks returns the restored metadata with each identity column's high-water
// mark taken from the latest version when that one is further along (as Delta Spark
// does): RESTORE brings old rows back, never old identity values, so values handed out
// after the restored version are not handed out again.
func keepHighWaterMarks(md *Metadata, latest *StructType) (*Metadata, error) {
	schema, err := md.Schema()
	if err != nil {
		return nil, err
	}
	changed := false
	for i, f := range schema.Fields {
		col, ok, err := IdentityField(f)
		if err != nil || !ok {
			continue
		}
		now, ok, err := IdentityField(latest.Field(f.Name))
		if err != nil || !ok || now.HighWaterMark == nil {
			continue
		}
		hw := *now.HighWaterMark
		if old := col.HighWaterMark; old != nil && (col.Step > 0 && *old >= hw || col.Step < 0 && *old <= hw) {
			continue
		}
		nf := *f
		nf.Metadata = maps.Clone(f.Metadata)
		nf.Metadata[IdentityHighWaterMark] = hw
		schema.Fields[i] = &nf
		changed = true
	}
	if !changed {
		return md, nil
	}
	out := *md
	if out.SchemaString, err = schema.SchemaString(); err != nil {
		return nil, err
	}
	return &out, nil
}
