package delta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Change data feed columns added to the data columns (DELTA.md §5).
const (
	CommitVersionColumn   = "_commit_version"
	CommitTimestampColumn = "_commit_timestamp"
)

// Change types of the change data feed.
const (
	ChangeInsert          = "insert"
	ChangeDelete          = "delete"
	ChangeUpdatePreimage  = "update_preimage"
	ChangeUpdatePostimage = "update_postimage"
)

// ChangesOptions select the part of the change data feed Changes returns: the
// table_changes(table, start, end) of Spark.
//
// The range is given by versions or by timestamps (a version wins over a timestamp
// when both are set). A start timestamp selects the first version committed at or after
// it; an end timestamp the last version committed at or before it. With timestamps,
// every version whose commit timestamp falls outside [StartTime, EndTime] is left out
// even when it lies between the two versions (only possible when timestamps are not
// monotonic, e.g. a hand-edited in-commit timestamp; delta-rs does the same).
type ChangesOptions struct {
	// StartVersion is the first version read (inclusive). Either it or StartTime is
	// required.
	StartVersion *int64
	// EndVersion is the last version read (inclusive); a version after the latest is
	// clamped to the latest, as Spark does. Default: the latest version.
	EndVersion *int64
	// StartTime and EndTime bound the range by commit timestamp (inclusive).
	StartTime, EndTime time.Time
	// Types keeps only these change types (e.g. "insert", "update_postimage"); empty keeps
	// all. Values outside the four standard types are allowed: _change_type is taken
	// verbatim from change data files.
	Types []string
	// Columns are the data columns to return, by name, in this order; empty means all.
	// The _change_type, _commit_version and _commit_timestamp columns always follow.
	Columns []string
	// BatchSize caps the rows per record (default DefaultScanBatchSize).
	BatchSize int64
	// Allocator for Arrow buffers (default memory.DefaultAllocator).
	Allocator memory.Allocator
	// TableURI resolves absolute file paths, as in ScanOptions.
	TableURI string
}

// cdfUnit is a group of files of one version read the same way: change data files
// (changeType "", the type comes from the file), or added/removed data files (one
// constant change type).
type cdfUnit struct {
	version    int64
	tsMicros   int64
	changeType string
	files      []*Add
}

// changesPlan is a resolved change data feed query.
type changesPlan struct {
	start, end int64
	schema     *StructType // the schema of the end version
	partCols   []string
	units      []cdfUnit
	// txns are the txn actions of the versions read that have any: appId → version.
	txns map[int64]map[string]int64
}

// Changes returns the table's change data feed over a range of versions (DELTA.md §5): the
// data columns plus _change_type, _commit_version (int64) and _commit_timestamp
// (timestamp[us, UTC]), streamed one file at a time.
//
// Per version: when the commit has cdc actions only its change data files are read and
// _change_type comes from them verbatim; otherwise added files with dataChange=true are
// inserts and removed ones deletes (the removed file is read, with the partition values
// of the remove action); actions with dataChange=false (OPTIMIZE) give nothing.
// _commit_timestamp is the in-commit timestamp where the table enables them, else the
// commit file's modification time made monotonic (as Spark and time travel use).
//
// The whole range is checked before any row is returned. Errors name the versions: the
// feed not enabled (delta.enableChangeDataFeed) at the start or disabled by a metadata
// change inside the range; versions no longer in the log (naming the earliest
// available one); a start after the latest version or after the end. Data files that
// VACUUM already deleted fail the read when they are reached, naming the version and the
// earliest version from which the range can still be read.
func (t *Table) Changes(ctx context.Context, opts ChangesOptions) (*ChangesReader, error) {
	plan, err := t.planChanges(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("change data feed of table %s: %w", t.displayRoot(), err)
	}
	r, err := newChangesReader(ctx, t, plan, opts)
	if err != nil {
		return nil, fmt.Errorf("change data feed of table %s: %w", t.displayRoot(), err)
	}
	return r, nil
}

