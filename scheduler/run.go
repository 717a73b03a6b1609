package scheduler

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Opener opens the stores a pipeline's runs need.
type Opener interface {
	// Warehouse opens the pipeline's warehouse, which holds its tables and run store.
	Warehouse(ctx context.Context, spec *pipelines.Spec) (objectstore.Store, error)
	// Location opens the store behind a source location and returns the key prefix
	// in it (jobs.Env.OpenLocation).
	Location(ctx context.Context, spec *pipelines.Spec, location string) (objectstore.Store, string, error)
}

// Identity names the process that runs and heartbeats runs.
type Identity struct {
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Instance string `json:"instance"` // random, one per Runner
}

// LocalIdentity is this process's identity, with a fresh instance name.
func LocalIdentity() Identity {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return Identity{Host: host, PID: os.Getpid(), Instance: strings.ToLower(rand.Text()[:10])}
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Opener Opener
	// Now is the clock of records, heartbeats and commits; nil means time.Now.
	Now func() time.Time
	// Identity is who heartbeats; zero means LocalIdentity().
	Identity Identity
	// EngineInfo is recorded in every commit (e.g. "orchestrator/v1.2.0").
	EngineInfo string
	// Logger receives the runner's own warnings (a record it could not save, a failed
	// notification); nil means slog.Default().
	Logger *slog.Logger
	// Limiter, when set, bounds running stages across every run (serve --max-stages).
	Limiter *Limiter
	// HeartbeatEvery, when set, makes each run heartbeat on a timer of its own (the CLI);
	// a scheduler leaves it 0 and calls Heartbeat from its loop.
	HeartbeatEvery time.Duration
	// Notifier sends the pipelines' notifications; nil sends none.
	Notifier *Notifier
	// Consumers lists the change feed readers of every loaded pipeline, which vacuum
	// stages must not starve; nil means each pipeline's own.
	Consumers func() []jobs.Consumer
	// Compile builds a run's graph; nil means pipelines.Compile. Tests replace it.
	Compile func(spec *pipelines.Spec, rt pipelines.Runtime) (*dag.Graph, error)
	// Execute, when set, carries out each stage attempt on its engine
	// (pipelines.Runtime.Execute); nil runs every stage in this process.
	Execute func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error)
	// OnChange, when set, is given a copy of a run's record in charge each time it is
	// saved (every state change, and heartbeats), in the order of the saves; it must not
	// block (the web's live views and metrics).
	OnChange func(*Record)
	// MemoryBudget and SpillDir are the stages' defaults (see jobs.Env).
	MemoryBudget jobs.ByteSize
	SpillDir     string
}

// Runner runs pipelines and records every run. It is safe for concurrent use.
type Runner struct {
	cfg RunnerConfig
	now func() time.Time
	log *slog.Logger

	mu     sync.Mutex // guards owned and stores
	owned  map[string]*runState
	stores map[objectstore.Store]*Store

	wg sync.WaitGroup // notifications and heartbeat timers
}

// NewRunner returns a Runner.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Identity == (Identity{}) {
		cfg.Identity = LocalIdentity()
	}
	if cfg.Compile == nil {
		cfg.Compile = pipelines.Compile
	}
	r := &Runner{cfg: cfg, now: cfg.Now, log: cfg.Logger, owned: map[string]*runState{}, stores: map[objectstore.Store]*Store{}}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Identity returns who the runner heartbeats as.
func (r *Runner) Identity() Identity { return r.cfg.Identity }

// RecordsOpener is an Opener that keeps run records apart from the tables: the same
// warehouse location seen through a store with other write settings (a local directory
// written without fsync, so that a thousand slots due at once are recorded within the
// second; the tables keep their durability).
type RecordsOpener interface {
	Records(ctx context.Context, spec *pipelines.Spec) (objectstore.Store, error)
}

