package delta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// VacuumOptions control Vacuum.
type VacuumOptions struct {
	// Retain is how long removed files are kept after their removal (and how old an
	// unreferenced file must be to be deleted). Default: the table's
	// delta.deletedFileRetentionDuration (1 week when unset).
	Retain *time.Duration
	// Force allows a Retain shorter than delta.deletedFileRetentionDuration (Spark's
	// retentionDurationCheck.enabled=false, delta-rs enforce_retention_duration=false).
	// Time travel and change feed reads of versions older than Retain may fail afterwards.
	Force bool
	// DryRun lists what would be deleted, deletes nothing and records nothing.
	DryRun bool
	// Lite deletes only the files of expired tombstones still in the log (delta-rs's
	// default mode): no listing of the table, but orphan files (from failed writes) and
	// files of tombstones already dropped from checkpoints are left. The default (FULL)
	// lists the table.
	Lite bool
	// KeepVersionsFrom, when not nil, protects every file needed to read any version
	// >= *KeepVersionsFrom (time travel) or the change feed from that version on: the
	// files live at that version and every file an add, remove or cdc action of a later
	// (or that) commit names. Such files survive whatever their age: the vacuum is
	// clamped, not refused, and VacuumResult.FilesKept counts what was spared. It is
	// meant for a consumer that still has to read those versions (a capture_history
	// stage whose next run starts there). When that version is already gone from the log,
	// Vacuum fails naming KeepFor and the version.
	KeepVersionsFrom *int64
	// KeepFor names the consumer behind KeepVersionsFrom, for error messages
	// (e.g. `stage "history" of pipeline "crm"`).
	KeepFor string
	// RefuseKept turns the clamp into a refusal: when KeepVersionsFrom spares any file,
	// Vacuum fails (ErrNeededByConsumer) naming KeepFor and the version, and deletes
	// nothing.
	RefuseKept bool
	// Lineage is recorded in the VACUUM START/END commits.
	Lineage *Lineage
	// TableURI is the table's absolute location (as in ScanOptions), needed only when the
	// log names files by absolute URI: without it such a table is refused, since vacuum
	// could not tell that those files are referenced.
	TableURI string
}

// VacuumResult reports what Vacuum deleted (or, on a dry run, would delete).
type VacuumResult struct {
	// FilesDeleted are the deleted paths relative to the table root, sorted.
	FilesDeleted []string
	// BytesDeleted is their total size.
	BytesDeleted int64
	// FilesKept counts files that were old enough and unreferenced by the retention window
	// but were kept for KeepVersionsFrom.
	FilesKept int
	// Retention is the retention used; Cutoff = now − Retention.
	Retention time.Duration
	Cutoff    time.Time
	// DryRun is set when nothing was deleted on purpose.
	DryRun bool
	// StartVersion and EndVersion are the versions of the VACUUM START and VACUUM END
	// commits (-1 on a dry run, or when nothing was committed).
	StartVersion, EndVersion int64
}

// ErrRetentionTooShort is wrapped by Vacuum when the retention is shorter than the
// table's delta.deletedFileRetentionDuration and Force is not set.
var ErrRetentionTooShort = errors.New("retention shorter than the table's delta.deletedFileRetentionDuration")

// ErrNeededByConsumer is wrapped by Vacuum when RefuseKept is set and files that
// KeepVersionsFrom protects would otherwise have been deleted.
var ErrNeededByConsumer = errors.New("files still needed by a consumer")

// vacuumDeleteWorkers bounds concurrent deletes.
const vacuumDeleteWorkers = 16