// ErrVersionCleaned is wrapped by errors about versions whose commit files were removed by
// log cleanup (or whose data files were removed by VACUUM).
var ErrVersionCleaned = errors.New("version no longer available")

// ErrChangeDataFeedDisabled is wrapped by Changes when delta.enableChangeDataFeed is not
// true for part of the requested range.
var ErrChangeDataFeedDisabled = errors.New("change data feed not enabled")

func (t *Table) planChanges(ctx context.Context, opts ChangesOptions) (*changesPlan, error) {
	latest, err := t.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	cl, err := t.changeLog(ctx, latest)
	if err != nil {
		return nil, err
	}
	start, end, empty, err := cl.resolveRange(opts, latest.version)
	if err != nil {
		return nil, err
	}
	if empty {
		return &changesPlan{start: start, end: end, schema: latest.Schema(), partCols: latest.PartitionColumns()}, nil
	}
	// The snapshot at start gives the metadata in force there (and runs the reader gate).
	snap, err := t.SnapshotAt(ctx, start)
	if err != nil {
		return nil, err
	}
	endSnap := latest
	if end != latest.version {
		if endSnap, err = t.SnapshotAt(ctx, end); err != nil {
			return nil, err
		}
	}
	if !cdfEnabled(snap.Metadata()) {
		return nil, t.cdfDisabledError(ctx, start, end)
	}
	plan := &changesPlan{start: start, end: end, schema: endSnap.Schema(), partCols: endSnap.PartitionColumns()}
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if opts.StartVersion == nil && !opts.StartTime.IsZero() {
		lo = opts.StartTime.UnixMilli()
	}
	if opts.EndVersion == nil && !opts.EndTime.IsZero() {
		hi = opts.EndTime.UnixMilli()
	}
	if plan.units, plan.txns, err = t.changeUnits(ctx, cl, snap, start, end, lo, hi); err != nil {
		return nil, err
	}
	return plan, nil
}

// changeLog is what a change feed read knows of the log: the commits up to the latest
// version that the log still holds, with their timestamps.
type changeLog struct {
	commits   []logFile
	stamps    []int64       // commit timestamps (ms), by index in commits
	byVersion map[int64]int // index in commits by version
	earliest  int64         // the earliest version the log can still rebuild
}

func (t *Table) changeLog(ctx context.Context, latest *Snapshot) (*changeLog, error) {
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return nil, err
	}
	idx := indexLog(files)
	cl := &changeLog{earliest: idx.earliestVersion()}
	for _, c := range idx.commits {
		if c.version >= cl.earliest && c.version <= latest.version {
			cl.commits = append(cl.commits, c)
		}
	}
	if len(cl.commits) == 0 {
		return nil, fmt.Errorf("no commit files in the log up to version %d", latest.version)
	}
	if cl.stamps, err = t.commitStamps(ctx, cl.commits, latest.Metadata()); err != nil {
		return nil, err
	}
	cl.byVersion = make(map[int64]int, len(cl.commits))
	for i, c := range cl.commits {
		cl.byVersion[c.version] = i
	}
	return cl, nil
}

