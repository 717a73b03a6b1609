package scheduler

import (
	"context"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/lineage"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// A run of a pipeline with lineage: sends OpenLineage events (package lineage) as it
// goes: START of the run once its stages are queued, START of each stage at its first
// attempt and COMPLETE, FAIL or ABORT at its end (a stage skipped for a failed upstream
// never started: it sends nothing), and the run's own end. Events are built (the
// tables' schemas and commit statistics read) and sent by one goroutine per run in the
// order of the run's changes, never by the run's own goroutines, so a slow or dead
// consumer never delays or fails a run; the outcome goes into the record's Lineage.

// LineageDelivery is the outcome of a run's OpenLineage events.
type LineageDelivery struct {
	URL    string `json:"url"` // as written in the pipeline (or $OPENLINEAGE_URL)
	Sent   int    `json:"sent"`
	Failed int    `json:"failed"`
	// Events are the deliveries, oldest first (at most maxLineageEvents: the newest).
	Events []LineageEvent `json:"events,omitempty"`
}

// LineageEvent is one event's delivery.
type LineageEvent struct {
	Type   string    `json:"type"` // START, COMPLETE, FAIL, ABORT
	Job    string    `json:"job"`
	RunID  string    `json:"run_id"` // the OpenLineage run id (a UUID)
	Time   time.Time `json:"time"`
	Status int       `json:"status,omitempty"`
	Error  string    `json:"error,omitempty"`
}

const maxLineageEvents = 100

// lineageRun is a run's queue of events to build and send. Its fields are guarded by
// the run's mutex (runState.mu).
type lineageRun struct {
	spec    pipelines.Lineage
	builder *lineage.Builder
	queue   []func(ctx context.Context) lineage.Event
	sending bool
	// down: an event failed after its retries; the run's next events get one try each
	// until one is delivered, so a dead consumer costs a run's end little time.
	down bool
}

// startLineage sets up the run's events when its pipeline has lineage (st.mu held).
func (st *runState) startLineage(spec *pipelines.Spec) {
	if !spec.Lineage.Enabled() || st.r.lineage == nil {
		return
	}
	b, err := lineage.NewBuilder(spec, st.store.Objects())
	if err != nil {
		st.r.log.Warn("lineage: no events for this run", "run", st.rec.ID, "err", err)
		return
	}
	st.lin = &lineageRun{spec: spec.Lineage, builder: b}
	st.rec.Lineage = &LineageDelivery{URL: spec.Lineage.Display}
}

func (st *runState) runInfo() lineage.RunInfo {
	msg := st.rec.Error
	if msg == "" {
		msg = st.rec.Reason
	}
	return lineage.RunInfo{ID: st.rec.ID, Attempt: st.rec.Attempt, Slot: st.rec.Trigger.Slot, Error: msg}
}

// lineageRunEvent queues the run's event of type typ (st.mu held).
func (st *runState) lineageRunEvent(typ lineage.EventType) {
	if st.lin == nil {
		return
	}
	info, at, b := st.runInfo(), st.r.now(), st.lin.builder
	st.enqueueLineage(func(context.Context) lineage.Event { return b.RunEvent(typ, info, at) })
}

// lineageStageEvent queues the event of a stage's state change, if it makes one (st.mu
// held, the record updated with the change).
func (st *runState) lineageStageEvent(ev dag.Event) {
	if st.lin == nil {
		return
	}
	s := st.rec.Stage(ev.Node)
	if s == nil {
		return
	}
	var typ lineage.EventType
	switch ev.State {
	case dag.Running:
		if len(s.Attempts) != 1 {
			return // a retry is the same OpenLineage run
		}
		typ = lineage.Start
	case dag.Succeeded:
		typ = lineage.Complete
	case dag.Failed:
		typ = lineage.Fail
	case dag.Cancelled:
		if len(s.Attempts) == 0 {
			return // never started
		}
		typ = lineage.Abort
	default:
		return
	}
	info := lineage.StageInfo{Name: s.Name, Error: or(s.Error, s.Reason)}
	for _, v := range s.VersionsRead {
		info.Read = append(info.Read, lineage.TableVersion{Table: v.Table, Version: v.Version})
	}
	for _, c := range s.ChangesRead {
		info.Read = append(info.Read, lineage.TableVersion{Table: c.Table, Version: c.Through})
	}
	for _, v := range s.VersionsWritten {
		info.Written = append(info.Written, lineage.TableVersion{Table: v.Table, Version: v.Version})
	}
	for _, c := range s.Checks {
		info.Checks = append(info.Checks, lineage.Check{Name: c.Name, Table: c.Table, Action: c.Action, Failed: c.Failed})
	}
	run, at, b := st.runInfo(), ev.Time, st.lin.builder
	st.enqueueLineage(func(ctx context.Context) lineage.Event { return b.StageEvent(ctx, typ, run, info, at) })
}

// enqueueLineage adds an event to the run's queue and starts its sender if it is not
// on (st.mu held).
func (st *runState) enqueueLineage(build func(context.Context) lineage.Event) {
	l := st.lin
	l.queue = append(l.queue, build)
	if l.sending {
		return
	}
	l.sending = true
	st.r.wg.Go(func() {
		ctx := context.Background()
		for {
			st.mu.Lock()
			if len(l.queue) == 0 {
				l.sending = false
				st.mu.Unlock()
				return
			}
			next := l.queue[0]
			l.queue = l.queue[1:]
			down := l.down
			st.mu.Unlock()
			ev := next(ctx)
			status, err := st.r.lineage.Send(ctx, l.spec, ev, down)
			d := LineageEvent{Type: string(ev.EventType), Job: ev.Job.Name, RunID: ev.Run.RunID, Time: st.r.now().UTC(), Status: status}
			if err != nil {
				d.Error = err.Error()
				st.r.log.Warn("lineage event not delivered", "run", st.rec.ID, "job", ev.Job.Name, "event", ev.EventType, "err", err)
			}
			st.mu.Lock()
			l.down = err != nil
			if ld := st.rec.Lineage; ld != nil {
				if err != nil {
					ld.Failed++
				} else {
					ld.Sent++
				}
				ld.Events = append(ld.Events, d)
				if n := len(ld.Events); n > maxLineageEvents {
					ld.Events = ld.Events[n-maxLineageEvents:]
				}
			}
			st.mu.Unlock()
			st.saveSoon(ctx)
		}
	})
}

const lineageStart = lineage.Start

// lineageEnd is the event type of a run or stage that ended in status.
func lineageEnd(status Status) lineage.EventType {
	switch status {
	case Succeeded:
		return lineage.Complete
	case Failed:
		return lineage.Fail
	}
	return lineage.Abort
}
