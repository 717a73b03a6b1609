package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

// A Plan is what one attempt of a stage will do, decided once from the tables as they
// are when it starts and written in terms any engine can carry out: the versions to
// read, the keys, columns and predicates, the retention, and the progress (txn) that
// commits with the data. The local engine runs the stage's Go code, which decides the
// same things the same way (the plan functions below are the ones its Run uses); the
// Spark engine turns a plan into Delta SQL (package executor).
//
// Invariant: a plan whose work is committed says so (UpToDate), read from the target's
// Delta log: the stage's txn there is at least the plan's version. So a plan made
// again after a crash, on any engine, never does committed work twice.
type Plan struct {
	Stage string
	Kind  Kind
	// Writes are the declared tables the stage commits to.
	Writes []string
	// UpToDate says there is nothing to do; Result.Notes say why.
	UpToDate bool
	// Txn is the progress committed with the data (nil for vacuum).
	Txn *PlanTxn
	// Result holds what is known before the work: versions and change ranges read,
	// notes.
	Result Result
	// Exactly one of the kind plans is set.
	Capture *CapturePlan
	Merge   *MergePlan
	Vacuum  *VacuumPlan
	Ingest  *IngestPlan
}

// PlanTxn is a txn action: the work is committed once the table's txn for AppID is at
// least Version.
type PlanTxn struct {
	Table   PlanTable
	AppID   string
	Version int64
}

// PlanTable is a declared table in a plan: its name, place below the warehouse and
// schema (as it exists, or as declared when it does not yet).
type PlanTable struct {
	Name   string
	Path   string
	Schema *delta.StructType
}

func planTable(decl *Table, snap *delta.Snapshot) PlanTable {
	pt := PlanTable{Name: decl.Name, Path: decl.Path, Schema: decl.Schema}
	if snap != nil {
		pt.Schema = snap.Schema()
	}
	return pt
}

// Planner is a stage that can say what it will do without doing it.
type Planner interface {
	Stage
	Plan(ctx context.Context, env *Env) (*Plan, error)
}

var (
	_ Planner = (*CaptureHistory)(nil)
	_ Planner = (*SCD2Merge)(nil)
	_ Planner = (*SCD1Merge)(nil)
	_ Planner = (*Vacuum)(nil)
	_ Planner = (*Ingest)(nil)
)

// Committed reports whether a plan's txn is in its table's log (its work was committed,
// by any engine).
func Committed(ctx context.Context, env *Env, txn *PlanTxn) (bool, error) {
	if txn == nil {
		return false, nil
	}
	ok, err := delta.Exists(ctx, env.Warehouse, txn.Table.Path)
	if err != nil || !ok {
		return false, err
	}
	t, err := delta.Open(ctx, env.Warehouse, txn.Table.Path, env.Delta)
	if err != nil {
		return false, fmt.Errorf("table %s: %w", txn.Table.Name, err)
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return false, fmt.Errorf("table %s: %w", txn.Table.Name, err)
	}
	v, ok := snap.TxnVersion(txn.AppID)
	return ok && v >= txn.Version, nil
}

// CapturePlan is a capture_history run: the source's change feed over (From-1, Through]
// appended to the history table.
type CapturePlan struct {
	Source, Target PlanTable
	From, Through  int64
	IgnoreDeletes  bool
}

// captureRange is the range a capture_history run reads: from the version after the
// last captured one (or the configured or change-feed start) through the source's
// latest version.
func (s *CaptureHistory) captureRange(ctx context.Context, f *flow) (from, latest int64, err error) {
	latest = f.srcSnap.Version()
	if last, ok := f.dstSnap.TxnVersion(s.AppID()); ok {
		return last + 1, latest, nil
	}
	if s.cfg.StartingVersion != nil {
		return *s.cfg.StartingVersion, latest, nil
	}
	if from, err = f.src.ChangeDataFeedStart(ctx); err != nil {
		return 0, 0, fmt.Errorf("source %s: %w", f.srcDecl.Name, err)
	}
	return from, latest, nil
}

