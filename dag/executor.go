package dag

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// DefaultMaxParallel is the number of nodes that run at once when Options.MaxParallel is
// not set.
const DefaultMaxParallel = 4

// Options tune a run. The zero value is ready to use.
type Options struct {
	// MaxParallel bounds how many nodes run at once; 0 or less means DefaultMaxParallel.
	// A node waiting to retry keeps its slot.
	MaxParallel int
	// Observer, if not nil, is told every state change. It is called serially, from the
	// goroutine that called Run, so it needs no locking; running tasks wait while it
	// works, so it should be quick (hand events to a channel or a buffer if not). Each
	// node's events arrive in the order its state changed; events of different nodes
	// may arrive slightly out of Time order.
	Observer func(Event)
	// Now is the clock for event and result times; nil means time.Now. It is called from
	// several goroutines.
	Now func() time.Time
	// Sleep waits d, or less if ctx is done first, between a failed attempt and the next;
	// nil means a real timer. It is called from several goroutines.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand is the jitter source, returning a number in [0, 1); nil means
	// math/rand/v2.Float64. It is called from several goroutines.
	Rand func() float64
}

func (o Options) withDefaults() Options {
	if o.MaxParallel <= 0 {
		o.MaxParallel = DefaultMaxParallel
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	return o
}

// sleep waits d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs every node of g, each once all its dependencies have succeeded, at most
// opts.MaxParallel at a time; among nodes ready together, the one declared first starts
// first. A failed attempt is retried after its node's backoff while retries remain and
// the error is not Permanent; a task that panics fails at once. A node that fails for
// good makes every node downstream of it skipped, and independent nodes go on.
//
// When ctx is done, no new attempt starts, nodes not yet started become cancelled, and
// Run waits for the running tasks, which see their context done: one that returns an
// error is cancelled, one that returns nil (it reached a safe point) has succeeded.
//
// Run returns when every node has reached a terminal state and every goroutine it started
// has exited. The error is nil if the run succeeded; otherwise it names every failed node
// with its error, or, for a cancelled run, wraps ctx's cause.
func Run(ctx context.Context, g *Graph, opts Options) (RunResult, error) {
	if g == nil {
		return RunResult{}, errors.New("run graph: nil graph")
	}
	r := &runner{
		g:       g,
		opts:    opts.withDefaults(),
		res:     make([]NodeResult, g.Len()),
		started: make([]bool, g.Len()),
		pending: make([]int, g.Len()),
		updates: make(chan update),
	}
	return r.run(ctx)
}

// runner is the state of one run. Every field except updates is owned by the goroutine
// that called Run; workers only read g and opts and send on updates.
type runner struct {
	g    *Graph
	opts Options

	res       []NodeResult // by node position
	started   []bool       // a worker was started for the node
	pending   []int        // dependencies not yet succeeded
	ready     []int        // positions of nodes ready to start, ascending
	running   int          // workers started and not yet reported terminal
	cancelled bool         // ctx is done and the queued nodes were cancelled

	updates chan update // workers → coordinator; unbuffered
	wg      sync.WaitGroup
}

// update is a worker's report of a state change of its node.
type update struct {
	node int
	ev   Event
}

func (r *runner) run(ctx context.Context) (RunResult, error) {
	start := r.opts.Now()
	for i, n := range r.g.nodes {
		r.res[i] = NodeResult{Name: n.Name}
		r.pending[i] = len(r.g.deps[i])
		if r.pending[i] == 0 {
			r.ready = append(r.ready, i)
		}
	}
	for _, i := range r.g.order {
		r.emit(i, Event{State: Queued, Time: r.opts.Now()})
	}
	done := ctx.Done()
	for {
		if !r.cancelled && ctx.Err() != nil {
			r.cancelQueued(ctx)
			done = nil
		}
		for !r.cancelled && r.running < r.opts.MaxParallel && len(r.ready) > 0 {
			i := r.ready[0]
			r.ready = r.ready[1:]
			r.start(ctx, i)
		}
		if r.running == 0 {
			break // nothing running and nothing ready: every node is terminal
		}
		select {
		case u := <-r.updates:
			r.handle(u)
		case <-done:
			// The top of the loop cancels the queued nodes.
		}
	}
	r.wg.Wait()
	return r.result(ctx, start)
}

// start launches a worker for node i.
func (r *runner) start(ctx context.Context, i int) {
	r.started[i] = true
	r.running++
	r.wg.Go(func() { r.work(ctx, i) })
}

// handle records a worker's update and, on a terminal state, releases its dependents.
func (r *runner) handle(u update) {
	r.emit(u.node, u.ev)
	if !u.ev.State.Terminal() {
		return
	}
	r.running--
	switch u.ev.State {
	case Succeeded:
		for _, j := range r.g.dependents[u.node] {
			if r.pending[j]--; r.pending[j] == 0 && !r.cancelled {
				k, _ := slices.BinarySearch(r.ready, j)
				r.ready = slices.Insert(r.ready, k, j)
			}
		}
	case Failed:
		r.skipDownstream(u.node)
	}
}

// skipDownstream marks every node downstream of the failed node i skipped. None of them
// can have started: each waits for i to succeed.
func (r *runner) skipDownstream(i int) {
	down := make([]bool, r.g.Len())
	stack := []int{i}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range r.g.dependents[k] {
			if !down[j] {
				down[j] = true
				stack = append(stack, j)
			}
		}
	}
	name := r.g.nodes[i].Name
	for _, j := range r.g.order {
		if down[j] && !r.started[j] && r.res[j].State == Queued {
			r.emit(j, Event{State: Skipped, Time: r.opts.Now(), Err: &SkippedError{Upstream: name}})
		}
	}
}

