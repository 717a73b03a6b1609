package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// runState is a run in charge of a Runner: its record as it changes, the writes of it,
// its heartbeat and the execution of its graph.
type runState struct {
	r     *Runner
	spec  *pipelines.Spec
	store *Store

	// hard cancels running stages; soft (below hard) only keeps new ones from starting.
	hard, soft             context.Context
	cancelHard, cancelSoft context.CancelCauseFunc

	mu         sync.Mutex // guards rec, logs, lost, unsaved, writing, touching, touchTimer, ended and lin
	rec        *Record
	logs       map[string]*stageLog
	lost       bool // another process took the run over: write nothing more
	unsaved    bool // rec changed since the last write of it began
	writing    bool // saveSoon's writer is on
	touching   bool // a save is due within progressSaveEvery (touch)
	touchTimer *time.Timer
	ended      bool        // finish has begun: no more touches
	lin        *lineageRun // the run's OpenLineage events, when its pipeline has lineage

	saveMu sync.Mutex // serialises writes, so the last state written is the newest
}

func (st *runState) snapshot() *Record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return cloneRecord(st.rec)
}

// save writes the record as it is now and returns when it is written, trying a failed
// write twice more. Store failures are logged: a run goes on when its record cannot be
// written, and the next save writes the newer state.
func (st *runState) save(ctx context.Context) error {
	st.mu.Lock()
	st.unsaved = true
	st.mu.Unlock()
	var err error
	for try := range 3 {
		if try > 0 {
			time.Sleep(time.Duration(try) * 100 * time.Millisecond)
		}
		if err = st.write(ctx); err == nil {
			return nil
		}
	}
	return err
}

// saveSoon writes the record as it is now in the background: the changes that come
// while a write is under way are written together by the next one, so stages that
// change state faster than a record is written (a stage that starts as its run is
// queued, one that ends as its run does) cost one write, not one each. As with save, a
// crash loses only the state not written yet. A save after it waits for its write and
// writes what is newer.
func (st *runState) saveSoon(ctx context.Context) {
	st.mu.Lock()
	st.unsaved = true
	if st.writing {
		st.mu.Unlock()
		return
	}
	st.writing = true
	st.mu.Unlock()
	st.r.wg.Go(func() {
		for {
			err := st.write(ctx)
			st.mu.Lock()
			if !st.unsaved || err != nil { // after a failure the next save tries again
				st.writing = false
				st.mu.Unlock()
				return
			}
			st.mu.Unlock()
		}
	})
}

// write writes the record if it changed since the last write began.
func (st *runState) write(ctx context.Context) error {
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	st.mu.Lock()
	if st.lost || !st.unsaved {
		st.unsaved = false // a run taken over writes nothing more
		st.mu.Unlock()
		return nil
	}
	st.unsaved = false
	rec := cloneRecord(st.rec)
	var logs []struct {
		stage string
		data  []byte
	}
	for name, lg := range st.logs {
		if s := st.rec.Stage(name); s != nil && s.LogDropped > 0 && !lg.written && !s.Status.Active() {
			logs = append(logs, struct {
				stage string
				data  []byte
			}{name, append([]byte(nil), lg.all.Bytes()...)})
			lg.written = true
		}
	}
	st.mu.Unlock()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, l := range logs {
		key, err := st.store.PutLog(wctx, rec, l.stage, l.data)
		if err != nil {
			st.r.log.Warn("store a stage's log", "run", rec.ID, "stage", l.stage, "err", err)
			continue
		}
		rec.Stage(l.stage).LogObject = key
		st.mu.Lock()
		st.rec.Stage(l.stage).LogObject = key
		st.mu.Unlock()
	}
	var err error
	if rec.Seq == 0 { // a claimed record's first save gives it its index entry
		err = st.store.Index(wctx, rec)
		if rec.Seq > 0 { // the entry is claimed even if the record's write failed
			st.mu.Lock()
			st.rec.Seq = rec.Seq
			st.mu.Unlock()
		}
	} else {
		err = st.store.Save(wctx, rec)
	}
	if st.r.cfg.OnChange != nil {
		st.r.cfg.OnChange(rec)
	}
	if err != nil {
		st.r.log.Warn("save run record", "run", rec.ID, "err", err)
		st.mu.Lock()
		st.unsaved = true // not stored: the next write tries again
		st.mu.Unlock()
		return err
	}
	return nil
}