// Vacuum deletes data files the table no longer needs (DELTA.md §8): files that are
// neither live nor removed within the retention window, and whose modification time is
// older than the retention. It runs the writer protocol gate first, refuses a retention
// shorter than delta.deletedFileRetentionDuration unless Force, and, when it deletes
// anything, records VACUUM START and VACUUM END commits (commitInfo only) in the history, as delta-rs and Spark on cloud
// stores do. The clock is the table's Options.Now.
//
// FULL mode lists the table: it never touches _delta_log, nor names starting with "_"
// or "." (except _change_data and col=value partition directories); change data files
// age out by modification time. Empty directories go with their last file on stores
// that have directories.
func (t *Table) Vacuum(ctx context.Context, opts VacuumOptions) (*VacuumResult, error) {
	res, err := t.vacuum(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("vacuum table %s: %w", t.displayRoot(), err)
	}
	return res, nil
}

func (t *Table) vacuum(ctx context.Context, opts VacuumOptions) (*VacuumResult, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkWrite(snap.Protocol(), snap.Metadata()); err != nil {
		return nil, err
	}
	tableRetention := snap.DeletedFileRetention()
	retention := tableRetention
	if opts.Retain != nil {
		retention = *opts.Retain
	}
	if retention < 0 {
		return nil, fmt.Errorf("negative retention %s", retention)
	}
	if retention < tableRetention && !opts.Force {
		return nil, fmt.Errorf("%w: asked to retain %s, but delta.deletedFileRetentionDuration is %s; files younger than that may still be needed by readers and time travel (force the vacuum to delete them anyway)",
			ErrRetentionTooShort, fmtDuration(retention), fmtDuration(tableRetention))
	}
	cutoff := t.opts.Now().Add(-retention)
	res := &VacuumResult{Retention: retention, Cutoff: cutoff, DryRun: opts.DryRun, StartVersion: -1, EndVersion: -1}
	cands, err := t.vacuumCandidates(ctx, snap, cutoff, opts, res)
	if err != nil {
		return nil, err
	}
	if opts.RefuseKept && res.FilesKept > 0 {
		who := opts.KeepFor
		if who == "" {
			who = "a consumer"
		}
		return nil, fmt.Errorf("%w: %s still needs to read version %d and later, and %d of the files this vacuum would delete belong to them",
			ErrNeededByConsumer, who, *opts.KeepVersionsFrom, res.FilesKept)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].path < cands[j].path })
	for _, c := range cands {
		res.FilesDeleted = append(res.FilesDeleted, c.path)
		res.BytesDeleted += c.size
	}
	if opts.DryRun || len(cands) == 0 {
		// Nothing to delete: record nothing, so that a scheduled vacuum with no work leaves
		// the table's version (and what its consumers must read) unchanged.
		return res, nil
	}
	if err := t.deleteRecorded(ctx, snap, opts, tableRetention, res); err != nil {
		return nil, err
	}
	return res, nil
}

// vacuumCandidate is a file a vacuum may delete, relative to the table root.
type vacuumCandidate struct {
	path string
	size int64
}

