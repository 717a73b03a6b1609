package dag

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitLimit only guards against a hung test; no test asserts how long anything took.
const waitLimit = 10 * time.Second

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock returns a later time, by one second, on every call.
type fakeClock struct{ n atomic.Int64 }

func (c *fakeClock) Now() time.Time { return epoch.Add(time.Duration(c.n.Add(1)) * time.Second) }

// fakeSleep records the delays asked for and returns at once.
type fakeSleep struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *fakeSleep) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delays = append(s.delays, d)
	return ctx.Err()
}

func (s *fakeSleep) Delays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.delays)
}

// observer records events, notices overlapping calls, and optionally forwards events.
type observer struct {
	mu       sync.Mutex
	events   []Event
	inFlight atomic.Int32
	overlap  atomic.Bool
	forward  chan Event // if not nil, gets every event; must be big enough not to block
}

func (o *observer) Observe(ev Event) {
	if o.inFlight.Add(1) > 1 {
		o.overlap.Store(true)
	}
	defer o.inFlight.Add(-1)
	o.mu.Lock()
	o.events = append(o.events, ev)
	o.mu.Unlock()
	if o.forward != nil {
		o.forward <- ev
	}
}

func (o *observer) Of(name string) []Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Event
	for _, ev := range o.events {
		if ev.Node == name {
			out = append(out, ev)
		}
	}
	return out
}

func states(evs []Event) []State {
	out := make([]State, len(evs))
	for i, ev := range evs {
		out[i] = ev.State
	}
	return out
}

// checkSequence checks one node's events: queued, then either skipped or cancelled
// without running, or running → (retrying → running)* → a terminal state, with attempts
// counting up from 1 and times strictly increasing.
func checkSequence(evs []Event) error {
	if len(evs) == 0 || evs[0].State != Queued || evs[0].Attempt != 0 {
		return fmt.Errorf("first event is not queued with attempt 0: %v", states(evs))
	}
	prev := evs[0]
	for k, ev := range evs[1:] {
		if !ev.Time.After(prev.Time) {
			return fmt.Errorf("event %d time %v is not after %v", k+1, ev.Time, prev.Time)
		}
		if prev.State.Terminal() {
			return fmt.Errorf("event after terminal state: %v", states(evs))
		}
		ok := false
		switch prev.State {
		case Queued:
			ok = (ev.State == Running && ev.Attempt == 1) ||
				((ev.State == Skipped || ev.State == Cancelled) && ev.Attempt == 0)
		case Running:
			ok = ev.Attempt == prev.Attempt && (ev.State == Retrying || ev.State.Terminal())
		case Retrying:
			ok = (ev.State == Running && ev.Attempt == prev.Attempt+1) ||
				(ev.State == Cancelled && ev.Attempt == prev.Attempt)
		}
		if !ok {
			return fmt.Errorf("%s (attempt %d) after %s (attempt %d): %v",
				ev.State, ev.Attempt, prev.State, prev.Attempt, states(evs))
		}
		prev = ev
	}
	if !prev.State.Terminal() {
		return fmt.Errorf("no terminal state: %v", states(evs))
	}
	return nil
}

func mustNew(t *testing.T, nodes ...Node) *Graph {
	t.Helper()
	g, err := New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func task(f func(ctx context.Context, attempt int) error) TaskFunc { return f }

// runAsync runs g in a goroutine the test waits for through wait.
func runAsync(ctx context.Context, g *Graph, opts Options) (wait func(t *testing.T) (RunResult, error), returned func() bool) {
	type out struct {
		res RunResult
		err error
	}
	ch := make(chan out, 1)
	var done atomic.Bool
	go func() {
		res, err := Run(ctx, g, opts)
		done.Store(true)
		ch <- out{res, err}
	}()
	wait = func(t *testing.T) (RunResult, error) {
		t.Helper()
		select {
		case o := <-ch:
			return o.res, o.err
		case <-time.After(waitLimit):
			t.Fatal("Run did not return")
			return RunResult{}, nil
		}
	}
	return wait, done.Load
}

func waitFor(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("gave up waiting for %s", what)
	}
}
