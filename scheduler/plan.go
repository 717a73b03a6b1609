package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/cron"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// planStore plans the pipelines of one warehouse whose lease this scheduler holds.
func (s *Scheduler) planStore(ctx context.Context, st *Store, now time.Time) {
	s.mu.Lock()
	var todo []*pipeState
	for _, ps := range s.pipes {
		if ps.store == st && !ps.removed {
			todo = append(todo, ps)
		}
	}
	s.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].spec.Name < todo[j].spec.Name })
	s.mu.Lock()
	m := s.marks[st]
	s.mu.Unlock()
	if m == nil {
		w, err := st.Watermarks(ctx)
		if err != nil {
			s.log.Warn("read watermarks", "err", err)
			return
		}
		m = &marks{slot: w}
		s.mu.Lock()
		s.marks[st] = m
		s.mu.Unlock()
	}
	// Pipelines are independent: they are planned, then their slots recorded, in
	// parallel, so that a thousand pipelines due at one instant all start within the
	// second.
	began := time.Now()
	plans := make([]pipePlan, len(todo))
	var g errgroup.Group
	g.SetLimit(planParallel)
	for i, ps := range todo {
		g.Go(func() error {
			p, err := s.plan(ctx, ps, now)
			if err != nil {
				s.log.Warn("plan slots", "pipeline", ps.spec.Name, "err", err)
			}
			plans[i] = p
			return nil
		})
	}
	g.Wait()
	planned := time.Now()
	slots := 0
	for _, p := range plans {
		if len(p.acts) == 0 { // every due slot has an act, so no watermark moves either
			continue
		}
		slots += len(p.acts)
		g.Go(func() error {
			s.record(ctx, p)
			return nil
		})
	}
	g.Wait()
	recorded := time.Now()
	// Runs start once every due slot is claimed, so that their writes do not hold up the
	// claims of the others.
	for _, ps := range todo {
		s.pump(ps)
	}
	if s.cfg.OnTick != nil {
		s.cfg.OnTick(TickTimes{Plan: planned.Sub(began), Record: recorded.Sub(planned), Dispatch: time.Since(recorded), Slots: slots})
	}
	// The watermarks move once the slots up to them have their records.
	s.mu.Lock()
	var w map[string]time.Time
	if m.dirty {
		w = maps.Clone(m.slot)
		m.dirty = false
	}
	s.mu.Unlock()
	if w != nil {
		if err := st.SetWatermarks(ctx, w); err != nil {
			s.log.Warn("write watermarks", "err", err)
			s.mu.Lock()
			m.dirty = true
			s.mu.Unlock()
		}
	}
}

// planParallel is how many pipelines are planned at once.
const planParallel = 32

// slotItem is a slot to decide on: a due slot, or an interrupted slot's record.
type slotItem struct {
	slot  time.Time
	rerun *Record
}

// slotAct is what the planner decided for a slot: run it (a new run under the overlap
// policy, or an interrupted run's next attempt), or record it skipped with its reason
// (through, when set, ends a range of n slots).
type slotAct struct {
	trig    Trigger
	rerun   *Record
	run     bool
	reason  string
	through time.Time
	n       int
}

// pipePlan is what the planner decided for one pipeline at one tick.
type pipePlan struct {
	ps   *pipeState
	acts []slotAct
	last time.Time // the last due slot, the watermark once acts are recorded; zero: none
}

