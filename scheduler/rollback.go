package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Rollback undoes a run: every table it committed to is restored (Delta RESTORE) to the
// version it had before the run's first commit to it, in reverse stage order. This is
// the one place the scheduler reads and writes tables itself, hence its import of
// delta.

// RollbackTable is one table a rollback restores.
type RollbackTable struct {
	Table string `json:"table"`
	Stage string `json:"stage"` // the last stage of the run that wrote it
	// First and Last are the run's first and last commits to the table; RestoreTo is
	// First-1, Latest the table's version now.
	First     int64 `json:"first"`
	Last      int64 `json:"last"`
	RestoreTo int64 `json:"restore_to"`
	Latest    int64 `json:"latest"`
	// Later lists commits after the run's last one (a rollback would undo them too);
	// Readers the change feed readers that already read the run's versions.
	Later   []string `json:"later,omitempty"`
	Readers []string `json:"readers,omitempty"`
}

// RollbackPlan is what a rollback of a run would do.
type RollbackPlan struct {
	Run    *Record         `json:"-"`
	Tables []RollbackTable `json:"tables"`
}

// Blocked reports whether a later commit touched one of the tables.
func (p *RollbackPlan) Blocked() bool {
	for _, t := range p.Tables {
		if len(t.Later) > 0 {
			return true
		}
	}
	return false
}

// PlanRollback works out a rollback of rec, whose definition is spec (SpecOf); consumers
// are the change feed readers of every loaded pipeline.
func (r *Runner) PlanRollback(ctx context.Context, spec *pipelines.Spec, rec *Record, consumers []jobs.Consumer) (*RollbackPlan, error) {
	if rec.Status.Active() {
		return nil, fmt.Errorf("run %s is %s: cancel it or wait for it to end before rolling it back", rec.ID, rec.Status)
	}
	if rec.RolledBackBy != "" {
		return nil, fmt.Errorf("run %s was already rolled back by run %s", rec.ID, rec.RolledBackBy)
	}
	store, err := r.Store(ctx, spec)
	if err != nil {
		return nil, err
	}
	plan := &RollbackPlan{Run: rec}
	index := map[string]int{}
	for i := len(rec.Stages) - 1; i >= 0; i-- {
		s := rec.Stages[i]
		for _, v := range s.VersionsWritten {
			k, ok := index[v.Table]
			if !ok {
				k = len(plan.Tables)
				index[v.Table] = k
				plan.Tables = append(plan.Tables, RollbackTable{Table: v.Table, Stage: s.Name, First: v.Version, Last: v.Version})
			}
			t := &plan.Tables[k]
			t.First, t.Last = min(t.First, v.Version), max(t.Last, v.Version)
		}
	}
	if len(plan.Tables) == 0 {
		return nil, fmt.Errorf("run %s committed to no table: nothing to roll back", rec.ID)
	}
	for i := range plan.Tables {
		t := &plan.Tables[i]
		decl := spec.Table(t.Table)
		if decl == nil {
			return nil, fmt.Errorf("run %s wrote table %s, which its definition does not declare", rec.ID, t.Table)
		}
		t.RestoreTo = t.First - 1
		if t.RestoreTo < 0 {
			return nil, fmt.Errorf("run %s created table %s (its version 0): there is no version before it to restore", rec.ID, t.Table)
		}
		tbl, err := delta.Open(ctx, store.Objects(), decl.Path, r.deltaOptions(spec))
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Table, err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Table, err)
		}
		t.Latest = snap.Version()
		if t.Latest > t.Last {
			hist, err := tbl.History(ctx, int(t.Latest-t.Last))
			if err != nil {
				return nil, fmt.Errorf("table %s: %w", t.Table, err)
			}
			for j := len(hist) - 1; j >= 0; j-- {
				if h := hist[j]; h.Version > t.Last {
					t.Later = append(t.Later, describeCommit(h))
				}
			}
		}
		readers, err := r.readersOf(ctx, store, spec, decl, t.First, consumers)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Table, err)
		}
		t.Readers = readers
	}
	return plan, nil
}

func describeCommit(h delta.HistoryEntry) string {
	d := fmt.Sprintf("version %d (%s", h.Version, h.Operation)
	if l := h.Lineage; l != nil && l.RunID != "" {
		d += fmt.Sprintf(" by run %s, stage %s", l.RunID, l.Stage)
	} else if h.UserName != "" {
		d += " by " + h.UserName
	}
	return d + ")"
}