// vacuumCandidates lists the files no version after cutoff needs: with opts.Lite the
// files of expired tombstones (and their deletion vectors) that still exist, else every
// file under the table root older than cutoff that no live file or unexpired tombstone
// names. Files opts.KeepVersionsFrom protects are counted in res.FilesKept instead.
func (t *Table) vacuumCandidates(ctx context.Context, snap *Snapshot, cutoff time.Time, opts VacuumOptions, res *VacuumResult) ([]vacuumCandidate, error) {
	valid := map[string]bool{}
	for _, a := range snap.Files() {
		if err := t.markFile(valid, a.Path, a.DeletionVector, opts.TableURI); err != nil {
			return nil, err
		}
	}
	cutoffMs := cutoff.UnixMilli()
	var expired []*Remove
	for _, r := range snap.Tombstones() {
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp >= cutoffMs {
			if err := t.markFile(valid, r.Path, r.DeletionVector, opts.TableURI); err != nil {
				return nil, err
			}
		} else {
			expired = append(expired, r)
		}
	}
	keep, err := t.filesNeededFrom(ctx, snap, opts)
	if err != nil {
		return nil, err
	}
	var cands []vacuumCandidate
	if !opts.Lite {
		prefix := ""
		if t.root != "" {
			prefix = t.root + "/"
		}
		infos, err := t.store.List(ctx, prefix, "")
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", t.displayRoot(), err)
		}
		for _, info := range infos {
			rel := strings.TrimPrefix(info.Key, prefix)
			if hiddenForVacuum(rel) || valid[rel] || !info.ModTime.Before(cutoff) {
				continue
			}
			if keep[rel] {
				res.FilesKept++
				continue
			}
			cands = append(cands, vacuumCandidate{rel, info.Size})
		}
		return cands, nil
	}
	seen := map[string]bool{}
	var paths []string // of expired tombstones: data files and their vectors' files
	for _, r := range expired {
		if p, ok := t.relPath(r.Path); ok {
			paths = append(paths, p)
		}
		if r.DeletionVector != nil && r.DeletionVector.StorageType == "u" {
			if p, err := dvFileKey(r.DeletionVector, ""); err == nil {
				paths = append(paths, p)
			}
		}
	}
	for _, p := range paths {
		if valid[p] || seen[p] {
			continue
		}
		seen[p] = true
		info, err := t.store.Stat(ctx, t.key(p))
		if isNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if keep[p] {
			res.FilesKept++
			continue
		}
		cands = append(cands, vacuumCandidate{p, info.Size})
	}
	return cands, nil
}

// deleteRecorded deletes res.FilesDeleted between a VACUUM START and a VACUUM END
// commit, as Spark records a vacuum, and sets res's versions. A failed delete is
// recorded as FAILED in VACUUM END and returned.
func (t *Table) deleteRecorded(ctx context.Context, snap *Snapshot, opts VacuumOptions, tableRetention time.Duration, res *VacuumResult) error {
	mode := "FULL"
	if opts.Lite {
		mode = "LITE"
	}
	startTx := t.NewTransaction(snap, TxOptions{Operation: "VACUUM START", Lineage: opts.Lineage,
		OperationParameters: map[string]any{
			"retentionCheckEnabled":    !opts.Force,
			"specifiedRetentionMillis": res.Retention.Milliseconds(),
			"defaultRetentionMillis":   tableRetention.Milliseconds(),
			"vacuumType":               mode,
		},
		OperationMetrics: map[string]int64{"numFilesToDelete": int64(len(res.FilesDeleted)), "sizeOfDataToDelete": res.BytesDeleted},
	})
	var err error
	if res.StartVersion, err = startTx.Commit(ctx); err != nil {
		return fmt.Errorf("record VACUUM START: %w", err)
	}
	deleted, derr := t.deleteAll(ctx, res.FilesDeleted)
	status := "COMPLETED"
	if derr != nil {
		status = "FAILED"
	}
	endSnap, err := t.Snapshot(ctx)
	if err != nil {
		return errors.Join(derr, err)
	}
	endTx := t.NewTransaction(endSnap, TxOptions{Operation: "VACUUM END", Lineage: opts.Lineage,
		OperationParameters: map[string]any{"status": status},
		OperationMetrics:    map[string]int64{"numDeletedFiles": int64(deleted)},
	})
	if res.EndVersion, err = endTx.Commit(ctx); err != nil {
		return errors.Join(derr, fmt.Errorf("record VACUUM END: %w", err))
	}
	return derr
}

// deleteAll deletes paths (relative to the root), vacuumDeleteWorkers at once, and
// returns how many were deleted; the first error stops the rest.
func (t *Table) deleteAll(ctx context.Context, paths []string) (int, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(vacuumDeleteWorkers)
	var n atomic.Int64
	for _, p := range paths {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := t.store.Delete(gctx, t.key(p)); err != nil {
				return fmt.Errorf("delete %s: %w", p, err)
			}
			n.Add(1)
			return nil
		})
	}
	err := g.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return int(n.Load()), err
}