// plan decides on the pipeline's slots due by now, oldest first: each is to end in a
// record, run or skipped with its reason. It writes nothing but, the first time, what
// loadSchedule does; record carries the plan out.
func (s *Scheduler) plan(ctx context.Context, ps *pipeState, now time.Time) (pipePlan, error) {
	p := pipePlan{ps: ps}
	s.mu.Lock()
	spec, st, loaded, wm := ps.spec, ps.store, ps.loaded, ps.watermark
	pause, paused := s.pausedIn[ps.store][ps.spec.Name]
	reruns := ps.reruns
	if !paused {
		ps.reruns = nil // a paused pipeline's interrupted slots wait for the resume
	}
	s.mu.Unlock()
	if spec.Cron == nil {
		return p, nil
	}
	if paused {
		reruns = nil
	}
	if !loaded {
		w, err := s.loadSchedule(ctx, ps, spec, st, now)
		if err != nil {
			return p, err
		}
		wm = w
	}
	s.mu.Lock()
	sched := ps.sched
	s.mu.Unlock()

	windowStart := now.Add(-spec.CatchupWindow)
	from := wm
	if from.Before(windowStart) {
		p.acts = s.skipOld(ps, sched, from, windowStart)
		from = windowStart
	}
	due, more := sched.Between(from, now, maxSlotsPerTick)
	var items []slotItem
	for _, t := range due {
		items = append(items, slotItem{slot: t})
	}
	for _, r := range reruns {
		// Under latest, a slot after which another was already handled stays interrupted.
		if r.Trigger.Slot.After(windowStart) && (spec.Catchup == pipelines.CatchupAll || !r.Trigger.Slot.Before(wm)) {
			items = append(items, slotItem{slot: r.Trigger.Slot, rerun: r})
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].slot.Before(items[j].slot) })
	for i, it := range items {
		newest := i == len(items)-1 && !more
		onTime := newest && it.rerun == nil && now.Sub(it.slot) <= s.cfg.Late
		run, reason := slotFate(spec.Catchup, onTime, newest, more, items[len(items)-1].slot)
		if paused {
			run, reason = false, "the schedule is "+pause.Text()
		}
		kind := Catchup
		if onTime {
			kind = Scheduled
		}
		if it.rerun == nil {
			s.slotEvent(spec.Name, it.slot, now, !onTime, !run)
		} else if !run {
			continue // it stays interrupted
		}
		p.acts = append(p.acts, slotAct{trig: Trigger{Kind: kind, Slot: it.slot}, rerun: it.rerun, run: run, reason: reason})
	}
	if len(due) > 0 {
		p.last = due[len(due)-1]
	}
	return p, nil
}

// record carries out a pipeline's plan, in slot order, and moves its watermark past the
// slots planned.
func (s *Scheduler) record(ctx context.Context, p pipePlan) {
	ps := p.ps
	for _, a := range p.acts {
		switch {
		case a.rerun != nil:
			s.rerun(ctx, ps, a.rerun)
		case a.run:
			s.dispatch(ctx, ps, a.trig)
		default:
			s.skip(ctx, ps, a.trig.Slot, a.reason, a.through, a.n)
		}
	}
	if !p.last.IsZero() {
		s.mu.Lock()
		ps.watermark = p.last
		m := s.marks[ps.store]
		m.slot[ps.spec.Name], m.dirty = p.last, true
		s.mu.Unlock()
	}
}

// loadSchedule sets up a pipeline's schedule the first time it is planned: an every
// schedule is anchored where the store says, and a pipeline without a watermark gets
// now (the slots from now on are its). It returns the watermark.
func (s *Scheduler) loadSchedule(ctx context.Context, ps *pipeState, spec *pipelines.Spec, st *Store, now time.Time) (time.Time, error) {
	sched := spec.Cron
	if sched.Every() > 0 {
		anchor, err := st.Anchor(ctx, spec.Name, now)
		if err != nil {
			return time.Time{}, fmt.Errorf("anchor: %w", err)
		}
		sched = sched.Anchored(anchor)
	}
	s.mu.Lock()
	m := s.marks[st]
	w, ok := m.slot[spec.Name]
	if !ok { // first load: the slots from now on are the pipeline's
		w = now.UTC()
		m.slot[spec.Name], m.dirty = w, true
	}
	s.mu.Unlock()
	s.mu.Lock()
	ps.sched, ps.watermark, ps.loaded = sched, w, true
	s.mu.Unlock()
	return w, nil
}

// slotFate decides whether a slot to handle runs under the pipeline's catch-up policy,
// and if not why: an on-time slot runs, and under all every slot; under none a missed
// slot is skipped; under latest only the newest runs (newest: the last of the slots due
// and no more are, last: the last of the slots handled now).
func slotFate(catchup string, onTime, newest, more bool, last time.Time) (run bool, reason string) {
	switch {
	case onTime || catchup == pipelines.CatchupAll:
		return true, ""
	case catchup == pipelines.CatchupNone:
		return false, "catchup none: the slot was missed while no scheduler ran"
	case newest:
		return true, ""
	case more:
		return false, "catchup latest: a later slot runs instead"
	default:
		return false, fmt.Sprintf("catchup latest: the later slot %s runs instead", last.Format(time.RFC3339))
	}
}