// readersOf names the change feed readers of table decl that have read its version
// first or later.
func (r *Runner) readersOf(ctx context.Context, store *Store, spec *pipelines.Spec, decl *jobs.Table, first int64, consumers []jobs.Consumer) ([]string, error) {
	if consumers == nil {
		consumers = spec.Consumers()
	}
	var out []string
	for _, c := range consumers {
		if c.Source.Path != decl.Path {
			continue
		}
		h, err := delta.Open(ctx, store.Objects(), c.History.Path, r.deltaOptions(spec))
		if err != nil {
			continue // its table does not exist yet: it read nothing
		}
		snap, err := h.Snapshot(ctx)
		if err != nil {
			continue
		}
		if last, ok := snap.TxnVersion(c.AppID); ok && last >= first {
			out = append(out, fmt.Sprintf("%s read %s through version %d into %s", c, decl.Name, last, c.History.Name))
		}
	}
	slices.Sort(out)
	return out, nil
}

func (r *Runner) deltaOptions(spec *pipelines.Spec) delta.Options {
	return delta.Options{Now: r.now, EngineInfo: r.cfg.EngineInfo, UserName: spec.Identity, Logger: r.log}
}

// ErrLaterCommits is the error of a rollback that a later commit blocks.
var ErrLaterCommits = errors.New("a later commit touched the tables")

// Rollback carries out a plan as a run of its own (trigger rollback of the run), whose
// record has a stage per table and links to the rolled back run, which links back. Each
// RESTORE commit carries the rollback's run id. It refuses a blocked plan unless force.
func (r *Runner) Rollback(ctx context.Context, spec *pipelines.Spec, plan *RollbackPlan, force bool, by string) (*Record, error) {
	if plan.Blocked() && !force {
		var later []string
		for _, t := range plan.Tables {
			for _, l := range t.Later {
				later = append(later, t.Table+": "+l)
			}
		}
		return nil, fmt.Errorf("run %s: %w since (%s); a rollback would undo them too: --force to roll back anyway", plan.Run.ID, ErrLaterCommits, strings.Join(later, "; "))
	}
	store, err := r.Store(ctx, spec)
	if err != nil {
		return nil, err
	}
	rec, err := r.Prepare(spec, Trigger{Kind: Rollback, Of: plan.Run.ID, By: by, Slot: plan.Run.Trigger.Slot, Params: plan.Run.Trigger.Params}, "")
	if err != nil {
		return nil, err
	}
	rec.Status, rec.Start = Running, rec.Created
	for _, t := range plan.Tables {
		rec.Stages = append(rec.Stages, StageRecord{Name: "restore " + t.Table, Kind: "restore", Status: Queued})
	}
	if err := store.Create(ctx, rec); err != nil {
		return nil, err
	}
	failed := false
	for i, t := range plan.Tables {
		s := &rec.Stages[i]
		if failed {
			s.Status, s.Error = Skipped, "an earlier restore failed"
			continue
		}
		now := r.now().UTC()
		s.Status, s.Start = Running, now
		s.Attempts = []Attempt{{N: 1, Start: now}}
		v, err := r.restore(ctx, store, spec, t, rec.ID)
		s.End, s.Attempts[0].End = r.now().UTC(), r.now().UTC()
		if err != nil {
			failed = true
			s.Status, s.Error, s.Attempts[0].Error = Failed, err.Error(), err.Error()
		} else {
			s.Status = Succeeded
			s.VersionsWritten = []TableVersion{{Table: t.Table, Version: v}}
			s.Notes = append(s.Notes, fmt.Sprintf("restored %s to version %d, its version before run %s (which committed versions %d..%d)", t.Table, t.RestoreTo, plan.Run.ID, t.First, t.Last))
			for _, rd := range t.Readers {
				s.Notes = append(s.Notes, "already consumed: "+rd)
			}
		}
		if err := store.Save(ctx, rec); err != nil {
			r.log.Warn("save run record", "run", rec.ID, "err", err)
		}
	}
	rec.End = r.now().UTC()
	rec.Status = Succeeded
	if failed {
		rec.Status, rec.Error = Failed, "a restore failed: the tables before it in the list are restored, the others are not"
	}
	if err := store.Save(ctx, rec); err != nil {
		return rec, err
	}
	if err := store.Link(ctx, plan.Run.ID, Rollback, rec.ID); err != nil {
		return rec, fmt.Errorf("link run %s to its rollback: %w", plan.Run.ID, err)
	}
	if failed {
		return rec, errors.New(rec.Error)
	}
	return rec, nil
}

func (r *Runner) restore(ctx context.Context, store *Store, spec *pipelines.Spec, t RollbackTable, runID string) (int64, error) {
	decl := spec.Table(t.Table)
	tbl, err := delta.Open(ctx, store.Objects(), decl.Path, r.deltaOptions(spec))
	if err != nil {
		return 0, err
	}
	v := t.RestoreTo
	nv, _, err := tbl.Restore(ctx, delta.RestoreOptions{Version: &v, Lineage: &delta.Lineage{Pipeline: spec.Name, Stage: "rollback", RunID: runID, Attempt: 1}})
	return nv, err
}