// Store returns the run store of the pipeline's warehouse.
func (r *Runner) Store(ctx context.Context, spec *pipelines.Spec) (*Store, error) {
	wh, err := r.cfg.Opener.Warehouse(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: warehouse %s: %w", spec.Name, spec.Warehouse, err)
	}
	records := wh
	if ro, ok := r.cfg.Opener.(RecordsOpener); ok {
		if records, err = ro.Records(ctx, spec); err != nil {
			return nil, fmt.Errorf("pipeline %s: run store in %s: %w", spec.Name, spec.Warehouse, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stores[wh]
	if s == nil {
		s = NewStoreIn(wh, records)
		r.stores[wh] = s
	}
	return s, nil
}

// Hooks let a caller watch a run as it goes (the CLI's live display). Each may be nil.
type Hooks struct {
	// Observer is told every stage state change, after the record has it.
	Observer func(dag.Event)
	// Progress receives running row counts; Done each attempt's result.
	Progress func(stage string, p jobs.Progress)
	Done     func(stage string, attempt int, res jobs.Result, err error)
	// Logger also receives the stages' log lines (the record keeps them anyway) and the
	// Delta log's warnings.
	Logger *slog.Logger
	// Started is called once the record is stored, with its id.
	Started func(id string, stages []string)
}

// Run runs the pipeline now, for trig, and returns its record: the record is stored
// before any stage starts and at every state change. The error is nil when the run
// succeeded; a run that failed or was cancelled returns its record and an error.
func (r *Runner) Run(ctx context.Context, spec *pipelines.Spec, trig Trigger, hooks Hooks) (*Record, error) {
	store, err := r.Store(ctx, spec)
	if err != nil {
		return nil, err
	}
	rec, err := r.Prepare(spec, trig, "")
	if err != nil {
		return nil, err
	}
	if err := r.Create(ctx, spec, store, rec); err != nil {
		return nil, err
	}
	return r.Execute(ctx, rec.ID, hooks)
}

// Prepare makes a queued record for a run of spec (id "" picks one: the slot's for a
// scheduled or backfill trigger, else a fresh one), with the parameters resolved.
func (r *Runner) Prepare(spec *pipelines.Spec, trig Trigger, id string) (*Record, error) {
	now := r.now()
	params, err := spec.ResolveParams(trig.Params)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", spec.Name, err)
	}
	if trig.Slot.IsZero() {
		trig.Slot = now.UTC().Truncate(time.Second)
	}
	trig.Slot = trig.Slot.UTC()
	if id == "" {
		switch trig.Kind {
		case Scheduled, Catchup, Backfill:
			id = SlotID(spec.Name, trig.Slot)
		default:
			id = NewID(spec.Name, now)
		}
	}
	return &Record{
		ID: id, Pipeline: spec.Name, Trigger: trig, Attempt: 1, Params: params,
		File: absFile(spec), DefinitionHash: spec.Hash, Definition: string(spec.Source),
		Status: Queued, Created: now.UTC(), Heartbeat: r.heartbeat(now),
	}, nil
}

func (r *Runner) heartbeat(now time.Time) *Heartbeat {
	id := r.cfg.Identity
	return &Heartbeat{Host: id.Host, PID: id.PID, Instance: id.Instance, Time: now.UTC()}
}

// Create stores a prepared record, claiming its id (an error wrapping
// objectstore.ErrExist when another run has it), and, if it is active, takes it in
// charge: Heartbeat keeps it alive until Execute or Finish ends it.
func (r *Runner) Create(ctx context.Context, spec *pipelines.Spec, store *Store, rec *Record) error {
	if err := store.Create(ctx, rec); err != nil {
		return err
	}
	if rec.Status.Active() {
		r.adopt(spec, store, rec)
	}
	return nil
}

// claim is Create for a slot about to run: only the claim is written before its run
// starts; Execute gives it its index entry.
func (r *Runner) claim(ctx context.Context, spec *pipelines.Spec, store *Store, rec *Record) error {
	if err := store.Claim(ctx, rec); err != nil {
		return err
	}
	r.adopt(spec, store, rec)
	return nil
}

// Adopt takes in charge an active record this runner did not create (a run request, a
// slot run again after an interruption): it gets this runner's heartbeat and is saved.
func (r *Runner) Adopt(ctx context.Context, spec *pipelines.Spec, store *Store, rec *Record) error {
	rec.Heartbeat = r.heartbeat(r.now())
	if err := store.Save(ctx, rec); err != nil {
		return err
	}
	r.adopt(spec, store, rec)
	return nil
}

func (r *Runner) adopt(spec *pipelines.Spec, store *Store, rec *Record) {
	hard, cancelHard := context.WithCancelCause(context.Background())
	soft, cancelSoft := context.WithCancelCause(hard)
	st := &runState{r: r, spec: spec, store: store, rec: rec, logs: map[string]*stageLog{},
		hard: hard, cancelHard: cancelHard, soft: soft, cancelSoft: cancelSoft}
	r.mu.Lock()
	r.owned[rec.ID] = st
	r.mu.Unlock()
}

// Owned returns copies of the records this runner has in charge (queued or running).
func (r *Runner) Owned() []*Record {
	r.mu.Lock()
	states := make([]*runState, 0, len(r.owned))
	for _, st := range r.owned {
		states = append(states, st)
	}
	r.mu.Unlock()
	out := make([]*Record, 0, len(states))
	for _, st := range states {
		out = append(out, st.snapshot())
	}
	return out
}

// Record returns a copy of the record of a run in charge here (queued or running), as
// it is now.
func (r *Runner) Record(id string) (*Record, bool) {
	st := r.state(id)
	if st == nil {
		return nil, false
	}
	return st.snapshot(), true
}

func (r *Runner) state(id string) *runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owned[id]
}

func (r *Runner) release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.owned, id)
}

