package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// quiet drops the log lines of runners and schedulers under test.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// clock is a fake clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// opener serves one warehouse store; sources are not needed by the fake stages.
type opener struct{ wh objectstore.Store }

func (o opener) Warehouse(context.Context, *pipelines.Spec) (objectstore.Store, error) {
	return o.wh, nil
}

func (o opener) Location(context.Context, *pipelines.Spec, string) (objectstore.Store, string, error) {
	return nil, "", errors.New("no sources in these tests")
}

// stages replaces the pipeline's stages with fake ones: each attempt of a stage reports
// to started, waits while its run is held, and fails when fail says so.
type stages struct {
	mu       sync.Mutex
	held     map[string]chan struct{} // run id → closed to let its stages go on
	released map[string]bool          // runs let go
	hold     bool                     // new runs are held
	fail     map[string]int           // stage name → attempts that fail
	badInput bool                     // failing stages fail on a bad record of a file (a permanent error)
	progress bool                     // stages report progress as they start
	started  chan string              // "run id/stage#attempt"
}

func newStages() *stages {
	return &stages{held: map[string]chan struct{}{}, released: map[string]bool{}, fail: map[string]int{}, started: make(chan string, 1000)}
}

// release lets a held run's stages go on.
func (f *stages) release(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released[id] = true
	if ch, ok := f.held[id]; ok {
		close(ch)
		delete(f.held, id)
	}
}

func (f *stages) gate(id string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hold || f.released[id] {
		return nil
	}
	ch, ok := f.held[id]
	if !ok {
		ch = make(chan struct{})
		f.held[id] = ch
	}
	return ch
}

// RunStage is the fake stages' engine: each attempt reports to started, waits while its
// run is held, and fails when fail says so.
func (f *stages) RunStage(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
	name, attempt, runID := r.Stage.Name, r.Attempt, r.Env.Lineage.RunID
	f.started <- fmt.Sprintf("%s/%s#%d", runID, name, attempt)
	if f.progress && r.Env.Progress != nil { // a long stage reports as it goes
		r.Env.Progress(jobs.Progress{FilesTotal: 4, BytesTotal: 4 << 20, Phase: "reading the source files"})
		r.Env.Progress(jobs.Progress{RowsRead: 1234567, FilesDone: 1, BytesRead: 1 << 20})
		r.Env.Progress(jobs.Progress{Pass: 2, Passes: 3})
	}
	if ch := f.gate(runID); ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return jobs.Result{}, ctx.Err()
		}
	}
	f.mu.Lock()
	failing := f.fail[name] >= attempt
	f.mu.Unlock()
	res := jobs.Result{RowsRead: 3, RowsWritten: 2, Notes: []string{"fake " + name},
		VersionsWritten: []jobs.TableVersion{{Table: "raw.t", Version: int64(attempt)}}}
	var err error
	if failing {
		res = jobs.Result{}
		err = fmt.Errorf("%s broke on attempt %d", name, attempt)
		if f.badInput {
			err = fmt.Errorf("ingest %s: %w", name, &decode.Error{File: "landing/1.csv", Line: 3, Column: "amount", Msg: `column amount (2): "x" is not a decimal(10,2)`})
		}
	}
	r.Env.Logger.Info("working", "attempt", attempt)
	return res, err
}

// engineFunc is an engine written as a function.
type engineFunc func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error)

func (f engineFunc) RunStage(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
	return f(ctx, r)
}

// waitStarted waits (real time, bounded) for n stage starts and returns them.
func (f *stages) waitStarted(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		select {
		case s := <-f.started:
			got = append(got, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("waited for %d stage starts, got %v", n, got)
		}
	}
	return got
}

// noneStarted checks that no stage started.
func (f *stages) noneStarted(t *testing.T) {
	t.Helper()
	select {
	case s := <-f.started:
		t.Fatalf("stage %s started; want none", s)
	default:
	}
}

const testPipeline = `pipeline: p
schedule: "0 * * * *"
%s
tables: {raw.t: {columns: [{name: id, type: string}]}}
stages:
  - {name: a, kind: vacuum, tables: [raw.t]}
  - {name: b, kind: vacuum, tables: [raw.t], depends_on: [a]}
  - {name: c, kind: vacuum, tables: [raw.t], depends_on: [b]}
`

// oneStagePipeline is testPipeline with its first stage only.
func oneStagePipeline() string {
	return strings.SplitAfter(fmt.Sprintf(testPipeline, ""), "tables: [raw.t]}\n")[0]
}

