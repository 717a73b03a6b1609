package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Env is what a stage runs with: where tables live, how to reach sources, who is running
// it (recorded in every commit), a clock and a logger.
type Env struct {
	// Warehouse is the store holding every declared table, each under its Path.
	Warehouse objectstore.Store
	// Tables are the pipeline's declared tables by name.
	Tables map[string]*Table
	// OpenLocation opens the store behind a source location (a local path, file://, s3://
	// or mem:// URL) and returns the key prefix inside it; ingest uses it for globs.
	OpenLocation func(ctx context.Context, location string) (objectstore.Store, string, error)
	// Lineage names the pipeline, stage, run and attempt; stages copy it into commits.
	Lineage delta.Lineage
	// Delta carries the clock, engine info and user name for delta operations.
	Delta delta.Options
	// Logger receives progress and warnings; nil means slog.Default().
	Logger *slog.Logger
	// Progress, when set, is called as rows flow, for live progress displays.
	Progress func(Progress)
	// PipelineFile names the pipeline in the commands that messages suggest.
	PipelineFile string
	// MemoryBudget bounds the memory of the stages that hold a batch by key (upsert and
	// snapshot ingest, scd1_merge, scd2_merge) whose config sets none; 0 means
	// DefaultMemoryBudget. A batch larger than it is worked in passes over spill files.
	MemoryBudget ByteSize
	// SpillDir is where such stages write their spill files ("": os.TempDir()).
	SpillDir string
	// Expectations are the stage's data quality checks (expect.go): the row checks run
	// as the stage writes, the table checks after it (CheckExpectations).
	Expectations []Expectation

	// rows are the row checks of the stage's current run: an environment with
	// expectations serves one run at a time (the scheduler's runner makes one per
	// attempt).
	rows *rowChecks

	createdMu sync.Mutex
	created   []*Table // the tables this environment's stage created (openOrCreate)
}

// Now returns the environment's clock reading.
func (e *Env) Now() time.Time {
	if e.Delta.Now != nil {
		return e.Delta.Now()
	}
	return time.Now()
}

// Log returns the logger to use.
func (e *Env) Log() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.Default()
}

// Progress is a running count reported while a stage works (progress.go): a report
// carries the fields it knows; zero fields are not news.
type Progress struct {
	RowsRead    int64
	RowsWritten int64
	// FilesDone and BytesRead count the source files decoded and their bytes, of
	// FilesTotal and BytesTotal (ingest).
	FilesDone, FilesTotal int
	BytesRead, BytesTotal int64
	// Pass is the pass over spill files under way, of Passes (a stage over its memory
	// budget); Parts the parts of a MERGE in parts done.
	Pass, Passes, Parts int
	// Phase says what the stage does now.
	Phase string
}

// TableVersion names a version of a table that a stage read or committed.
type TableVersion struct {
	Table   string
	Version int64
}

// ChangeRange is a range (After, Through] of a table's change feed.
type ChangeRange struct {
	Table          string
	After, Through int64
}

// Result is what a stage did, for run records, the CLI summary and metrics.
type Result struct {
	RowsRead     int64
	RowsWritten  int64
	RowsSkipped  int64 // bad records skipped or quarantined (on_error skip / quarantine)
	FilesRead    int64
	FilesWritten int64
	BytesRead    int64
	BytesWritten int64
	// FilesDeleted and BytesDeleted count what vacuum removed.
	FilesDeleted int64
	BytesDeleted int64
	// VersionsRead and VersionsWritten list the table versions read and committed; a
	// rerun that found nothing to do writes none.
	VersionsRead    []TableVersion
	VersionsWritten []TableVersion
	// ChangesRead lists the change feed ranges read (capture_history, and merges with
	// source_changes): versions After (exclusive) through Through of Table.
	ChangesRead []ChangeRange
	Duration    time.Duration
	// Notes are human-readable remarks ("3 files already ingested", "dry run: ...").
	Notes []string
	// Conflicts counts the commits this stage lost to concurrent writers of its target
	// (each followed by a run on the new version, or, for the last, the stage's error).
	Conflicts int
	// Engine names the engine that carried the stage out ("" or "local": this process;
	// "spark": a Spark cluster), and Operations what it sent there.
	Engine     string
	Operations []Operation
	// Expectations are the results of the stage's expectations: its row checks'
	// counts, then the table checks (CheckExpectations).
	Expectations []ExpectationResult
}