func (st *runState) beat(ctx context.Context) {
	id := st.r.cfg.Identity
	stored, err := st.store.Get(ctx, st.rec.ID)
	if err == nil {
		st.mu.Lock()
		mine := stored.Heartbeat != nil && stored.Heartbeat.Instance == id.Instance
		taken := stored.Attempt > st.rec.Attempt || (!mine && stored.Attempt == st.rec.Attempt) || stored.Status == Interrupted
		if taken {
			st.lost = true
		}
		st.mu.Unlock()
		if taken {
			st.cancelHard(fmt.Errorf("run %s was taken over by %s", st.rec.ID, describeHeartbeat(stored.Heartbeat)))
			return
		}
	}
	st.mu.Lock()
	st.rec.Heartbeat = st.r.heartbeat(st.r.now())
	st.mu.Unlock()
	_ = st.save(ctx)
}

func describeHeartbeat(h *Heartbeat) string {
	if h == nil {
		return "another process"
	}
	return fmt.Sprintf("%s pid %d", h.Host, h.PID)
}

// start marks the record running from now (st.mu held).
func (st *runState) start(now time.Time) {
	st.rec.Status, st.rec.Start = Running, now.UTC()
	st.rec.Heartbeat = st.r.heartbeat(now)
}

// execute runs the graph and keeps the record up to date.
func (st *runState) execute(hooks Hooks) error {
	r := st.r
	st.mu.Lock()
	rec := st.rec
	if rec.Status != Running { // not started by a scheduler's dispatch (Runner.dispatched)
		st.start(r.now())
	}
	st.mu.Unlock()

	fail := func(err error) error {
		st.mu.Lock()
		st.rec.Status, st.rec.Error, st.rec.End = Failed, err.Error(), r.now().UTC()
		st.mu.Unlock()
		st.save(st.hard)
		return err
	}
	spec, err := st.spec.Bind(pipelines.RunValues{Params: rec.Params, Slot: rec.Trigger.Slot})
	if err != nil {
		return fail(err)
	}
	g, err := st.compile(spec, hooks)
	if err != nil {
		return fail(err)
	}
	names := st.queueStages(spec, g)
	st.mu.Lock()
	st.startLineage(spec)
	st.lineageRunEvent(lineageStart)
	st.mu.Unlock()
	st.saveSoon(st.hard)
	if hooks.Started != nil {
		hooks.Started(rec.ID, names)
	}
	res, err := dag.Run(st.soft, g, dag.Options{
		MaxParallel: spec.MaxParallel,
		Now:         r.now,
		Observer: func(ev dag.Event) {
			if ev.State == dag.Queued {
				return
			}
			st.event(ev)
			st.saveSoon(st.hard)
			if hooks.Observer != nil {
				hooks.Observer(ev)
			}
		},
	})
	st.finish(res.Status)
	return err
}

// queueStages lists the graph's stages in the record, queued, in the graph's order,
// which it returns.
func (st *runState) queueStages(spec *pipelines.Spec, g *dag.Graph) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec := st.rec
	rec.Stages = nil
	for _, name := range g.Order() {
		n, _ := g.Node(name)
		kind := ""
		if s := spec.Stage(name); s != nil {
			kind = string(s.Kind)
		}
		rec.Stages = append(rec.Stages, StageRecord{Name: name, Kind: kind, DependsOn: n.DependsOn, Status: Queued})
	}
	return g.Order()
}

// finish ends the record with the graph's outcome: succeeded, cancelled (with the
// cancel's cause) or failed (naming each failed stage's error), and saves it.
func (st *runState) finish(status dag.State) {
	st.mu.Lock()
	st.ended = true
	if st.touchTimer != nil {
		st.touchTimer.Stop()
	}
	rec := st.rec
	rec.End = st.r.now().UTC()
	switch status {
	case dag.Succeeded:
		rec.Status = Succeeded
	case dag.Cancelled:
		rec.Status = Cancelled
		rec.Reason = context.Cause(st.soft).Error()
	default:
		rec.Status = Failed
		var failed []string
		for _, s := range rec.Stages {
			if s.Status == Failed {
				failed = append(failed, fmt.Sprintf("stage %s: %s", s.Name, s.Error))
			}
		}
		rec.Error = strings.Join(failed, "; ")
	}
	st.lineageRunEvent(lineageEnd(rec.Status))
	st.mu.Unlock()
	st.save(st.hard)
}

