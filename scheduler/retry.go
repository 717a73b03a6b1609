package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// RetryTrigger is the trigger of a retry of an ended run: its stages that did not
// succeed and everything downstream of them (among the stages the run had), with the
// run's slot and parameters. The stages that succeeded are not repeated: a retried
// stage's dependencies on them count as met. spec is the run's definition (SpecOf): a
// retry runs the pipeline as the run it retries did.
func RetryTrigger(rec *Record, spec *pipelines.Spec, by string) (Trigger, error) {
	if rec.Status.Active() {
		return Trigger{}, fmt.Errorf("run %s is %s: wait for it to end, or cancel it", rec.ID, rec.Status)
	}
	if rec.RolledBackBy != "" {
		return Trigger{}, fmt.Errorf("run %s was rolled back by run %s: a retry would not undo the rollback; trigger a new run", rec.ID, rec.RolledBackBy)
	}
	var failed, had []string
	for _, s := range rec.Stages {
		had = append(had, s.Name)
		if s.Status != Succeeded {
			failed = append(failed, s.Name)
		}
	}
	switch {
	case len(rec.Stages) == 0 && rec.Status == Succeeded:
		return Trigger{}, fmt.Errorf("run %s succeeded: nothing to retry", rec.ID)
	case len(rec.Stages) == 0: // it never started a stage (skipped, failed to bind): all of them
		for _, st := range spec.Stages {
			failed = append(failed, st.Name)
		}
		had = failed
	case len(failed) == 0:
		return Trigger{}, fmt.Errorf("run %s: every stage succeeded: nothing to retry", rec.ID)
	}
	nodes := make([]dag.Node, len(spec.Stages))
	for i, st := range spec.Stages {
		nodes[i] = dag.Node{Name: st.Name, DependsOn: st.DependsOn, Task: dag.TaskFunc(nil)}
	}
	g, err := dag.New(nodes)
	if err != nil {
		return Trigger{}, err
	}
	down, err := g.Downstream(failed...)
	if err != nil {
		return Trigger{}, fmt.Errorf("run %s: its stages are not those of its definition: %w", rec.ID, err)
	}
	down = slices.DeleteFunc(down, func(s string) bool { return !slices.Contains(had, s) })
	return Trigger{Kind: Retry, Of: rec.ID, By: by, Slot: rec.Trigger.Slot, Params: rec.Trigger.Params, Stages: down}, nil
}

// Link records on an ended run that another run retried or rolled it back (kind Retry or
// Rollback), so the two records name each other, and the state of that run (a retry's
// as it changes: its record and index entry show "retried: succeeded").
func (s *Store) Link(ctx context.Context, of string, kind TriggerKind, by string, status Status) error {
	rec, err := s.Get(ctx, of)
	if err != nil {
		return err
	}
	switch kind {
	case Retry:
		if !slices.Contains(rec.RetriedBy, by) {
			rec.RetriedBy = append(rec.RetriedBy, by)
		}
		if rec.RetriedBy[len(rec.RetriedBy)-1] != by {
			return nil // an older retry: the newest one's state is shown
		}
		if rec.RetryStatus == status {
			return nil
		}
		rec.RetryStatus = status
	case Rollback:
		rec.RolledBackBy = by
	}
	return s.Save(ctx, rec)
}

// noteRetry tells the run a retry is of that the retry's state changed.
func (s *Store) noteRetry(ctx context.Context, rec *Record) error {
	if rec.Trigger.Kind != Retry || rec.Trigger.Of == "" {
		return nil
	}
	return s.Link(ctx, rec.Trigger.Of, Retry, rec.ID, rec.Status)
}

// RetryConflictError is the error of a retry asked for while another retry of the run
// is active or has succeeded: one retry per run at a time.
type RetryConflictError struct {
	Of, Retry string
	Status    Status
}

func (e *RetryConflictError) Error() string {
	if e.Status == Succeeded {
		return fmt.Sprintf("run %s was retried by run %s, which succeeded: nothing to retry", e.Of, e.Retry)
	}
	return fmt.Sprintf("run %s is being retried by run %s (%s): one retry at a time", e.Of, e.Retry, e.Status)
}

// PrepareRetry makes the queued record of a retry of ended run old (RetryTrigger), whose
// definition is spec, as its next retry: its id is RetryID(old, n) for the first n
// without a record. A retry of old that is active or succeeded gives a
// *RetryConflictError naming it. Two requests at once make the same id: the first to
// create it (Create, put-if-absent) runs it, the other gets objectstore.ErrExist, which
// RetryConflict turns into the conflict.
func (r *Runner) PrepareRetry(ctx context.Context, store *Store, old *Record, spec *pipelines.Spec, by string) (*Record, error) {
	trig, err := RetryTrigger(old, spec, by)
	if err != nil {
		return nil, err
	}
	for n := 1; ; n++ {
		id := RetryID(old.ID, n)
		ex, err := store.Get(ctx, id)
		if errors.Is(err, objectstore.ErrNotExist) {
			return r.Prepare(spec, trig, id)
		}
		if err != nil {
			return nil, err
		}
		if ex.Status.Active() || ex.Status == Succeeded {
			return nil, &RetryConflictError{Of: old.ID, Retry: ex.ID, Status: ex.Status}
		}
		if n >= 999 {
			return nil, fmt.Errorf("run %s was retried %d times: trigger a new run", old.ID, n)
		}
	}
}