// resolveRange turns opts' start and end (versions, or times: the first version
// committed at or after the start time, the last at or before the end time) into
// versions up to latest, and checks that the log holds each of them. empty says that
// both times fall between the same two commits: no version, no rows.
func (cl *changeLog) resolveRange(opts ChangesOptions, latest int64) (start, end int64, empty bool, err error) {
	commits, stamps := cl.commits, cl.stamps
	switch {
	case opts.StartVersion != nil:
		start = *opts.StartVersion
		if start < 0 {
			return 0, 0, false, fmt.Errorf("negative start version %d", start)
		}
	case !opts.StartTime.IsZero():
		want := opts.StartTime.UnixMilli()
		start = -1
		for i, c := range commits {
			if stamps[i] >= want {
				start = c.version
				break
			}
		}
		if start < 0 {
			last := len(commits) - 1
			return 0, 0, false, fmt.Errorf("start timestamp %s is after the latest version %d (committed %s)",
				fmtTime(opts.StartTime), commits[last].version, fmtMillis(stamps[last]))
		}
	default:
		return 0, 0, false, errors.New("a start version or start timestamp is required")
	}
	end = latest
	switch {
	case opts.EndVersion != nil:
		end = min(*opts.EndVersion, latest)
	case !opts.EndTime.IsZero():
		want := opts.EndTime.UnixMilli()
		end = -1
		for i := len(commits) - 1; i >= 0; i-- {
			if stamps[i] <= want {
				end = commits[i].version
				break
			}
		}
		if end < 0 {
			return 0, 0, false, fmt.Errorf("end timestamp %s is before the earliest available version %d (committed %s)",
				fmtTime(opts.EndTime), commits[0].version, fmtMillis(stamps[0]))
		}
	}
	if start > latest {
		return 0, 0, false, fmt.Errorf("start version %d is after the latest version %d", start, latest)
	}
	if opts.EndVersion != nil && *opts.EndVersion < 0 {
		return 0, 0, false, fmt.Errorf("negative end version %d", *opts.EndVersion)
	}
	byTime := (opts.StartVersion == nil && !opts.StartTime.IsZero()) || (opts.EndVersion == nil && !opts.EndTime.IsZero())
	if byTime && !opts.StartTime.IsZero() && !opts.EndTime.IsZero() && opts.StartTime.After(opts.EndTime) {
		return 0, 0, false, fmt.Errorf("start timestamp %s is after end timestamp %s", fmtTime(opts.StartTime), fmtTime(opts.EndTime))
	}
	if start > end {
		if byTime {
			return start, end, true, nil
		}
		return 0, 0, false, fmt.Errorf("start version %d is after end version %d", start, end)
	}
	for v := start; v <= end; v++ {
		if _, ok := cl.byVersion[v]; !ok || v < cl.earliest {
			avail := max(cl.earliest, commits[0].version)
			return 0, 0, false, fmt.Errorf("%w: version %d was removed from the log by log cleanup; the earliest available version is %d",
				ErrVersionCleaned, v, avail)
		}
	}
	return start, end, false, nil
}

// changeUnits reads the commits start..end (snap is the snapshot at start) and returns
// what each changed, for those committed between lo and hi (ms): its change files, or
// else its removed and added files. A protocol the reader does not support, or the
// change feed turned off, inside the range is an error.
func (t *Table) changeUnits(ctx context.Context, cl *changeLog, snap *Snapshot, start, end, lo, hi int64) ([]cdfUnit, map[int64]map[string]int64, error) {
	md, proto := snap.Metadata(), snap.Protocol()
	var units []cdfUnit
	txns := map[int64]map[string]int64{}
	err := t.forEachCommit(ctx, start, end, func(v int64, acts []Action) error {
		var cdcs, adds, removes []*Add
		changed := false
		for i := range acts {
			a := &acts[i]
			switch {
			case a.Txn != nil:
				if txns[v] == nil {
					txns[v] = map[string]int64{}
				}
				txns[v][a.Txn.AppID] = a.Txn.Version
			case a.MetaData != nil:
				md, changed = a.MetaData, true
			case a.Protocol != nil:
				proto, changed = a.Protocol, true
			case a.CDC != nil:
				cdcs = append(cdcs, CDCAsAdd(a.CDC))
			case a.Add != nil && a.Add.DataChange:
				adds = append(adds, a.Add)
			case a.Remove != nil && a.Remove.DataChange:
				removes = append(removes, removeAsAdd(a.Remove))
			}
		}
		adds, removes = pairDeletionVectors(adds, removes)
		if changed && v > start {
			if err := checkRead(proto, md); err != nil {
				return fmt.Errorf("version %d: %w", v, err)
			}
			if !cdfEnabled(md) {
				return fmt.Errorf("%w at version %d: delta.enableChangeDataFeed was turned off there (the range is %d to %d)",
					ErrChangeDataFeedDisabled, v, start, end)
			}
		}
		ts := cl.stamps[cl.byVersion[v]]
		if ts < lo || ts > hi {
			return nil
		}
		micros := ts * 1000
		if len(cdcs) > 0 {
			units = append(units, cdfUnit{version: v, tsMicros: micros, files: cdcs})
			return nil
		}
		if len(removes) > 0 {
			units = append(units, cdfUnit{version: v, tsMicros: micros, changeType: ChangeDelete, files: removes})
		}
		if len(adds) > 0 {
			units = append(units, cdfUnit{version: v, tsMicros: micros, changeType: ChangeInsert, files: adds})
		}
		return nil
	})
	return units, txns, err
}