// compile builds the run's graph: the stages asked for, each attempt taking a turn of
// the global limiter, running under the hard context (so a drain lets it finish) on the
// runner's engine with an environment of its own, and recording its result.
func (st *runState) compile(spec *pipelines.Spec, hooks Hooks) (*dag.Graph, error) {
	r := st.r
	var consumers []jobs.Consumer
	if r.cfg.Consumers != nil {
		consumers = r.cfg.Consumers()
	}
	plan, err := pipelines.Compile(spec, consumers)
	if err != nil {
		return nil, err
	}
	run := runEnv{spec: spec, tables: spec.TablesByName(), runID: st.rec.ID, hooks: hooks}
	g, err := plan.Graph(func(s *pipelines.StageSpec) dag.Task {
		return dag.TaskFunc(func(ctx context.Context, attempt int) error { return st.attempt(ctx, run, s, attempt) })
	})
	if err != nil {
		return nil, err
	}
	if stages := st.rec.Trigger.Stages; len(stages) > 0 {
		if g, err = g.Subgraph(stages...); err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", spec.Name, err)
		}
	}
	return g, nil
}

// attempt runs one attempt of a stage on the engine and records how it went. ctx
// carries the attempt's deadline (the stage's timeout); the attempt runs under the
// run's hard context, so that a drain lets it finish.
func (st *runState) attempt(ctx context.Context, run runEnv, s *pipelines.StageSpec, attempt int) error {
	r, spec, hooks := st.r, run.spec, run.hooks
	name := s.Name
	if r.cfg.Limiter != nil {
		release, err := r.cfg.Limiter.Acquire(ctx, spec.Name)
		if err != nil {
			return err
		}
		defer release()
	}
	st.mu.Lock()
	st.logLine(name, r.now(), "attempt %d started", attempt)
	st.mu.Unlock()
	actx, cancel := context.WithCancelCause(st.hard)
	defer cancel(nil)
	if dl, ok := ctx.Deadline(); ok {
		var c context.CancelFunc
		actx, c = context.WithDeadline(actx, dl)
		defer c()
	}
	res, err := r.cfg.Engine.RunStage(actx, pipelines.StageRun{Spec: spec, Stage: s, Env: st.env(run, name, attempt), Attempt: attempt})
	st.done(name, res)
	if hooks.Done != nil {
		hooks.Done(name, attempt, res, err)
	}
	if diff := (*jobs.DifferenceError)(nil); errors.As(err, &diff) {
		err = dag.Permanent(err) // the tables stay as they are until someone converges them
	} else if err != nil && jobs.Permanent(err) {
		// Bad input or a table unlike its declaration: a retry would meet it again.
		err = dag.Permanent(err)
	}
	st.mu.Lock()
	switch {
	case err == nil:
		st.logLine(name, r.now(), "attempt %d succeeded", attempt)
	case st.hard.Err() != nil:
		st.logLine(name, r.now(), "attempt %d cancelled: %v", attempt, context.Cause(st.hard))
	default:
		st.logLine(name, r.now(), "attempt %d failed: %v", attempt, err)
	}
	st.mu.Unlock()
	return err
}

// runEnv is what every attempt of a run shares.
type runEnv struct {
	spec   *pipelines.Spec
	tables map[string]*jobs.Table
	runID  string
	hooks  Hooks
}