// RetryConflict turns the error of creating a retry's record that another request
// created first into the *RetryConflictError that names it; other errors are returned
// as they are.
func RetryConflict(ctx context.Context, store *Store, rec *Record, err error) error {
	if rec.Trigger.Kind != Retry || !errors.Is(err, objectstore.ErrExist) {
		return err
	}
	status := Queued
	if ex, gerr := store.Get(ctx, rec.ID); gerr == nil {
		status = ex.Status
	}
	return &RetryConflictError{Of: rec.Trigger.Of, Retry: rec.ID, Status: status}
}

// Backfill actions of a slot.
const (
	BackfillRun   = "run"   // no record yet: a new run of the slot
	BackfillRerun = "rerun" // a record that did not succeed (or --rerun): its next attempt
	BackfillSkip  = "skip"  // succeeded already (without --rerun), or active
)

// BackfillSlot is one slot of a backfill and what the backfill does with it.
type BackfillSlot struct {
	Slot     time.Time
	ID       string
	Action   string
	Existing Status // of the slot's record, if it has one
	Outcome  string // of the slot's record as a person reads it (Outcome): "retried: succeeded"
	Attempt  int    // the attempt the backfill would make
}

// maxBackfillSlots bounds one backfill.
const maxBackfillSlots = 10000

// PlanBackfill lists the pipeline's slots from from to to (both included, and not after
// now) with what a backfill does with each: a slot without a record runs; a slot whose
// run did not succeed runs again as its next attempt; a succeeded one is skipped unless
// rerun; an active one is skipped.
func PlanBackfill(ctx context.Context, store *Store, spec *pipelines.Spec, from, to, now time.Time, rerun bool) ([]BackfillSlot, error) {
	if spec.Cron == nil {
		return nil, fmt.Errorf("pipeline %s has no schedule: a backfill runs its past slots", spec.Name)
	}
	if to.After(now) {
		to = now
	}
	if to.Before(from) {
		return nil, fmt.Errorf("backfill range: --to %s is before --from %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	sched := spec.Cron
	if sched.Every() > 0 {
		anchor, err := store.Anchor(ctx, spec.Name, now)
		if err != nil {
			return nil, err
		}
		sched = sched.Anchored(anchor)
	}
	slots, more := sched.Between(from.Add(-time.Nanosecond), to, maxBackfillSlots)
	if more {
		return nil, fmt.Errorf("backfill range holds more than %d slots of %q: split it", maxBackfillSlots, spec.Schedule)
	}
	out := make([]BackfillSlot, 0, len(slots))
	for _, t := range slots {
		b := BackfillSlot{Slot: t, ID: SlotID(spec.Name, t), Action: BackfillRun, Attempt: 1}
		rec, err := store.Get(ctx, b.ID)
		switch {
		case errors.Is(err, objectstore.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			b.Existing, b.Attempt, b.Outcome = rec.Status, rec.Attempt+1, Outcome(rec.Status, rec.RetryStatus, rec.RolledBackBy != "")
			switch {
			case rec.Status.Active(), rec.RetryStatus.Active():
				b.Action, b.Attempt = BackfillSkip, rec.Attempt
			case (rec.Status == Succeeded || rec.RetryStatus == Succeeded) && !rerun:
				b.Action, b.Attempt = BackfillSkip, rec.Attempt // its retry succeeded: done
			default:
				b.Action = BackfillRerun
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// PrepareBackfill makes the queued record of a backfill slot: a new one, or the slot's
// record as its next attempt. The caller creates (Runner.Create) a new one or adopts
// (Runner.Adopt) an existing one.
func (r *Runner) PrepareBackfill(ctx context.Context, store *Store, spec *pipelines.Spec, b BackfillSlot, by string, params map[string]string) (rec *Record, existing bool, err error) {
	trig := Trigger{Kind: Backfill, Slot: b.Slot, By: by, Params: params}
	rec, err = r.Prepare(spec, trig, b.ID)
	if err != nil || b.Action == BackfillRun {
		return rec, false, err
	}
	old, err := store.Get(ctx, b.ID)
	if err != nil {
		return nil, false, err
	}
	old.startNewAttempt() // the earlier attempts stay in the record
	rec.Seq, rec.Attempt, rec.Created, rec.Attempts = old.Seq, old.Attempt, old.Created, old.Attempts
	rec.RetriedBy, rec.RetryStatus = old.RetriedBy, old.RetryStatus
	return rec, true, nil
}
