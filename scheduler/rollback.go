package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Rollback undoes a run as a run of its own (trigger rollback), carrying out the plan
// of PlanRollback (rollback_plan.go): the one place the scheduler reads and writes
// tables itself, hence its import of delta.

func (r *Runner) deltaOptions(spec *pipelines.Spec) delta.Options {
	return delta.Options{Now: r.now, EngineInfo: r.cfg.EngineInfo, UserName: spec.Identity, Logger: r.log}
}

// ErrLaterCommits is the error of a rollback that its plan's problems block (a later
// commit touched the tables, or a reader cannot be kept exact).
var ErrLaterCommits = errors.New("the rollback would not be exact")

// RollbackStageKind is the kind of a rollback run's stages: one per table it restores
// or whose readers' progress it sets.
const RollbackStageKind = "restore"

// Rollback carries out a plan as a run of its own (trigger rollback of the run), whose
// record has a stage per table restored (or whose readers' progress is set) and links
// to the rolled back run, which links back. Every commit carries the rollback's run id.
// It refuses a plan with problems unless force. started, when set, is called once the
// record is stored (the web answers then, and the rollback goes on).
func (r *Runner) Rollback(ctx context.Context, spec *pipelines.Spec, plan *RollbackPlan, force bool, by string, started func(*Record)) (*Record, error) {
	if problems := plan.Problems(); len(problems) > 0 && !force {
		return nil, fmt.Errorf("run %s: %w: %s; --force to roll back anyway", plan.Run.ID, ErrLaterCommits, strings.Join(problems, "; "))
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
	var todo []int
	for i, t := range plan.Tables {
		var s StageRecord
		switch t.Action {
		case RollbackKeep:
			continue
		case RollbackRestore:
			s = StageRecord{Name: "restore " + t.Table, Kind: RollbackStageKind, Status: Queued}
		default:
			s = StageRecord{Name: "progress of " + t.Table, Kind: RollbackStageKind, Status: Queued}
		}
		if n := len(rec.Stages); n > 0 { // one after the other: the page draws them so
			s.DependsOn = []string{rec.Stages[n-1].Name}
		}
		rec.Stages = append(rec.Stages, s)
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return nil, fmt.Errorf("run %s changed only append-only histories, which a rollback keeps: nothing to roll back", plan.Run.ID)
	}
	rec.Notes = plan.notes()
	if err := store.Create(ctx, rec); err != nil {
		return nil, err
	}
	changed := func() { // the live pages follow the rollback as they follow any run
		if r.cfg.OnChange != nil {
			r.cfg.OnChange(cloneRecord(rec))
		}
	}
	changed()
	if started != nil {
		started(cloneRecord(rec))
	}
	restored := map[string]int64{} // table path → its RESTORE version
	failed := false
	for k, i := range todo {
		t := plan.Tables[i]
		s := &rec.Stages[k]
		if failed {
			s.Status, s.Reason = Skipped, "an earlier step of the rollback failed"
			continue
		}
		now := r.now().UTC()
		s.Status, s.Start = Running, now
		s.Attempts = []Attempt{{N: 1, Start: now}}
		notes, v, err := r.rollbackTable(ctx, store, spec, t, restored, rec.ID)
		end := r.now().UTC()
		s.End, s.Attempts[0].End = end, end
		if err != nil {
			failed = true
			s.Status, s.Error, s.Attempts[0].Error = Failed, err.Error(), err.Error()
		} else {
			s.Status = Succeeded
			if !t.Internal { // a declared table: the page links to it
				s.VersionsWritten = []TableVersion{{Table: t.Table, Version: v}}
			}
			s.Notes = notes
			restored[t.path] = v
		}
		if err := store.Save(ctx, rec); err != nil {
			r.log.Warn("save run record", "run", rec.ID, "err", err)
		}
		changed()
	}
	rec.End = r.now().UTC()
	rec.Status = Succeeded
	if failed {
		rec.Status, rec.Error = Failed, "a step of the rollback failed: the steps before it are done, the others are not (see the stages)"
	}
	if !failed { // linked before the rollback's record is final: whoever sees it ended sees the link
		if err := store.Link(ctx, plan.Run.ID, Rollback, rec.ID, rec.Status); err != nil {
			rec.Status, rec.Error = Failed, fmt.Sprintf("the tables are rolled back, but run %s could not be marked rolled back: %v", plan.Run.ID, err)
			failed = true
		}
	}
	if err := store.Save(ctx, rec); err != nil {
		return rec, err
	}
	changed()
	r.logEnd(rec)
	if failed {
		return rec, errors.New(rec.Error)
	}
	return rec, nil
}

// notes says, for the rollback's record, what becomes of the tables it keeps and of
// the readers of the tables it restores.
func (p *RollbackPlan) notes() []string {
	var out []string
	for _, t := range p.Tables {
		if t.Action == RollbackKeep {
			out = append(out, fmt.Sprintf("%s kept: %s", t.Table, t.Why))
		}
	}
	for _, rd := range p.Readers {
		n := fmt.Sprintf("%s (stage %s of pipeline %s, reads %s): %s", rd.Action, rd.Stage, rd.Pipeline, rd.Source, rd.Detail)
		if rd.Problem != "" {
			n += " (not exact: " + rd.Problem + ")"
		}
		out = append(out, n)
	}
	return out
}

// rollbackTable carries out one table's step: a RESTORE (with its readers' progress and,
// unless it is an ingest target, its writers' progress back), or a progress-only commit.
// restored holds the RESTORE versions of the tables done before it.
func (r *Runner) rollbackTable(ctx context.Context, store *Store, spec *pipelines.Spec, t RollbackTable, restored map[string]int64, runID string) ([]string, int64, error) {
	tbl, err := delta.Open(ctx, store.Objects(), t.path, r.deltaOptions(spec))
	if err != nil {
		return nil, 0, err
	}
	lineage := &delta.Lineage{Pipeline: spec.Name, Stage: "rollback", RunID: runID, Attempt: 1}
	txns := map[string]int64{}
	var notes []string
	for _, ps := range t.Progress {
		v, ok := restored[ps.sourcePath]
		if !ok {
			return nil, 0, fmt.Errorf("the progress of %s needs the RESTORE of %s, which did not happen", ps.Reader, ps.Source)
		}
		txns[ps.AppID] = v
		notes = append(notes, fmt.Sprintf("progress of %s set to version %d of %s (its RESTORE): it never reads the run's versions nor their reversal", ps.Reader, v, ps.Source))
	}
	if t.Action == RollbackProgress {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			return nil, 0, err
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "SET PROGRESS", Lineage: lineage,
			OperationParameters: map[string]any{"reason": "rollback of run " + runID}})
		for app, v := range txns {
			tx.SetTxn(app, v)
		}
		v, err := tx.Commit(ctx)
		return notes, v, err
	}
	to := t.RestoreTo
	v, m, err := tbl.Restore(ctx, delta.RestoreOptions{Version: &to, Lineage: lineage, Keys: t.Keys, ResetTxns: t.ResetProgress, Txns: txns})
	if err != nil {
		return nil, 0, err
	}
	head := fmt.Sprintf("restored %s to version %d, as version %d (%s)", t.Table, to, v, t.Why)
	switch {
	case !m.ChangeData: // no change data feed: nothing to say of its rows
	case m.FileLevelChanges:
		head += "; its change feed at version " + fmt.Sprint(v) + " lists every row of the files removed and brought back (the partitioning changed)"
	case m.RowsDeleted+m.RowsInserted+m.RowsUpdated > 0:
		head += fmt.Sprintf("; its change feed at version %d holds the net changes: %d deleted, %d inserted, %d changed back", v, m.RowsDeleted, m.RowsInserted, m.RowsUpdated)
	default:
		head += "; no row changed"
	}
	notes = append([]string{head}, notes...)
	if len(m.TxnsReset) > 0 {
		notes = append(notes, fmt.Sprintf("the progress of %d writers of %s went back with it", len(m.TxnsReset), t.Table))
	}
	return notes, v, nil
}