// Operation is one statement a stage sent to another engine (Spark SQL over Spark
// Connect): the text, the ids the engine knows it by, the table version it committed
// (-1: none) and the operation metrics Delta recorded with that commit.
type Operation struct {
	SQL         string
	SessionID   string
	OperationID string
	Table       string
	Version     int64
	Metrics     map[string]string
}

// Stage is one unit of pipeline work. Run must be safe to call again after a failure or a
// crash at any point: it commits its progress with its data and does nothing twice.
type Stage interface {
	Name() string
	Kind() Kind
	Run(ctx context.Context, env *Env) (Result, error)
}

// timed runs a stage body (again after a conflict: runAgainOnConflict), records its
// duration in the result and prefixes an error with the stage's kind and name.
func timed(ctx context.Context, env *Env, kind Kind, name string, run func() (Result, error)) (Result, error) {
	start := time.Now()
	res, err := runAgainOnConflict(ctx, run)
	res.Duration = time.Since(start)
	if err != nil {
		env.removeUnusedCreates(ctx)
		return res, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return res, nil
}

// removeUnusedCreates removes the tables the failed stage created and never wrote to
// (delta.RemoveUnusedCreate), so that a first run that fails leaves no empty table
// behind; the stage holds their leases when it runs under an executor.
func (e *Env) removeUnusedCreates(ctx context.Context) {
	e.createdMu.Lock()
	created := e.created
	e.created = nil
	e.createdMu.Unlock()
	if len(created) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, t := range created {
		removed, err := delta.RemoveUnusedCreate(ctx, e.Warehouse, t.Path, e.Lineage)
		switch {
		case err != nil:
			e.Log().Warn("could not remove the empty table the failed stage created", "table", t.Name, "err", err)
		case removed:
			e.Log().Info("removed the empty table the failed stage created", "table", t.Name)
		}
	}
}

// conflictAttempts bounds the runs of a stage whose commit keeps losing to concurrent
// commits on its target; sameWorkAttempts those lost to commits of the stage's own work
// (a txn of its appIds), each of which means the other writer did part of it.
const (
	conflictAttempts = 3
	sameWorkAttempts = 100
)

// runAgainOnConflict runs a stage that writes one target (ingest, capture_history,
// scd1_merge, scd2_merge: the stages timed runs). Such a stage works on the target version it read first; when another
// writer commits to the target before the stage does, the commit fails with a
// *delta.ConflictError and the stage runs again on the new version (at most
// conflictAttempts runs in all); the result's notes say so. A second run of the same
// work then finds it done: its txn. A commit lost to the same work (another run of the
// stage loaded the same file or merged the same batch) is no failure: the stage runs
// again, which skips what the other run committed, without counting it against
// conflictAttempts, so that racing runs of one pipeline all succeed.
//
// The result counts the work of every run: an upsert ingest commits file by file, so a
// run that lost on one file has committed the files before it.
func runAgainOnConflict(ctx context.Context, run func() (Result, error)) (Result, error) {
	var earlier Result
	others, same := 0, 0
	for {
		res, err := run()
		var ce *delta.ConflictError
		conflict := err != nil && errors.As(err, &ce)
		if conflict && ce.Kind == delta.ConflictConcurrentTransaction {
			same++
		} else if conflict {
			others++
		}
		if conflict && others < conflictAttempts && same < sameWorkAttempts && ctx.Err() == nil {
			earlier.add(res)
			continue
		}
		if runs := others + same; runs > 0 {
			if conflict {
				runs--
			}
			if runs > 0 {
				earlier.add(res)
				earlier.VersionsRead = res.VersionsRead
				earlier.ChangesRead = res.ChangesRead
				res = earlier
				res.Notes = append(res.Notes, fmt.Sprintf("ran again after %d concurrent commits to the target", runs))
			}
		}
		res.Conflicts = others + same
		return res, err
	}
}

// add counts r's work (all but the versions read) into res.
func (res *Result) add(r Result) {
	res.RowsRead += r.RowsRead
	res.RowsWritten += r.RowsWritten
	res.RowsSkipped += r.RowsSkipped
	res.FilesRead += r.FilesRead
	res.FilesWritten += r.FilesWritten
	res.BytesRead += r.BytesRead
	res.BytesWritten += r.BytesWritten
	res.FilesDeleted += r.FilesDeleted
	res.BytesDeleted += r.BytesDeleted
	res.VersionsWritten = append(res.VersionsWritten, r.VersionsWritten...)
	res.Notes = append(res.Notes, r.Notes...)
	if r.Expectations != nil { // the counts of the last run that checked rows
		res.Expectations = r.Expectations
	}
}
