package scheduler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/pipelines"
)

// What a serve's pages and API ask besides runs: a rollback's plan and the rollback
// itself, a backfill's slots and the backfill (as the CLI's runs commands do, here in
// the serve).

// pipelineOf returns the loaded pipeline of a run id, with its store.
func (s *Scheduler) pipelineOf(id string) (*pipelines.Spec, *Store, error) {
	pipeline, _, err := ParseID(id)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	ps := s.pipes[pipeline]
	s.mu.Unlock()
	if ps == nil || ps.removed {
		return nil, nil, fmt.Errorf("run %s: pipeline %s is not loaded", id, pipeline)
	}
	return ps.spec, ps.store, nil
}

// PlanRollback works out the rollback of run id (Runner.PlanRollback), keeping the
// change feed readers of every loaded pipeline consistent.
func (s *Scheduler) PlanRollback(ctx context.Context, id string) (*RollbackPlan, *pipelines.Spec, error) {
	cur, st, err := s.pipelineOf(id)
	if err != nil {
		return nil, nil, err
	}
	rec, err := st.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	spec, err := SpecOf(rec, cur.Options())
	if err != nil {
		return nil, nil, err
	}
	plan, err := s.runner.PlanRollback(ctx, spec, rec, s.Pipelines())
	return plan, spec, err
}

// Rollback plans and starts the rollback of run id in this process and returns its
// record as soon as it is stored; the rollback goes on (Shutdown waits for it). A plan
// with problems is refused unless force.
func (s *Scheduler) Rollback(ctx context.Context, id string, force bool, by string) (*Record, error) {
	plan, spec, err := s.PlanRollback(ctx, id)
	if err != nil {
		return nil, err
	}
	if problems := plan.Problems(); len(problems) > 0 && !force {
		return nil, fmt.Errorf("run %s: %w: %s; force to roll back anyway", id, ErrLaterCommits, strings.Join(problems, "; "))
	}
	started := make(chan *Record, 1)
	failed := make(chan error, 1)
	s.wg.Go(func() {
		_, err := s.runner.Rollback(context.WithoutCancel(s.base), spec, plan, force, by, func(r *Record) { started <- r })
		if err != nil {
			s.log.Warn("rollback", "run", id, "err", err)
			failed <- err
		}
	})
	select {
	case r := <-started:
		return r, nil
	case err := <-failed:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// PlanBackfill lists the slots of a loaded pipeline from from to to and what a
// backfill does with each (see the package function).
func (s *Scheduler) PlanBackfill(ctx context.Context, name string, from, to time.Time, rerun bool) ([]BackfillSlot, error) {
	spec, st := s.loaded(name)
	if spec == nil {
		return nil, fmt.Errorf("pipeline %s is not loaded", name)
	}
	return PlanBackfill(ctx, st, spec, from, to, s.cfg.Now(), rerun)
}

// Backfill queues the runs of a backfill of a loaded pipeline: each slot to run gets its
// record (a new one, or the slot's as its next attempt) and waits its turn under
// max_active_runs, oldest first, here or in the serve that schedules the pipeline. It
// returns the slots and the records queued.
func (s *Scheduler) Backfill(ctx context.Context, name string, from, to time.Time, rerun bool, by string, params map[string]string) ([]BackfillSlot, []*Record, error) {
	spec, st := s.loaded(name)
	if spec == nil {
		return nil, nil, fmt.Errorf("pipeline %s is not loaded", name)
	}
	if _, err := spec.ResolveParams(params); err != nil {
		return nil, nil, err
	}
	slots, err := PlanBackfill(ctx, st, spec, from, to, s.cfg.Now(), rerun)
	if err != nil {
		return nil, nil, err
	}
	lease := s.handOffTo(ctx, st, name)
	var out []*Record
	for _, b := range slots {
		if b.Action == BackfillSkip {
			continue
		}
		rec, existing, err := s.runner.PrepareBackfill(ctx, st, spec, b, by, params)
		if err != nil {
			return slots, out, err
		}
		if lease != nil {
			rec.Heartbeat = nil
			if existing {
				err = st.Save(ctx, rec)
			} else {
				err = st.Create(ctx, rec)
			}
			if err == nil {
				err = st.Request(ctx, rec.ID, RequestRun, by, s.cfg.Now())
			}
			if err != nil {
				return slots, out, err
			}
			out = append(out, cloneRecord(rec))
			continue
		}
		if existing {
			err = s.runner.Adopt(ctx, spec, st, rec)
		} else {
			err = s.runner.Create(ctx, spec, st, rec)
		}
		if err != nil {
			return slots, out, err
		}
		out = append(out, cloneRecord(rec))
		s.mu.Lock()
		ps := s.pipes[name]
		s.mu.Unlock()
		s.enqueue(ps, rec.ID)
	}
	return slots, out, nil
}

func (s *Scheduler) loaded(name string) (*pipelines.Spec, *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps := s.pipes[name]; ps != nil && !ps.removed {
		return ps.spec, ps.store
	}
	return nil, nil
}