// cancelQueued marks every node not yet started cancelled; none will start.
func (r *runner) cancelQueued(ctx context.Context) {
	r.cancelled = true
	r.ready = nil
	cause := context.Cause(ctx)
	for _, i := range r.g.order {
		if !r.started[i] && r.res[i].State == Queued {
			r.emit(i, Event{State: Cancelled, Time: r.opts.Now(), Err: cause})
		}
	}
}

// emit records a state change of node i and tells the observer.
func (r *runner) emit(i int, ev Event) {
	ev.Node = r.g.nodes[i].Name
	res := &r.res[i]
	res.State = ev.State
	switch {
	case ev.State == Running:
		res.Attempts = ev.Attempt
		if res.Start.IsZero() {
			res.Start = ev.Time
		}
	case ev.State.Terminal():
		res.End = ev.Time
		res.Err = ev.Err
	}
	if r.opts.Observer != nil {
		r.opts.Observer(ev)
	}
}

func (r *runner) result(ctx context.Context, start time.Time) (RunResult, error) {
	out := RunResult{Status: Succeeded, Start: start, Nodes: make([]NodeResult, 0, r.g.Len())}
	var failed []error
	for _, i := range r.g.order {
		n := r.res[i]
		out.Nodes = append(out.Nodes, n)
		switch n.State {
		case Cancelled:
			out.Status = Cancelled
		case Failed:
			failed = append(failed, fmt.Errorf("node %q: %w", n.Name, n.Err))
			fallthrough
		case Skipped:
			if out.Status != Cancelled {
				out.Status = Failed
			}
		}
	}
	out.End = r.opts.Now()
	switch {
	case out.Status == Cancelled:
		return out, fmt.Errorf("run cancelled: %w", context.Cause(ctx))
	case len(failed) > 0:
		return out, fmt.Errorf("run failed: %w", errors.Join(failed...))
	}
	return out, nil
}

// work runs node i's attempts and reports each state change to the coordinator; its
// last report is always a terminal state.
func (r *runner) work(ctx context.Context, i int) {
	n := &r.g.nodes[i]
	report := func(s State, attempt int, err error, delay time.Duration) {
		r.updates <- update{node: i, ev: Event{State: s, Attempt: attempt, Time: r.opts.Now(), Err: err, Delay: delay}}
	}
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			report(Cancelled, attempt-1, context.Cause(ctx), 0)
			return
		}
		report(Running, attempt, nil, 0)
		err := runAttempt(ctx, n, attempt)
		switch {
		case err == nil:
			report(Succeeded, attempt, nil, 0)
			return
		case ctx.Err() != nil:
			report(Cancelled, attempt, err, 0)
			return
		case attempt > n.Retries || IsPermanent(err):
			report(Failed, attempt, err, 0)
			return
		}
		delay := n.Backoff.Delay(attempt, r.opts.Rand)
		report(Retrying, attempt, err, delay)
		_ = r.opts.Sleep(ctx, delay) // cancellation is checked at the top of the loop
	}
}

// runAttempt runs one attempt of n under its timeout, turning a panic into a permanent
// error.
func runAttempt(ctx context.Context, n *Node, attempt int) (err error) {
	actx := ctx
	if n.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, n.Timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("task panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	err = n.Task.Run(actx, attempt)
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("attempt %d timed out after %s: %w", attempt, n.Timeout, err)
	}
	return err
}
