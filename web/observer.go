package web

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// Observer watches the scheduler: every save of a run's record (RunChanged, for
// scheduler.RunnerConfig.OnChange) and every slot handled (SlotHandled, for
// scheduler.Config.OnSlot). It wakes the live pages' event streams and keeps the
// metrics. Create it before the runner, give it to New.
type Observer struct {
	reg *prometheus.Registry
	m   *metrics

	mu    sync.Mutex                             // guards the fields below
	subs  map[chan struct{}]string               // event streams: run id ("" for every run)
	seen  map[string]map[string]scheduler.Status // per active run, its stages' states
	sched *scheduler.Scheduler                   // for the gauges, once attached
	last  map[string]scheduler.Status            // per active run, its state
	ended map[string]bool                        // runs counted as ended (saves after the end count nothing)
	revs  map[string]uint64                      // per run, the saves seen (the response cache's revision)
}

// NewObserver returns an Observer with its metrics registered.
func NewObserver() *Observer {
	o := &Observer{reg: prometheus.NewRegistry(), subs: map[chan struct{}]string{},
		seen: map[string]map[string]scheduler.Status{}, last: map[string]scheduler.Status{}, ended: map[string]bool{}, revs: map[string]uint64{}}
	o.m = newMetrics(o)
	o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.m.register(o.reg)
	return o
}

func (o *Observer) attach(s *scheduler.Scheduler) {
	o.mu.Lock()
	o.sched = s
	o.mu.Unlock()
}

func (o *Observer) scheduler() *scheduler.Scheduler {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sched
}

// RunChanged takes a record as saved: it counts what ended since the last save of the
// run and wakes the event streams that watch it. It never blocks.
func (o *Observer) RunChanged(rec *scheduler.Record) {
	o.mu.Lock()
	if len(o.revs) >= 10000 {
		clear(o.revs)
	}
	o.revs[rec.ID]++
	if rec.Trigger.Of != "" { // a retry's or rollback's state shows on the run it is of
		o.revs[rec.Trigger.Of]++
	}
	o.count(rec)
	o.wake(rec)
	o.mu.Unlock()
}

// changed notes a change to a run's record that was not a save of the runner (a link
// to its retry or rollback): its cached page and JSON are rendered again.
func (o *Observer) changed(id string) {
	o.mu.Lock()
	o.revs[id]++
	o.mu.Unlock()
}

// revision counts the saves of a run's record seen so far (0 for runs of other
// processes).
func (o *Observer) revision(id string) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.revs[id]
}

// count counts what ended since the run's last save (o.mu held).
func (o *Observer) count(rec *scheduler.Record) {
	if o.ended[rec.ID] {
		return
	}
	prev := o.seen[rec.ID]
	if prev == nil {
		prev = map[string]scheduler.Status{}
	}
	for i := range rec.Stages {
		sr := &rec.Stages[i]
		was := prev[sr.Name]
		if !sr.Status.Active() && (was == "" || was.Active()) && sr.Status != scheduler.Skipped && len(sr.Attempts) > 0 {
			o.m.stageEnded(rec.Pipeline, sr)
		}
		prev[sr.Name] = sr.Status
	}
	if rec.Status.Active() {
		o.seen[rec.ID], o.last[rec.ID] = prev, rec.Status
		return
	}
	o.m.runs.WithLabelValues(rec.Pipeline, string(rec.Status)).Inc()
	delete(o.seen, rec.ID)
	delete(o.last, rec.ID)
	if len(o.ended) >= 10000 {
		clear(o.ended)
	}
	o.ended[rec.ID] = true
}

// wake wakes the event streams that watch the run (o.mu held).
func (o *Observer) wake(rec *scheduler.Record) {
	for ch, id := range o.subs {
		if id == "" || id == rec.ID {
			select {
			case ch <- struct{}{}:
			default: // one wake-up pending is enough
			}
		}
	}
}

// SlotHandled counts a slot the scheduler handled.
func (o *Observer) SlotHandled(ev scheduler.SlotEvent) {
	o.m.slotHandled(ev)
}

// TickDone times a scheduler pass over a warehouse's pipelines.
func (o *Observer) TickDone(t scheduler.TickTimes) {
	o.m.tickDone(t)
}

// subscribe returns a channel woken when run id ("" for any run) changes state, and
// its cancel function.
func (o *Observer) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	o.mu.Lock()
	o.subs[ch] = id
	o.mu.Unlock()
	return ch, func() {
		o.mu.Lock()
		delete(o.subs, ch)
		o.mu.Unlock()
	}
}
