package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/internal/lease"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/lineage"
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

// Identity names the process that runs and heartbeats runs and holds leases (its
// Instance is one per Runner).
type Identity = lease.Identity

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Opener Opener
	// Now is the clock of records, heartbeats and commits; nil means time.Now.
	Now func() time.Time
	// Identity is who heartbeats; zero means lease.Local().
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
	// Engine carries out each stage attempt (the executor's dispatcher); nil runs every
	// stage in this process and refuses those on Spark.
	Engine Engine
	// OnChange, when set, is given a copy of a run's record in charge each time it is
	// saved (at state changes, several of which may come in one save, and heartbeats),
	// in the order of the saves; it must not block (the web's live views and metrics).
	OnChange func(*Record)
	// MemoryBudget and SpillDir are the stages' defaults (see jobs.Env).
	MemoryBudget jobs.ByteSize
	SpillDir     string
	// Lineage sends the OpenLineage events of pipelines with lineage; nil means a
	// client with the default retries.
	Lineage *lineage.Client
}

// Runner runs pipelines and records every run. It is safe for concurrent use.
type Runner struct {
	cfg     RunnerConfig
	now     func() time.Time
	log     *slog.Logger
	lineage *lineage.Client

	mu     sync.Mutex // guards owned and stores
	owned  map[string]*runState
	stores map[objectstore.Store]*Store

	wg sync.WaitGroup // notifications and heartbeat timers
}

// NewRunner returns a Runner.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Identity == (Identity{}) {
		cfg.Identity = lease.Local()
	}
	if cfg.Engine == nil {
		cfg.Engine = inProcess{}
	}
	if cfg.Lineage == nil {
		cfg.Lineage = lineage.NewClient(lineage.ClientConfig{})
	}
	r := &Runner{cfg: cfg, now: cfg.Now, log: cfg.Logger, lineage: cfg.Lineage, owned: map[string]*runState{}, stores: map[objectstore.Store]*Store{}}
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
		s.location = spec.Warehouse
		r.stores[wh] = s
	}
	return s, nil
}

// Hooks let a caller watch a run as it goes (the CLI's live display). Each may be nil.
type Hooks struct {
	// Observer is told every stage state change, after the run's record has it (its
	// write to the run store may still be under way).
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
// before any stage starts and as its state changes. The error is nil when the run
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
	st.mu.Lock()
	st.rec.Status, st.rec.Reason, st.rec.End = status, reason, r.now().UTC()
	for i := range st.rec.Stages {
		if st.rec.Stages[i].Status.Active() {
			st.rec.Stages[i].Status = status
		}
	}
	st.mu.Unlock()
	err := st.save(ctx)
	rec := st.snapshot()
	r.ended(rec, st.store)
	return rec, err
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

// Wait waits for the notifications, heartbeat timers and background writes of records
// the runner started.
func (r *Runner) Wait() { r.wg.Wait() }

// Heartbeat records a sign of life on every run in charge. A run whose stored record
// shows that another process took it over (it was found stale and marked interrupted,
// or run again) is cancelled here and no longer written.
func (r *Runner) Heartbeat(ctx context.Context) {
	for _, st := range r.all() {
		st.beat(ctx)
	}
}

// dispatched marks a run in charge here running from now: its Start is the moment a
// scheduler started it, as Airflow's run start_date is, not when Execute's goroutine got
// to it. The record says so at its next save.
func (r *Runner) dispatched(id string) {
	if st := r.state(id); st != nil {
		st.mu.Lock()
		st.start(r.now())
		st.mu.Unlock()
	}
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

// ended tells the run a retry is of how the retry ended, and logs the run's end: one
// line per run.
func (r *Runner) ended(rec *Record, store *Store) {
	if err := store.noteRetry(context.Background(), rec); err != nil {
		r.log.Warn("note a retry's state on the run it retries", "run", rec.ID, "of", rec.Trigger.Of, "err", err)
	}
	r.logEnd(rec)
}

// logEnd logs a run's end: its pipeline, trigger, status, duration and why.
func (r *Runner) logEnd(rec *Record) {
	args := []any{"run", rec.ID, "pipeline", rec.Pipeline, "trigger", string(rec.Trigger.Kind), "status", string(rec.Status)}
	if !rec.Start.IsZero() && !rec.End.IsZero() {
		args = append(args, "duration", rec.End.Sub(rec.Start).Round(time.Millisecond).String())
	}
	if rec.Attempt > 1 {
		args = append(args, "attempt", rec.Attempt)
	}
	if rec.Error != "" {
		args = append(args, "error", rec.Error)
	} else if rec.Reason != "" {
		args = append(args, "reason", rec.Reason)
	}
	r.log.Info("run ended", args...)
}

// afterRun sends the notifications and applies the history retention of an ended run.
func (r *Runner) afterRun(st *runState, rec *Record) {
	r.ended(rec, st.store)
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
