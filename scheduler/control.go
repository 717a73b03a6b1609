package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/orchestrator-io/orchestrator/cron"
)

// What a serve's other front ends (the web pages and API) ask of the scheduler: the
// record of a run as it is now, the next slot, and a run, retry or cancel that goes to
// whoever schedules the pipeline, as the CLI's runs commands do.

// SlotEvent tells Config.OnSlot how a slot was handled.
type SlotEvent struct {
	Pipeline string
	Slot     time.Time
	// Lag is how long after its instant the slot was handled.
	Lag time.Duration
	// Missed: the slot came while no scheduler ran (it followed the catch-up policy).
	Missed bool
	// Skipped: it was recorded as skipped rather than run.
	Skipped bool
	// Count is how many slots the event stands for: 1, or the slots of a range recorded
	// as one skipped record (Slot is the range's first).
	Count int
}

// StoreOf returns the run store of a loaded pipeline, or nil.
func (s *Scheduler) StoreOf(name string) *Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps := s.pipes[name]; ps != nil && !ps.removed {
		return ps.store
	}
	return nil
}

// Record returns the record of run id as it is now: the live one when this process runs
// it, else the stored one (its pipeline must be loaded).
func (s *Scheduler) Record(ctx context.Context, id string) (*Record, error) {
	if rec, ok := s.runner.Record(id); ok {
		return rec, nil
	}
	pipeline, _, err := ParseID(id)
	if err != nil {
		return nil, err
	}
	st := s.StoreOf(pipeline)
	if st == nil {
		return nil, fmt.Errorf("run %s: pipeline %s is not loaded", id, pipeline)
	}
	return st.Get(ctx, id)
}

// NextSlot returns the pipeline's first slot after after (zero without a schedule, or
// when it never fires again). An @every schedule counts from its anchor once the
// scheduler has planned the pipeline.
func (s *Scheduler) NextSlot(name string, after time.Time) time.Time {
	s.mu.Lock()
	ps := s.pipes[name]
	var c *cron.Schedule
	if ps != nil && !ps.removed {
		c = ps.spec.Cron
		if ps.loaded && ps.sched != nil {
			c = ps.sched
		}
	}
	s.mu.Unlock()
	if c == nil {
		return time.Time{}
	}
	return c.Next(after)
}