// env is the environment of one attempt of a stage: the run's warehouse and sources,
// the pipeline's tables, the commits' lineage (pipeline, stage, run and attempt), the
// stage's own log (kept by the record, and passed on to hooks.Logger) and progress.
func (st *runState) env(run runEnv, stage string, attempt int) *jobs.Env {
	r, spec, hooks := st.r, run.spec, run.hooks
	dlog := hooks.Logger
	if dlog == nil {
		dlog = r.log
	}
	var next slog.Handler
	if hooks.Logger != nil {
		next = hooks.Logger.Handler()
	}
	return &jobs.Env{
		Warehouse: st.store.Objects(),
		Tables:    run.tables,
		OpenLocation: func(ctx context.Context, location string) (objectstore.Store, string, error) {
			return r.cfg.Opener.Location(ctx, spec, location)
		},
		Lineage:      delta.Lineage{Pipeline: spec.Name, Stage: stage, RunID: run.runID, Attempt: attempt},
		Delta:        delta.Options{Now: r.now, EngineInfo: r.cfg.EngineInfo, UserName: spec.Identity, Logger: dlog},
		Logger:       slog.New(&logHandler{st: st, stage: stage, next: next}),
		PipelineFile: spec.File,
		MemoryBudget: r.cfg.MemoryBudget,
		SpillDir:     r.cfg.SpillDir,
		Progress: func(p jobs.Progress) {
			st.progress(stage, p)
			if hooks.Progress != nil {
				hooks.Progress(stage, p)
			}
		},
	}
}

// event applies a stage state change to the record.
func (st *runState) event(ev dag.Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.rec.Stage(ev.Node)
	if s == nil {
		return
	}
	t := ev.Time.UTC()
	cancelled := ev.State == dag.Cancelled
	endAttempt := func() {
		if n := len(s.Attempts); n > 0 && s.Attempts[n-1].End.IsZero() {
			s.Attempts[n-1].End = t
			switch {
			case cancelled:
				s.Attempts[n-1].Cancelled = true
			case ev.Err != nil:
				s.Attempts[n-1].Error = ev.Err.Error()
			}
		}
	}
	switch ev.State {
	case dag.Running:
		s.Status = Running
		if s.Start.IsZero() {
			s.Start = t
		}
		s.Attempts = append(s.Attempts, Attempt{N: ev.Attempt, Start: t})
	case dag.Retrying:
		endAttempt()
	default: // terminal
		endAttempt()
		s.Status, s.End = Status(ev.State), t
		switch {
		case cancelled:
			// A cancel is no error: the reason is the cancel's cause.
			s.Reason = "cancelled"
			if cause := context.Cause(st.hard); cause != nil {
				s.Reason = cause.Error()
			} else if ev.Err != nil {
				s.Reason = ev.Err.Error()
			}
		case ev.State == dag.Skipped && ev.Err != nil:
			s.Reason = ev.Err.Error()
		case ev.Err != nil:
			s.Error = ev.Err.Error()
		}
		if ev.Attempt == 0 && ev.Err != nil { // it never ran: its attempts logged nothing
			msg := or(s.Reason, s.Error)
			if !strings.HasPrefix(msg, string(ev.State)) {
				msg = string(ev.State) + ": " + msg
			}
			st.logLine(s.Name, t, "%s", msg)
		}
	}
	st.lineageStageEvent(ev)
}

// done records an attempt's result (the last one is the stage's).
func (st *runState) done(stage string, res jobs.Result) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.rec.Stage(stage)
	if s == nil {
		return
	}
	s.RowsIn, s.RowsOut, s.RowsSkipped = res.RowsRead, res.RowsWritten, res.RowsSkipped
	s.Conflicts += res.Conflicts
	s.VersionsRead, s.VersionsWritten, s.ChangesRead = nil, nil, nil
	for _, v := range res.VersionsRead {
		s.VersionsRead = append(s.VersionsRead, TableVersion{Table: v.Table, Version: v.Version})
	}
	for _, v := range res.VersionsWritten {
		s.VersionsWritten = append(s.VersionsWritten, TableVersion{Table: v.Table, Version: v.Version})
	}
	for _, c := range res.ChangesRead {
		s.ChangesRead = append(s.ChangesRead, ChangeRange{Table: c.Table, After: c.After, Through: c.Through})
	}
	s.Notes = append([]string(nil), res.Notes...)
	s.Engine, s.Operations = res.Engine, nil
	for _, op := range res.Operations {
		s.Operations = append(s.Operations, Operation{SQL: op.SQL, SessionID: op.SessionID, OperationID: op.OperationID, Table: op.Table, Version: op.Version, Metrics: op.Metrics})
	}
}
