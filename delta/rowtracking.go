package delta

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Row tracking (PROTOCOL.md, Row Tracking): on a table whose protocol supports the
// rowTracking writer feature (and delta.rowTrackingSuspended is not true), every add a
// commit writes gets default generated row ids and commit versions:
//   - a new file gets baseRowId = the row id high-water mark + 1 (the mark then grows by
//     its numRecords) and defaultRowCommitVersion = the commit's version;
//   - a file recommitted under its path (a deletion vector changed) keeps the values of
//     the add it replaces, and an add that carries both values already (a file added
//     again by RESTORE, or with a new deletion vector) keeps them;
//   - the commit records the new high-water mark in the delta.rowTracking domain.
//
// The values depend on the version and on the mark, so they are assigned anew at each
// commit attempt, after any concurrent commit that raised the mark: concurrent appends
// do not conflict. Rows a DELETE, UPDATE or MERGE copies or moves into new files keep
// their row ids in the materialized columns (rowtracking_carry.go), with or without
// column mapping. Rows other rewrites copy (a transaction that writes its files itself)
// get fresh row ids: such a commit says delta.rowTracking.preserved=false in its
// commitInfo tags, as the protocol asks of a writer that does not preserve them.

// Row tracking table properties.
const (
	PropEnableRowTracking    = "delta.enableRowTracking"
	PropRowTrackingSuspended = "delta.rowTrackingSuspended"
	// The hidden columns of materialized row ids and row commit versions (named when
	// row tracking is enabled; DELETE and UPDATE write them).
	PropMaterializedRowIDColumn            = "delta.rowTracking.materializedRowIdColumnName"
	PropMaterializedRowCommitVersionColumn = "delta.rowTracking.materializedRowCommitVersionColumnName"

	// FeatureRowTracking is the row tracking writer feature.
	FeatureRowTracking = "rowTracking"
	rowTrackingDomain  = "delta.rowTracking"
	// commitTagRowTrackingPreserved is the commitInfo tag that says whether the commit
	// preserved the stable row ids of the rows it copied.
	commitTagRowTrackingPreserved = "delta.rowTracking.preserved"
)

// rowTrackingOn says whether commits on a table with this protocol and metadata assign
// row ids: the feature is supported and not suspended.
func rowTrackingOn(p *Protocol, md *Metadata) bool {
	if p == nil || md == nil || !p.HasWriterFeature(FeatureRowTracking) {
		return false
	}
	return !strings.EqualFold(md.Configuration[PropRowTrackingSuspended], "true")
}

// RowIDHighWaterMark returns the highest row id assigned so far, -1 when none was.
func (s *Snapshot) RowIDHighWaterMark() (int64, error) {
	conf, ok := s.DomainMetadata(rowTrackingDomain)
	if !ok {
		return -1, nil
	}
	return parseRowIDHighWaterMark(conf)
}

func parseRowIDHighWaterMark(conf string) (int64, error) {
	var v struct {
		HWM *json.Number `json:"rowIdHighWaterMark"`
	}
	if err := json.Unmarshal([]byte(conf), &v); err != nil || v.HWM == nil {
		return 0, fmt.Errorf("domain %s: no rowIdHighWaterMark in %q", rowTrackingDomain, conf)
	}
	n, err := v.HWM.Int64()
	if err != nil {
		return 0, fmt.Errorf("domain %s: rowIdHighWaterMark %s: %w", rowTrackingDomain, *v.HWM, err)
	}
	return n, nil
}

// rowTrackingDomainAction is the domainMetadata action recording a high-water mark, as
// Spark spells it.
func rowTrackingDomainAction(hwm int64) *DomainMetadata {
	return &DomainMetadata{Domain: rowTrackingDomain,
		Configuration: `{"rowIdHighWaterMark":` + strconv.FormatInt(hwm, 10) + `,"domainName":"` + rowTrackingDomain + `"}`}
}

// newRowTrackingConfig adds to a new table's configuration, when it enables row tracking,
// the names of the materialized columns (unique, as Spark names them).
func newRowTrackingConfig(config map[string]string) {
	if !strings.EqualFold(config[PropEnableRowTracking], "true") {
		return
	}
	if config[PropMaterializedRowIDColumn] == "" {
		config[PropMaterializedRowIDColumn] = "_row-id-col-" + uuid.NewString()
	}
	if config[PropMaterializedRowCommitVersionColumn] == "" {
		config[PropMaterializedRowCommitVersionColumn] = "_row-commit-version-col-" + uuid.NewString()
	}
}

// assignRowIDs returns the transaction's actions for an attempt at version, with row
// ids and commit versions on its adds (copies; the originals are not changed), the
// domain action of the new high-water mark (nil when no id was assigned), and whether
// the commit preserves stable row ids. hwm is the mark the attempt starts from.
func (tx *Transaction) assignRowIDs(version, hwm int64) ([]Action, *DomainMetadata, bool, error) {
	removedPaths := map[string]*Remove{}
	addedPaths := map[string]bool{}
	for i := range tx.actions {
		if r := tx.actions[i].Remove; r != nil {
			removedPaths[r.Path] = r
		}
		if a := tx.actions[i].Add; a != nil {
			addedPaths[a.Path] = true
		}
	}
	out := make([]Action, len(tx.actions))
	copy(out, tx.actions)
	fresh, copiedAway := false, false
	start := hwm
	for i := range out {
		a := out[i].Add
		if a == nil {
			continue
		}
		c := *a
		switch prev := tx.recommitted(a, removedPaths); {
		case a.BaseRowID != nil && a.DefaultRowCommitVersion != nil:
			// An existing file added again (a new deletion vector, RESTORE) with its ids.
		case prev != nil:
			c.BaseRowID, c.DefaultRowCommitVersion = prev.BaseRowID, prev.DefaultRowCommitVersion
		default:
			n, ok := numRecordsFromStats(a.Stats)
			if !ok {
				return nil, nil, false, fmt.Errorf("add %s: row tracking needs the file's numRecords statistic to assign row ids", a.Path)
			}
			base, v := hwm+1, version
			c.BaseRowID, c.DefaultRowCommitVersion = &base, &v
			hwm += n
			fresh = true
		}
		out[i] = Action{Add: &c}
	}
	for p := range removedPaths {
		if !addedPaths[p] {
			copiedAway = true
		}
	}
	var dm *DomainMetadata
	if hwm > start {
		dm = rowTrackingDomainAction(hwm)
	}
	return out, dm, tx.rowIDsCarried || (!(fresh && copiedAway) && !tx.movesRows()), nil
}

// movesRows says whether the operation's metrics count rows updated or copied, which
// get fresh row ids in new files (an UPDATE or MERGE with deletion vectors moves the
// updated rows without removing their file).
func (tx *Transaction) movesRows() bool {
	for _, k := range []string{"numUpdatedRows", "numCopiedRows", "numTargetRowsUpdated", "numTargetRowsCopied"} {
		if tx.opts.OperationMetrics[k] > 0 {
			return true
		}
	}
	return false
}

// recommitted returns the live add an add replaces under the same path (its deletion
// vector changed, or the same action again), or nil for a new file.
func (tx *Transaction) recommitted(a *Add, removed map[string]*Remove) *Add {
	if tx.snap == nil {
		return nil
	}
	if prev, ok := tx.snap.state.files[fileKey{a.Path, a.DeletionVector.UniqueID()}]; ok {
		return prev
	}
	if r, ok := removed[a.Path]; ok {
		if prev, ok := tx.snap.state.files[fileKey{r.Path, r.DeletionVector.UniqueID()}]; ok {
			return prev
		}
	}
	return nil
}
