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
// Rollback), so the two records name each other.
func (s *Store) Link(ctx context.Context, of string, kind TriggerKind, by string) error {
	rec, err := s.Get(ctx, of)
	if err != nil {
		return err
	}
	switch kind {
	case Retry:
		if !slices.Contains(rec.RetriedBy, by) {
			rec.RetriedBy = append(rec.RetriedBy, by)
		}
	case Rollback:
		rec.RolledBackBy = by
	}
	return s.Save(ctx, rec)
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
			b.Existing, b.Attempt = rec.Status, rec.Attempt+1
			switch {
			case rec.Status.Active(), rec.Status == Succeeded && !rerun:
				b.Action, b.Attempt = BackfillSkip, rec.Attempt
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
	rec.Seq, rec.Attempt, rec.Created = old.Seq, old.Attempt+1, old.Created
	return rec, true, nil
}