// ChangeDataFeedStart returns the earliest version from which the change feed can be
// read up to the latest version: the version that last turned delta.enableChangeDataFeed
// on (0 when it was on from the start), but no earlier than the earliest version still in
// the log. A capture_history stage starts there on its first run. It fails when the feed
// is off at the latest version. (Data files deleted by VACUUM are not checked.)
func (t *Table) ChangeDataFeedStart(ctx context.Context) (int64, error) {
	fail := func(err error) (int64, error) {
		return -1, fmt.Errorf("change data feed of table %s: %w", t.displayRoot(), err)
	}
	latest, err := t.Snapshot(ctx)
	if err != nil {
		return fail(err)
	}
	if !latest.ChangeDataFeedEnabled() {
		return fail(fmt.Errorf("%w at the latest version %d", ErrChangeDataFeedDisabled, latest.version))
	}
	files, err := t.listLog(ctx, -1)
	if err != nil {
		return fail(err)
	}
	idx := indexLog(files)
	have := make(map[int64]bool, len(idx.commits))
	for _, c := range idx.commits {
		have[c.version] = true
	}
	// The oldest version with an unbroken run of commit files up to the latest.
	first := latest.version
	for first > idx.earliestVersion() && have[first-1] {
		first--
	}
	snap, err := t.SnapshotAt(ctx, first)
	if err != nil {
		return fail(err)
	}
	from := int64(-1)
	if snap.ChangeDataFeedEnabled() {
		from = first
	}
	for v := first + 1; v <= latest.version; v++ {
		acts, err := t.readCommit(ctx, v)
		if err != nil {
			return fail(err)
		}
		for i := range acts {
			if md := acts[i].MetaData; md != nil {
				switch on := cdfEnabled(md); {
				case on && from < 0:
					from = v
				case !on:
					from = -1
				}
			}
		}
	}
	if from < 0 {
		return fail(fmt.Errorf("%w at the latest version %d", ErrChangeDataFeedDisabled, latest.version))
	}
	return from, nil
}

// cdfDisabledError explains that the feed is off at start, naming the version that turns
// it on inside the range if there is one.
func (t *Table) cdfDisabledError(ctx context.Context, start, end int64) error {
	for v := start + 1; v <= end; v++ {
		acts, err := t.readCommit(ctx, v)
		if err != nil {
			break
		}
		for i := range acts {
			if md := acts[i].MetaData; md != nil && cdfEnabled(md) {
				return fmt.Errorf("%w at start version %d: delta.enableChangeDataFeed is not true there; it was turned on at version %d, so start at %d or later",
					ErrChangeDataFeedDisabled, start, v, v)
			}
		}
	}
	return fmt.Errorf("%w at start version %d: delta.enableChangeDataFeed is not true there (the range is %d to %d)",
		ErrChangeDataFeedDisabled, start, start, end)
}