func parseSpec(t *testing.T, yaml string) *pipelines.Spec {
	t.Helper()
	spec, err := pipelines.Parse("/pipelines/p.yaml", []byte(yaml), pipelines.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// env is a scheduler over a mem warehouse with fake stages and a fake clock.
type env struct {
	clock  *clock
	wh     objectstore.Store
	store  *Store
	stages *stages
	runner *Runner
	sched  *Scheduler
}

func newEnv(t *testing.T, start time.Time, wh objectstore.Store, id string) *env {
	t.Helper()
	if wh == nil {
		wh = mem.New(mem.Config{})
	}
	e := &env{clock: newClock(start), wh: wh, stages: newStages()}
	e.runner = NewRunner(RunnerConfig{
		Opener: opener{wh}, Now: e.clock.Now, Engine: e.stages,
		Identity: Identity{Host: "testhost", PID: 1000, Instance: id}, Logger: quiet,
	})
	e.sched = New(Config{Runner: e.runner, Now: e.clock.Now, Alive: func(string, int) bool { return true }, Logger: quiet})
	e.store = NewStore(wh)
	t.Cleanup(func() {
		e.stages.mu.Lock()
		for id, ch := range e.stages.held {
			close(ch)
			delete(e.stages.held, id)
		}
		e.stages.hold = false
		e.stages.mu.Unlock()
		e.sched.Wait()
	})
	return e
}

// claimSlot claims the slot's run of spec, as a scheduler does before dispatching it,
// and returns its record (in the runner's charge).
func (e *env) claimSlot(t *testing.T, spec *pipelines.Spec, slot time.Time) *Record {
	t.Helper()
	ctx := context.Background()
	st, err := e.runner.Store(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.runner.Prepare(spec, Trigger{Kind: Scheduled, Slot: slot}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.runner.claim(ctx, spec, st, rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func (e *env) load(t *testing.T, specs ...*pipelines.Spec) {
	t.Helper()
	if err := e.sched.Set(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
}

// tickAt moves the clock to ts and ticks.
func (e *env) tickAt(ts time.Time) {
	e.clock.Set(ts)
	e.sched.Tick(context.Background())
}

// record reads a run's record.
func (e *env) record(t *testing.T, id string) *Record {
	t.Helper()
	r, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runs lists a pipeline's runs, oldest first, as "id status [reason]" lines.
func (e *env) runs(t *testing.T, pipeline string) []string {
	t.Helper()
	entries, err := e.store.List(context.Background(), pipeline, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(entries) - 1; i >= 0; i-- {
		en := entries[i]
		line := fmt.Sprintf("%s %s %s", strings.TrimPrefix(en.ID, pipeline+"@"), en.Trigger, en.Status)
		if en.Reason != "" {
			line += ": " + en.Reason
		}
		out = append(out, line)
	}
	return out
}

// waitStatus waits (real time, bounded) until run id has the status.
func (e *env) waitStatus(t *testing.T, id string, want Status) *Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.store.Get(context.Background(), id)
		if err == nil && r.Status == want && (want.Active() || !e.inCharge(id)) {
			return r
		}
		if time.Now().After(deadline) {
			got := "no record"
			if r != nil {
				got = string(r.Status)
			}
			t.Fatalf("run %s: status %s, want %s", id, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// inCharge reports whether the scheduler still counts run id as running (it does for a
// moment after storing its final record).
func (e *env) inCharge(id string) bool {
	if e.sched == nil {
		return false
	}
	e.sched.mu.Lock()
	defer e.sched.mu.Unlock()
	for _, ps := range e.sched.pipes {
		if ps.running[id] {
			return true
		}
	}
	return false
}

// crashStore is a warehouse that dies (every operation fails) once a key with the given
// suffix has been created: a process that crashed right after that write.
type crashStore struct {
	objectstore.Store
	suffix string
	mu     sync.Mutex
	dead   bool
}

var errCrashed = errors.New("the process crashed")

func (c *crashStore) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *crashStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if c.isDead() {
		return nil, errCrashed
	}
	return c.Store.Get(ctx, key)
}

func (c *crashStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if c.isDead() {
		return errCrashed
	}
	return c.Store.Put(ctx, key, r, size)
}

func (c *crashStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	if c.isDead() {
		return errCrashed
	}
	err := c.Store.PutIfAbsent(ctx, key, r, size)
	if err == nil && strings.HasSuffix(key, c.suffix) {
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
	}
	return err
}

func (c *crashStore) List(ctx context.Context, prefix, after string) ([]objectstore.ObjectInfo, error) {
	if c.isDead() {
		return nil, errCrashed
	}
	return c.Store.List(ctx, prefix, after)
}

func (c *crashStore) Delete(ctx context.Context, key string) error {
	if c.isDead() {
		return errCrashed
	}
	return c.Store.Delete(ctx, key)
}