// Finish ends a queued run that will not run (skipped, cancelled) with a reason.
func (r *Runner) Finish(ctx context.Context, id string, status Status, reason string) (*Record, error) {
	st := r.state(id)
	if st == nil {
		return nil, fmt.Errorf("run %s is not in charge here", id)
	}
	defer r.release(id)
	if st.snapshot().Seq == 0 {
		st.index()
	}
	st.mu.Lock()
	st.rec.Status, st.rec.Reason, st.rec.End = status, reason, r.now().UTC()
	for i := range st.rec.Stages {
		if st.rec.Stages[i].Status.Active() {
			st.rec.Stages[i].Status = status
		}
	}
	st.mu.Unlock()
	err := st.save(ctx)
	return st.snapshot(), err
}

// Cancel cancels a run in charge here: queued stages do not start and running stages
// see their context cancelled. reason is recorded.
func (r *Runner) Cancel(id, reason string) bool {
	st := r.state(id)
	if st == nil {
		return false
	}
	st.cancelHard(errors.New(reason))
	return true
}

// Drain stops every run in charge from starting more stages (their running stages go
// on until CancelAll); reason is recorded.
func (r *Runner) Drain(reason string) {
	for _, st := range r.all() {
		st.cancelSoft(errors.New(reason))
	}
}

// CancelAll cancels every run in charge.
func (r *Runner) CancelAll(reason string) {
	for _, st := range r.all() {
		st.cancelHard(errors.New(reason))
	}
}

func (r *Runner) all() []*runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*runState, 0, len(r.owned))
	for _, st := range r.owned {
		out = append(out, st)
	}
	return out
}

// Wait waits for the notifications and heartbeat timers the runner started.
func (r *Runner) Wait() { r.wg.Wait() }

// Heartbeat records a sign of life on every run in charge. A run whose stored record
// shows that another process took it over (it was found stale and marked interrupted,
// or run again) is cancelled here and no longer written.
func (r *Runner) Heartbeat(ctx context.Context) {
	for _, st := range r.all() {
		st.beat(ctx)
	}
}

// runState is a run in charge of a Runner.
type runState struct {
	r     *Runner
	spec  *pipelines.Spec
	store *Store

	// hard cancels running stages; soft (below hard) only keeps new ones from starting.
	hard, soft             context.Context
	cancelHard, cancelSoft context.CancelCauseFunc

	mu   sync.Mutex // guards rec, logs and lost
	rec  *Record
	logs map[string]*stageLog
	lost bool // another process took the run over: write nothing more

	saveMu sync.Mutex // serialises saves, so the last state written is the newest
}

func (st *runState) snapshot() *Record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return cloneRecord(st.rec)
}

// save writes the record as it is now. Store failures are logged: a run goes on when
// its record cannot be written, and the next save writes the newer state.
func (st *runState) save(ctx context.Context) error {
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	st.mu.Lock()
	if st.lost {
		st.mu.Unlock()
		return nil
	}
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
	err := st.store.Save(wctx, rec)
	if st.r.cfg.OnChange != nil {
		st.r.cfg.OnChange(rec)
	}
	if err != nil {
		st.r.log.Warn("save run record", "run", rec.ID, "err", err)
		return err
	}
	return nil
}

// index gives a claimed record its index entry.
func (st *runState) index() {
	st.mu.Lock()
	rec := cloneRecord(st.rec)
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(st.hard), time.Minute)
	defer cancel()
	if err := st.store.Index(ctx, rec); err != nil {
		st.r.log.Warn("index a run", "run", rec.ID, "err", err)
		return
	}
	st.mu.Lock()
	st.rec.Seq = rec.Seq
	st.mu.Unlock()
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

// Execute runs a record this runner has in charge (Create, Adopt) and returns it ended.
func (r *Runner) Execute(ctx context.Context, id string, hooks Hooks) (*Record, error) {
	st := r.state(id)
	if st == nil {
		return nil, fmt.Errorf("run %s is not in charge here", id)
	}
	defer r.release(id)
	stop := context.AfterFunc(ctx, func() { st.cancelHard(context.Cause(ctx)) })
	defer stop()
	if r.cfg.HeartbeatEvery > 0 {
		done := make(chan struct{})
		defer close(done)
		r.wg.Go(func() {
			t := time.NewTicker(r.cfg.HeartbeatEvery)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					st.beat(ctx)
				}
			}
		})
	}
	runErr := st.execute(hooks)
	rec := st.snapshot()
	r.afterRun(st, rec)
	return rec, runErr
}