// commitReadWorkers bounds concurrent commit reads (object stores answer each GET with
// a round trip); commitReadChunk bounds how many decoded commits are held at once.
const (
	commitReadWorkers = 8
	commitReadChunk   = 32
)

// forEachCommit reads the commit files of versions from..to, a chunk at a time with a
// few concurrent reads, and calls fn for each in version order. The first error (of a
// read or of fn) stops it.
func (t *Table) forEachCommit(ctx context.Context, from, to int64, fn func(v int64, acts []Action) error) error {
	for lo := from; lo <= to; lo += commitReadChunk {
		hi := min(lo+commitReadChunk-1, to)
		acts := make([][]Action, hi-lo+1)
		errs := make([]error, hi-lo+1) // kept by version: the lowest version's error is reported
		var g errgroup.Group
		g.SetLimit(commitReadWorkers)
		for v := lo; v <= hi; v++ {
			g.Go(func() error {
				acts[v-lo], errs[v-lo] = t.readCommit(ctx, v)
				return nil
			})
		}
		g.Wait()
		for i := range acts {
			if errs[i] != nil {
				return errs[i]
			}
			if err := fn(lo+int64(i), acts[i]); err != nil {
				return err
			}
			acts[i] = nil
		}
	}
	return nil
}

// CommitTxns returns, for each version in [from, to] whose commit carries a txn action
// of appID, that action's version: what a writer recorded in the commit that made some
// changes about what they mean (see ChangesReader.CommitTxn).
func (t *Table) CommitTxns(ctx context.Context, from, to int64, appID string) (map[int64]int64, error) {
	out := map[int64]int64{}
	err := t.forEachCommit(ctx, from, to, func(v int64, acts []Action) error {
		for i := range acts {
			if a := acts[i].Txn; a != nil && a.AppID == appID {
				out[v] = a.Version
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.displayRoot(), err)
	}
	return out, nil
}

func cdfEnabled(md *Metadata) bool {
	return md != nil && strings.EqualFold(md.Configuration[PropEnableChangeDataFeed], "true")
}

// removeAsAdd views a remove action as an add so that a scan can read the removed file.
func removeAsAdd(r *Remove) *Add {
	size := int64(-1)
	if r.Size != nil {
		size = *r.Size
	}
	return &Add{Path: r.Path, PartitionValues: r.PartitionValues, Size: size, Stats: r.Stats, DeletionVector: r.DeletionVector}
}

// pairDeletionVectors turns each remove and add of the same file in one commit (a DELETE,
// UPDATE or MERGE that changed the file's deletion vector) into the rows that changed:
// those the new vector deletes and the old one did not are deleted, those the old one
// deleted and the new one does not are inserted (RESTORE). Other adds and removes stay
// whole files.
func pairDeletionVectors(adds, removes []*Add) (ins, dels []*Add) {
	removed := make(map[string]*Add, len(removes))
	for _, r := range removes {
		removed[r.Path] = r
	}
	paired := map[string]bool{}
	for _, a := range adds {
		r, ok := removed[a.Path]
		if !ok || (a.DeletionVector == nil && r.DeletionVector == nil) {
			ins = append(ins, a)
			continue
		}
		paired[a.Path] = true
		if a.DeletionVector != nil {
			dels = append(dels, &Add{Path: a.Path, PartitionValues: a.PartitionValues, Size: a.Size,
				dvChange: &dvChange{in: a.DeletionVector, notIn: r.DeletionVector}})
		}
		if r.DeletionVector != nil {
			ins = append(ins, &Add{Path: a.Path, PartitionValues: a.PartitionValues, Size: a.Size,
				dvChange: &dvChange{in: r.DeletionVector, notIn: a.DeletionVector}})
		}
	}
	for _, r := range removes {
		if !paired[r.Path] {
			dels = append(dels, r)
		}
	}
	return ins, dels
}

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// isNotExist says whether err means a missing object.
func isNotExist(err error) bool { return errors.Is(err, objectstore.ErrNotExist) }