// skipOld plans the slots in (from, to] skipped, outside the catch-up window: one record
// each for the first maxSkipRecords, then one record for the rest.
func (s *Scheduler) skipOld(ps *pipeState, sched *cron.Schedule, from, to time.Time) []slotAct {
	window := ps.spec.CatchupWindow
	reason := fmt.Sprintf("outside catchup_window (%s): the slot was missed while no scheduler ran", window)
	old, more := sched.Between(from, to, maxSkipRecords)
	now := s.cfg.Now()
	var acts []slotAct
	for _, t := range old {
		acts = append(acts, slotAct{trig: Trigger{Kind: Scheduled, Slot: t}, reason: reason})
		s.slotEvent(ps.spec.Name, t, now, true, true)
	}
	if more {
		first := sched.Next(old[len(old)-1])
		last, n := first, 1
		for t := sched.Next(first); !t.IsZero() && !t.After(to) && n < 10_000_000; t = sched.Next(t) {
			last, n = t, n+1
		}
		acts = append(acts, slotAct{trig: Trigger{Kind: Scheduled, Slot: first}, reason: reason, through: last, n: n})
		s.slotEvents(ps.spec.Name, first, now, true, true, n)
	}
	return acts
}

// skip records a slot as skipped (through, when set, ends a range of n slots).
func (s *Scheduler) skip(ctx context.Context, ps *pipeState, slot time.Time, reason string, through time.Time, n int) {
	rec, err := s.runner.Prepare(ps.spec, Trigger{Kind: Scheduled, Slot: slot}, "")
	if err != nil {
		rec = s.failedRecord(ps.spec, Trigger{Kind: Scheduled, Slot: slot}, err)
	}
	now := s.cfg.Now().UTC()
	rec.Status, rec.Reason, rec.Error, rec.End, rec.Heartbeat = Skipped, reason, "", now, nil
	rec.SkippedThrough, rec.SkippedCount = through, n
	s.create(ctx, ps, rec)
}

// failedRecord is the record of a slot that cannot run (its parameters do not resolve).
func (s *Scheduler) failedRecord(spec *pipelines.Spec, trig Trigger, err error) *Record {
	now := s.cfg.Now().UTC()
	trig.Slot = trig.Slot.UTC()
	return &Record{ID: SlotID(spec.Name, trig.Slot), Pipeline: spec.Name, Trigger: trig, Attempt: 1,
		File: absFile(spec), DefinitionHash: spec.Hash, Definition: string(spec.Source),
		Status: Failed, Error: err.Error(), Created: now, End: now}
}

// create stores a record of a slot; a slot someone else recorded first is theirs. A
// run about to start is only claimed (its run indexes it as it starts).
func (s *Scheduler) create(ctx context.Context, ps *pipeState, rec *Record) bool {
	var err error
	if rec.Status.Active() {
		err = s.runner.claim(ctx, ps.spec, ps.store, rec)
	} else {
		err = s.runner.Create(ctx, ps.spec, ps.store, rec)
	}
	if errors.Is(err, objectstore.ErrExist) {
		return false
	}
	if err != nil {
		s.log.Warn("record a slot", "run", rec.ID, "err", err)
		return false
	}
	return true
}

