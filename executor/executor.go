package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// Engine names where a stage runs.
type Engine string

// The engines.
const (
	Local Engine = "local"
	Spark Engine = "spark"
)

// Task is one attempt of a stage.
type Task struct {
	// Key identifies the attempt (pipeline/stage/run/attempt): Submit runs a key once.
	Key   string
	Stage jobs.Stage
	Env   *jobs.Env
	// OnOperation, when set, is told each Spark statement's session and operation ids
	// before it is sent (the dispatcher records them in the table leases).
	OnOperation func(sessionID, operationID string)
}

// State is where a task stands.
type State string

// Task states. Committed is a task this process did not run whose work the target's
// Delta log shows committed; NotSubmitted one it neither ran nor finds committed.
const (
	Running      State = "running"
	Succeeded    State = "succeeded"
	Failed       State = "failed"
	Cancelled    State = "cancelled"
	Committed    State = "committed"
	NotSubmitted State = "not_submitted"
)

// Status is a task's state and, once it ended, its result and error.
type Status struct {
	State  State
	Result jobs.Result
	Err    error
}

// Executor carries out tasks on one engine.
type Executor interface {
	// Submit starts the task and returns at once; a key submitted before is not
	// started again.
	Submit(ctx context.Context, t Task) error
	// Status says where the task stands: as this process ran it, else as the target's
	// Delta log shows (Committed or NotSubmitted).
	Status(ctx context.Context, t Task) (Status, error)
	// Wait waits for a submitted task to end and returns its result; when ctx ends
	// first the task is cancelled.
	Wait(ctx context.Context, key string) (jobs.Result, error)
	// Logs returns what the task logged (on Spark: sessions, statements, operation
	// ids), oldest first.
	Logs(key string) []string
	// Cancel stops a running task (on Spark: interrupts its operation on the server).
	Cancel(ctx context.Context, key string) error
	// Close cancels every running task and waits for them.
	Close() error
}

// ErrUnknownTask is returned for a key never submitted to this executor.
var ErrUnknownTask = errors.New("unknown task")

// ErrCancelled is the error (wrapped) of a task stopped by Cancel.
var ErrCancelled = errors.New("task cancelled")

// tasks is the in-process table of submitted tasks that both engines share: it runs
// each key once in a goroutine it owns, and keeps its state, result and log.
type tasks struct {
	engine Engine
	run    func(ctx context.Context, t Task, log func(format string, args ...any)) (jobs.Result, error)

	mu sync.Mutex // guards m and each task's mutable fields
	m  map[string]*task
	wg sync.WaitGroup
}

type task struct {
	state  State
	res    jobs.Result
	err    error
	logs   []string
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func newTasks(engine Engine, run func(ctx context.Context, t Task, log func(format string, args ...any)) (jobs.Result, error)) *tasks {
	return &tasks{engine: engine, run: run, m: map[string]*task{}}
}

// Submit implements Executor.
func (ts *tasks) Submit(ctx context.Context, t Task) error {
	if t.Key == "" {
		return errors.New("executor: a task needs a key")
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.m[t.Key]; ok {
		return nil
	}
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	tk := &task{state: Running, cancel: cancel, done: make(chan struct{})}
	ts.m[t.Key] = tk
	ts.wg.Go(func() {
		defer cancel(nil)
		log := func(format string, args ...any) {
			line := time.Now().UTC().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
			ts.mu.Lock()
			tk.logs = append(tk.logs, line)
			ts.mu.Unlock()
			if t.Env != nil {
				t.Env.Log().Info(fmt.Sprintf(format, args...), "engine", string(ts.engine))
			}
		}
		res, err := ts.run(tctx, t, log)
		if res.Engine == "" {
			res.Engine = string(ts.engine)
		}
		ts.mu.Lock()
		tk.res, tk.err = res, err
		switch {
		case err == nil:
			tk.state = Succeeded
		case tctx.Err() != nil:
			tk.state = Cancelled
		default:
			tk.state = Failed
		}
		ts.mu.Unlock()
		close(tk.done)
	})
	return nil
}

// Status implements Executor.
func (ts *tasks) Status(ctx context.Context, t Task) (Status, error) {
	ts.mu.Lock()
	tk, ok := ts.m[t.Key]
	if ok {
		st := Status{State: tk.state, Result: tk.res, Err: tk.err}
		ts.mu.Unlock()
		return st, nil
	}
	ts.mu.Unlock()
	return statusFromLog(ctx, t)
}

// statusFromLog reads a task's state from its target's Delta log: the stage's plan is
// up to date when its txn is committed.
func statusFromLog(ctx context.Context, t Task) (Status, error) {
	pl, ok := t.Stage.(jobs.Planner)
	if !ok {
		return Status{State: NotSubmitted}, nil
	}
	p, err := pl.Plan(ctx, t.Env)
	if err != nil {
		return Status{}, err
	}
	if p.UpToDate {
		return Status{State: Committed, Result: p.Result}, nil
	}
	return Status{State: NotSubmitted, Result: p.Result}, nil
}

// Wait implements Executor.
func (ts *tasks) Wait(ctx context.Context, key string) (jobs.Result, error) {
	ts.mu.Lock()
	tk, ok := ts.m[key]
	ts.mu.Unlock()
	if !ok {
		return jobs.Result{}, fmt.Errorf("%w %s", ErrUnknownTask, key)
	}
	select {
	case <-tk.done:
	case <-ctx.Done():
		tk.cancel(context.Cause(ctx))
		<-tk.done
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return tk.res, tk.err
}

// Logs implements Executor.
func (ts *tasks) Logs(key string) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if tk, ok := ts.m[key]; ok {
		return append([]string(nil), tk.logs...)
	}
	return nil
}

// Cancel implements Executor.
func (ts *tasks) Cancel(ctx context.Context, key string) error {
	ts.mu.Lock()
	tk, ok := ts.m[key]
	ts.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w %s", ErrUnknownTask, key)
	}
	tk.cancel(ErrCancelled)
	select {
	case <-tk.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forget drops an ended task from the table (its key may then run again).
func (ts *tasks) forget(key string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if tk, ok := ts.m[key]; ok && tk.state != Running {
		delete(ts.m, key)
	}
}

// Close implements Executor.
func (ts *tasks) Close() error {
	ts.mu.Lock()
	for _, tk := range ts.m {
		tk.cancel(errors.New("executor closed"))
	}
	ts.mu.Unlock()
	ts.wg.Wait()
	return nil
}

// LocalExecutor runs stages in this process: jobs.Stage.Run, exactly as without an
// executor.
type LocalExecutor struct{ *tasks }

var _ Executor = (*LocalExecutor)(nil)

// NewLocal returns the local executor.
func NewLocal() *LocalExecutor {
	return &LocalExecutor{newTasks(Local, func(ctx context.Context, t Task, _ func(string, ...any)) (jobs.Result, error) {
		return t.Stage.Run(ctx, t.Env)
	})}
}