// Plan implements Planner.
func (s *CaptureHistory) Plan(ctx context.Context, env *Env) (*Plan, error) {
	f, err := env.openFlow(ctx, s.cfg.Source, s.cfg.Target)
	if err != nil {
		return nil, err
	}
	from, latest, err := s.captureRange(ctx, f)
	if err != nil {
		return nil, err
	}
	p := &Plan{Stage: s.name, Kind: s.Kind(), Writes: []string{s.cfg.Target}}
	p.Result.VersionsRead = []TableVersion{{Table: f.srcDecl.Name, Version: latest}}
	if from > latest {
		p.UpToDate = true
		p.Result.Notes = append(p.Result.Notes, fmt.Sprintf("up to date: %s captured through version %d", f.srcDecl.Name, latest))
		return p, nil
	}
	if !feedOn(f.srcSnap) {
		return nil, fmt.Errorf("source %s: the change data feed is off (set %s: true)", f.srcDecl.Name, delta.PropEnableChangeDataFeed)
	}
	p.Result.ChangesRead = []ChangeRange{{Table: f.srcDecl.Name, After: from - 1, Through: latest}}
	target := planTable(f.dstDecl, f.dstSnap)
	p.Txn = &PlanTxn{Table: target, AppID: s.AppID(), Version: latest}
	p.Capture = &CapturePlan{Source: planTable(f.srcDecl, f.srcSnap), Target: target, From: from, Through: latest, IgnoreDeletes: s.cfg.IgnoreDeletes}
	return p, nil
}

// VacuumPlan is a vacuum run: per table, the retention to apply, with the consumers'
// needs already folded in, and what a local dry run found it would delete.
type VacuumPlan struct {
	Tables []VacuumTable
	DryRun bool
}

// VacuumTable is one table of a vacuum plan.
type VacuumTable struct {
	Table PlanTable
	// Retain is the retention that keeps what the consumers still need: the configured
	// (or the table's) retention, raised to reach back to the commit of KeepFrom.
	Retain time.Duration
	// Force: Retain is shorter than the table's delta.deletedFileRetentionDuration, and
	// the stage allows it.
	Force bool
	// KeepFrom is the oldest version a change feed consumer still needs (-1: none),
	// KeepFor who.
	KeepFrom int64
	KeepFor  string
	// WouldDelete are the files a vacuum with this retention deletes (a dry run, made
	// while planning); none means there is nothing to do.
	WouldDelete []string
	Bytes       int64
}

// Plan implements Planner: per table, a dry run of the vacuum the stage would do,
// clamped for the consumers, and the retention in hours that keeps the same files.
func (s *Vacuum) Plan(ctx context.Context, env *Env) (*Plan, error) {
	p := &Plan{Stage: s.name, Kind: s.Kind(), Writes: s.cfg.TableNames, Vacuum: &VacuumPlan{DryRun: s.cfg.DryRun}}
	for _, name := range s.cfg.TableNames {
		decl, err := env.declared(name)
		if err != nil {
			return nil, err
		}
		if ok, err := env.tableExists(ctx, decl); err != nil {
			return nil, err
		} else if !ok {
			p.Result.Notes = append(p.Result.Notes, fmt.Sprintf("%s: does not exist yet, nothing to vacuum", name))
			continue
		}
		tbl, err := env.openDeclared(ctx, decl)
		if err != nil {
			return nil, err
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		vt := VacuumTable{Table: planTable(decl, snap), KeepFrom: -1, Force: s.cfg.Force}
		opts := delta.VacuumOptions{Force: s.cfg.Force, DryRun: true}
		if s.cfg.Retain != nil {
			d := time.Duration(*s.cfg.Retain)
			opts.Retain = &d
		}
		keep, who, err := KeepFrom(ctx, env, s.consumers, tbl, decl)
		if err != nil {
			return nil, err
		}
		if keep >= 0 {
			opts.KeepVersionsFrom, opts.KeepFor = &keep, who
			vt.KeepFrom, vt.KeepFor = keep, who
		}
		vr, err := tbl.Vacuum(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", name, err)
		}
		vt.Retain, vt.WouldDelete, vt.Bytes = vr.Retention, vr.FilesDeleted, vr.BytesDeleted
		if keep >= 0 && keep <= snap.Version() {
			// Files removed at or after the consumer's version stay: reach back to its commit.
			at, err := tbl.SnapshotAt(ctx, keep)
			if err != nil {
				return nil, fmt.Errorf("table %s: version %d that %s needs: %w", name, keep, who, err)
			}
			if back := env.Now().Sub(at.Timestamp()); back > vt.Retain {
				vt.Retain = back
			}
		}
		p.Vacuum.Tables = append(p.Vacuum.Tables, vt)
	}
	return p, nil
}