// dispatch records a slot's run and starts or queues it under the overlap policy.
// Missed slots (catch-up) always queue, so that they run in slot order.
func (s *Scheduler) dispatch(ctx context.Context, ps *pipeState, trig Trigger) {
	spec := ps.spec
	rec, err := s.runner.Prepare(spec, trig, "")
	if err != nil {
		s.create(ctx, ps, s.failedRecord(spec, trig, err))
		return
	}
	s.mu.Lock()
	busy := len(ps.queue) > 0 || (spec.MaxActiveRuns > 0 && len(ps.running) >= spec.MaxActiveRuns)
	var active []string
	for id := range ps.running {
		active = append(active, id)
	}
	s.mu.Unlock()
	if busy && trig.Kind == Scheduled && spec.Overlap == pipelines.OverlapSkip {
		sort.Strings(active)
		rec.Status, rec.End, rec.Heartbeat = Skipped, s.cfg.Now().UTC(), nil
		rec.Reason = fmt.Sprintf("overlap skip: max_active_runs (%d) runs of the pipeline are active or waiting: %s", spec.MaxActiveRuns, strings.Join(active, ", "))
		s.create(ctx, ps, rec)
		return
	}
	if s.create(ctx, ps, rec) {
		s.mu.Lock()
		ps.queue = append(ps.queue, rec.ID) // planStore starts it
		s.mu.Unlock()
	}
}

// rerun runs an interrupted slot again, as its next attempt.
func (s *Scheduler) rerun(ctx context.Context, ps *pipeState, rec *Record) {
	why := rec.Reason
	rec.startNewAttempt()
	rec.Status = Queued
	rec.Reason = fmt.Sprintf("attempt %d: attempt %d was interrupted (%s)", rec.Attempt, rec.Attempt-1, why)
	rec.Trigger.Kind = Catchup
	if err := s.runner.Adopt(ctx, ps.spec, ps.store, rec); err != nil {
		s.log.Warn("run an interrupted slot again", "run", rec.ID, "err", err)
		return
	}
	s.enqueue(ps, rec.ID)
}

// enqueue puts a run in charge at the end of its pipeline's queue.
func (s *Scheduler) enqueue(ps *pipeState, id string) {
	s.mu.Lock()
	ps.queue = append(ps.queue, id)
	s.mu.Unlock()
	s.pump(ps)
}

// pump starts queued runs while the pipeline has room (max_active_runs).
func (s *Scheduler) pump(ps *pipeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(ps.queue) > 0 && !s.stopping && (ps.spec.MaxActiveRuns == 0 || len(ps.running) < ps.spec.MaxActiveRuns) {
		id := ps.queue[0]
		ps.queue = ps.queue[1:]
		ps.running[id] = true
		s.runner.dispatched(id)
		s.wg.Go(func() {
			s.runner.Execute(s.base, id, Hooks{}) // the runner logs its end
			s.mu.Lock()
			delete(ps.running, id)
			s.mu.Unlock()
			s.pump(ps)
		})
	}
}

// Trigger starts a run of a loaded pipeline now, as trig says (a manual run, a retry):
// it waits in the pipeline's queue while max_active_runs runs are active, and is never
// skipped. It returns a copy of the record as created.
func (s *Scheduler) Trigger(ctx context.Context, name string, trig Trigger) (*Record, error) {
	s.mu.Lock()
	ps := s.pipes[name]
	s.mu.Unlock()
	if ps == nil || ps.removed {
		return nil, fmt.Errorf("pipeline %s is not loaded", name)
	}
	rec, err := s.runner.Prepare(ps.spec, trig, "")
	if err != nil {
		return nil, err
	}
	if err := s.runner.Create(ctx, ps.spec, ps.store, rec); err != nil {
		return nil, err
	}
	out := cloneRecord(rec) // rec is the run's own from now on
	s.enqueue(ps, rec.ID)
	return out, nil
}

// Cancel cancels a run this scheduler has in charge: a queued one ends cancelled at
// once, a running one stops at its stages' next safe point.
func (s *Scheduler) Cancel(ctx context.Context, id, by string) (bool, error) {
	pipeline, _, err := ParseID(id)
	if err != nil {
		return false, err
	}
	reason := "cancelled by " + by
	s.mu.Lock()
	ps := s.pipes[pipeline]
	queued := false
	if ps != nil {
		for i, q := range ps.queue {
			if q == id {
				ps.queue = append(ps.queue[:i], ps.queue[i+1:]...)
				queued = true
				break
			}
		}
	}
	s.mu.Unlock()
	if queued {
		_, err := s.runner.Finish(ctx, id, Cancelled, reason)
		return true, err
	}
	return s.runner.Cancel(id, reason), nil
}