// holds reports whether this scheduler holds the lease of st.
func (s *Scheduler) holds(st *Store) bool {
	s.mu.Lock()
	l := s.leases[st]
	s.mu.Unlock()
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// handOffTo returns the live lease of another process that schedules the pipeline, when
// this scheduler does not hold st's lease.
func (s *Scheduler) handOffTo(ctx context.Context, st *Store, pipeline string) *LeaseBody {
	if s.holds(st) {
		return nil
	}
	lease, err := st.LiveLease(ctx)
	if err != nil || lease == nil || !lease.Schedules(pipeline) {
		return nil
	}
	return lease
}

// Submit starts a run of a loaded pipeline for trig (a manual run): in this process when
// it holds the lease of the pipeline's warehouse or no live serve schedules the
// pipeline (Trigger), else handed to the serve that does, through the run store. It
// returns the record as created (queued).
func (s *Scheduler) Submit(ctx context.Context, name string, trig Trigger) (*Record, error) {
	s.mu.Lock()
	ps := s.pipes[name]
	s.mu.Unlock()
	if ps == nil || ps.removed {
		return nil, fmt.Errorf("pipeline %s is not loaded", name)
	}
	if lease := s.handOffTo(ctx, ps.store, name); lease != nil {
		rec, err := s.runner.Prepare(ps.spec, trig, "")
		if err != nil {
			return nil, err
		}
		return rec, s.handOff(ctx, ps.store, rec, trig.By)
	}
	return s.Trigger(ctx, name, trig)
}

// handOff stores a queued record with no heartbeat and asks the lease holder to run it.
func (s *Scheduler) handOff(ctx context.Context, st *Store, rec *Record, by string) error {
	rec.Heartbeat = nil // no one runs it until the holder takes it
	if err := st.Create(ctx, rec); err != nil {
		return err
	}
	return st.Request(ctx, rec.ID, RequestRun, by, s.cfg.Now())
}

// Retry starts a retry of ended run id (RetryTrigger: its stages that did not succeed
// and their downstream, with its definition, slot and parameters), here or in the serve
// that schedules the pipeline as Submit does; the two records link each other.
func (s *Scheduler) Retry(ctx context.Context, id, by string) (*Record, error) {
	pipeline, _, err := ParseID(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ps := s.pipes[pipeline]
	s.mu.Unlock()
	if ps == nil || ps.removed {
		return nil, fmt.Errorf("run %s: pipeline %s is not loaded", id, pipeline)
	}
	old, err := ps.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	spec, err := SpecOf(old, ps.spec.Options())
	if err != nil {
		return nil, err
	}
	rec, err := s.runner.PrepareRetry(ctx, ps.store, old, spec, by)
	if err != nil {
		return nil, err
	}
	if lease := s.handOffTo(ctx, ps.store, pipeline); lease != nil {
		if err := s.handOff(ctx, ps.store, rec, by); err != nil {
			return nil, RetryConflict(ctx, ps.store, rec, err)
		}
		return rec, ps.store.Link(ctx, old.ID, Retry, rec.ID, Queued)
	}
	if err := s.runner.Create(ctx, spec, ps.store, rec); err != nil {
		return nil, RetryConflict(ctx, ps.store, rec, err)
	}
	out := cloneRecord(rec) // rec is the run's own from now on
	if err := ps.store.Link(ctx, old.ID, Retry, rec.ID, Queued); err != nil {
		s.log.Warn("link a run to its retry", "run", old.ID, "retry", rec.ID, "err", err)
	}
	s.enqueue(ps, rec.ID)
	return out, nil
}

// CancelRun cancels active run id wherever it runs, as `runs cancel` does: here (Cancel),
// through a request to the serve holding the lease, or, when no process keeps it alive,
// by marking its record cancelled. It says what it did.
func (s *Scheduler) CancelRun(ctx context.Context, id, by string) (string, error) {
	if ok, err := s.Cancel(ctx, id, by); ok || err != nil {
		return "cancelled", err
	}
	pipeline, _, err := ParseID(id)
	if err != nil {
		return "", err
	}
	st := s.StoreOf(pipeline)
	if st == nil {
		return "", fmt.Errorf("run %s: pipeline %s is not loaded", id, pipeline)
	}
	rec, err := st.Get(ctx, id)
	if err != nil {
		return "", err
	}
	if !rec.Status.Active() {
		return "", fmt.Errorf("run %s is %s already", id, rec.Status)
	}
	now := s.cfg.Now()
	lease, _ := st.LiveLease(ctx)
	hb := rec.Heartbeat
	switch {
	case lease != nil && lease.Holder.Instance != s.runner.Identity().Instance && (hb == nil || hb.Instance == lease.Holder.Instance):
		if err := st.Request(ctx, id, RequestCancel, by, now); err != nil {
			return "", err
		}
		return fmt.Sprintf("cancel requested from the serve on %s (pid %d)", lease.Holder.Host, lease.Holder.PID), nil
	case hb != nil && now.Sub(hb.Time) < s.cfg.HeartbeatTimeout:
		return "", fmt.Errorf("run %s runs in process %d on %s, which is not a serve: stop it there", id, hb.PID, hb.Host)
	}
	rec.Status, rec.Reason, rec.End = Cancelled, "cancelled by "+by+" (no process was running it)", now.UTC()
	if err := st.Save(ctx, rec); err != nil {
		return "", err
	}
	_ = st.noteRetry(ctx, rec)
	return "cancelled", nil
}

// slotEvent tells Config.OnSlot, if set, how a slot was handled.
func (s *Scheduler) slotEvent(pipeline string, slot, now time.Time, missed, skipped bool) {
	s.slotEvents(pipeline, slot, now, missed, skipped, 1)
}

func (s *Scheduler) slotEvents(pipeline string, slot, now time.Time, missed, skipped bool, n int) {
	if s.cfg.OnSlot != nil {
		s.cfg.OnSlot(SlotEvent{Pipeline: pipeline, Slot: slot, Lag: now.Sub(slot), Missed: missed, Skipped: skipped, Count: n})
	}
}