// execute runs the graph and keeps the record up to date.
func (st *runState) execute(hooks Hooks) error {
	r := st.r
	st.mu.Lock()
	rec := st.rec
	rec.Status, rec.Start = Running, r.now().UTC()
	rec.Heartbeat = r.heartbeat(rec.Start)
	indexed := rec.Seq > 0
	st.mu.Unlock()
	if !indexed {
		st.index()
	}

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
	if err := st.save(st.hard); err != nil && errors.Is(err, objectstore.ErrInvalidKey) {
		return fail(err)
	}
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
			st.save(st.hard)
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
	st.mu.Unlock()
	st.save(st.hard)
}

// compile builds the run's graph: the stages asked for, each attempt taking a turn of
// the global limiter and running under the hard context (so a drain lets it finish).
func (st *runState) compile(spec *pipelines.Spec, hooks Hooks) (*dag.Graph, error) {
	r := st.r
	dlog := hooks.Logger
	if dlog == nil {
		dlog = r.log
	}
	rt := pipelines.Runtime{
		Warehouse: st.store.Objects(),
		OpenLocation: func(ctx context.Context, location string) (objectstore.Store, string, error) {
			return r.cfg.Opener.Location(ctx, spec, location)
		},
		Delta:        delta.Options{Now: r.now, EngineInfo: r.cfg.EngineInfo, UserName: spec.Identity, Logger: dlog},
		RunID:        st.rec.ID,
		Logger:       dlog,
		MemoryBudget: r.cfg.MemoryBudget,
		SpillDir:     r.cfg.SpillDir,
		StageLogger: func(stage string) *slog.Logger {
			var next slog.Handler
			if hooks.Logger != nil {
				next = hooks.Logger.Handler()
			}
			return slog.New(&logHandler{st: st, stage: stage, next: next})
		},
		Progress: hooks.Progress,
		Execute:  r.cfg.Execute,
		Done: func(stage string, attempt int, res jobs.Result, err error) {
			st.done(stage, res)
			if hooks.Done != nil {
				hooks.Done(stage, attempt, res, err)
			}
		},
	}
	if r.cfg.Consumers != nil {
		rt.Consumers = r.cfg.Consumers()
	}
	g, err := r.cfg.Compile(spec, rt)
	if err != nil {
		return nil, err
	}
	if stages := st.rec.Trigger.Stages; len(stages) > 0 {
		if g, err = g.Subgraph(stages...); err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", spec.Name, err)
		}
	}
	nodes := make([]dag.Node, 0, g.Len())
	for _, name := range g.Names() {
		n, _ := g.Node(name)
		task := n.Task
		n.Task = dag.TaskFunc(func(ctx context.Context, attempt int) error {
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
			err := task.Run(actx, attempt)
			st.mu.Lock()
			if err != nil {
				st.logLine(name, r.now(), "attempt %d failed: %v", attempt, err)
			} else {
				st.logLine(name, r.now(), "attempt %d succeeded", attempt)
			}
			st.mu.Unlock()
			return err
		})
		nodes = append(nodes, n)
	}
	return dag.New(nodes)
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
	endAttempt := func() {
		if n := len(s.Attempts); n > 0 && s.Attempts[n-1].End.IsZero() {
			s.Attempts[n-1].End = t
			if ev.Err != nil {
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
		if ev.Err != nil {
			s.Error = ev.Err.Error()
		}
		if ev.Attempt == 0 && ev.Err != nil { // it never ran: its attempts logged nothing
			st.logLine(s.Name, t, "%s: %v", ev.State, ev.Err)
		}
	}
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

// afterRun sends the notifications and applies the history retention of an ended run.
func (r *Runner) afterRun(st *runState, rec *Record) {
	if r.cfg.Notifier != nil {
		hooks := st.spec.Notify.OnFailure
		event := "failure"
		if rec.Status == Succeeded {
			hooks, event = st.spec.Notify.OnSuccess, "success"
		}
		if len(hooks) > 0 {
			r.wg.Go(func() {
				deliveries := r.cfg.Notifier.Send(context.Background(), rec, event, hooks)
				st.mu.Lock()
				st.rec.Notifications = append(st.rec.Notifications, deliveries...)
				st.mu.Unlock()
				st.save(context.Background())
			})
		}
	}
	if h := st.spec.History; h.KeepRuns > 0 || h.KeepDays > 0 {
		if _, err := st.store.Prune(context.Background(), rec.Pipeline, h, r.now()); err != nil {
			r.log.Warn("apply run history retention", "pipeline", rec.Pipeline, "err", err)
		}
	}
}

// DefaultHeartbeatTimeout is how old a run's heartbeat may get before the run is taken
// for dead and marked interrupted.
const DefaultHeartbeatTimeout = 30 * time.Second

// absFile is the pipeline's file as an absolute path, so that a record's definition
// reads the same from any directory.
func absFile(spec *pipelines.Spec) string {
	if spec.File == "" || filepath.IsAbs(spec.File) {
		return spec.File
	}
	return filepath.Join(spec.Dir, filepath.Base(spec.File))
}