// filesNeededFrom returns the files KeepVersionsFrom protects (nil when unset).
func (t *Table) filesNeededFrom(ctx context.Context, latest *Snapshot, opts VacuumOptions) (map[string]bool, error) {
	if opts.KeepVersionsFrom == nil {
		return nil, nil
	}
	from := *opts.KeepVersionsFrom
	who := opts.KeepFor
	if who == "" {
		who = "a consumer"
	}
	if from > latest.version {
		return map[string]bool{}, nil
	}
	if from < 0 {
		from = 0
	}
	snap, err := t.SnapshotAt(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("%s still needs version %d, which can no longer be read: %w", who, from, err)
	}
	keep := map[string]bool{}
	for _, a := range snap.Files() {
		if err := t.markFile(keep, a.Path, a.DeletionVector, opts.TableURI); err != nil {
			return nil, err
		}
	}
	err = t.forEachCommit(ctx, from, latest.version, func(_ int64, acts []Action) error {
		for i := range acts {
			var p string
			var dv *DeletionVector
			switch a := &acts[i]; {
			case a.Add != nil:
				p, dv = a.Add.Path, a.Add.DeletionVector
			case a.Remove != nil:
				p, dv = a.Remove.Path, a.Remove.DeletionVector
			case a.CDC != nil:
				p = a.CDC.Path
			default:
				continue
			}
			if err := t.markFile(keep, p, dv, opts.TableURI); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s still needs version %d: %w", who, from, err)
	}
	return keep, nil
}

// markPath adds an action's path, relative to the table root, to set. An absolute URI is
// made relative with tableURI; one outside the table is skipped, and one that cannot be
// placed (no tableURI) is an error.
// markFile marks a data file and the file of its deletion vector, if any.
func (t *Table) markFile(set map[string]bool, p string, dv *DeletionVector, tableURI string) error {
	if dv != nil && dv.StorageType != "i" {
		rel, err := dvFileKey(dv, tableURI)
		if err != nil {
			return fmt.Errorf("file %s: %w", p, err)
		}
		set[rel] = true
	}
	return t.markPath(set, p, tableURI)
}

func (t *Table) markPath(set map[string]bool, p, tableURI string) error {
	if rel, ok := t.relPath(p); ok {
		set[rel] = true
		return nil
	}
	loc := t.location()
	if tableURI != "" {
		if u := parseFilePath(strings.TrimSuffix(tableURI, "/")); u.abs {
			loc = &u
		}
	}
	if loc == nil {
		return fmt.Errorf("the log names file %s by absolute URI and the table's location is not known, so vacuum cannot tell whether that file is one it would delete", p)
	}
	if rel, ok := parseFilePath(p).qualify(loc).under(*loc); ok {
		set[rel] = true
	}
	return nil
}

// hiddenForVacuum says whether a key relative to the table root is outside vacuum's
// reach: _delta_log, and any path with a segment starting with "_" or "." other than
// _change_data (top level) and col=value partition directories.
func hiddenForVacuum(rel string) bool {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		if s == "" || (s[0] != '_' && s[0] != '.') {
			continue
		}
		if i == 0 && s == ChangeDataDir && len(segs) > 1 {
			continue
		}
		if i < len(segs)-1 && strings.Contains(s, "=") {
			continue
		}
		return true
	}
	return false
}

// fmtDuration prints a duration in the largest whole unit Delta intervals use.
func fmtDuration(d time.Duration) string {
	day := 24 * time.Hour
	switch {
	case d != 0 && d%(7*day) == 0:
		return fmt.Sprintf("%s (%s)", plural(int64(d/(7*day)), "week"), plural(int64(d/day), "day"))
	case d != 0 && d%day == 0:
		return plural(int64(d/day), "day")
	case d != 0 && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	}
	return d.String()
}

func plural(n int64, unit string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", unit)
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
