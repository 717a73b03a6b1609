package dag

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCancel(t *testing.T) {
	baseline := runtime.NumGoroutine()
	interrupted := errors.New("interrupt")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)

	var started, returned atomic.Int32
	letGo := make(chan struct{})
	running := make(chan string, 10)
	sawCancel := map[string]*atomic.Bool{"r1": {}, "r2": {}, "safe": {}}
	var mu sync.Mutex
	ran := map[string]bool{}
	mk := func(name string, deps ...string) Node {
		return Node{Name: name, DependsOn: deps, Retries: 3, Task: task(func(ctx context.Context, _ int) error {
			started.Add(1)
			defer returned.Add(1)
			mu.Lock()
			ran[name] = true
			mu.Unlock()
			running <- name
			<-ctx.Done()
			sawCancel[name].Store(true)
			<-letGo // still running after the cancel: Run must wait for us
			if name == "safe" {
				return nil // reached a safe point and finished its work
			}
			return ctx.Err()
		})}
	}
	g := mustNew(t, mk("r1"), mk("r2"), mk("safe"), mk("q1"), mk("q2"), mk("d", "r1"))
	obs := &observer{forward: make(chan Event, 100)}
	wait, returnedEarly := runAsync(ctx, g, Options{MaxParallel: 3, Observer: obs.Observe})

	for range 3 {
		select {
		case <-running:
		case <-time.After(waitLimit):
			t.Fatal("three tasks never ran at once")
		}
	}
	cancel(interrupted)
	// Queued nodes become cancelled at once, while the running ones are still running.
	pending := map[string]bool{"q1": true, "q2": true, "d": true}
	for len(pending) > 0 {
		select {
		case ev := <-obs.forward:
			if ev.State == Cancelled {
				if !pending[ev.Node] {
					t.Fatalf("%s cancelled before the queued nodes", ev.Node)
				}
				delete(pending, ev.Node)
			}
		case <-time.After(waitLimit):
			t.Fatalf("queued nodes %v never cancelled", pending)
		}
	}
	if returnedEarly() {
		t.Fatal("Run returned before its running tasks did")
	}
	close(letGo)
	res, err := wait(t)

	for name, saw := range sawCancel {
		if !saw.Load() {
			t.Errorf("%s never saw its context done", name)
		}
	}
	for _, name := range []string{"r1", "r2", "safe", "q1", "q2", "d"} {
		got, _ := res.Node(name)
		want := map[string]State{"safe": Succeeded}[name]
		if want == "" {
			want = Cancelled
		}
		if got.State != want {
			t.Errorf("%s: state %s, want %s", name, got.State, want)
		}
		if queued := name == "q1" || name == "q2" || name == "d"; queued && (ran[name] || got.Attempts != 0 || !errors.Is(got.Err, interrupted)) {
			t.Errorf("%s: ran = %v, attempts %d, error %v; want never run, cancelled by the interrupt", name, ran[name], got.Attempts, got.Err)
		}
		if err := checkSequence(obs.Of(name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if r1, _ := res.Node("r1"); r1.Attempts != 1 || !errors.Is(r1.Err, context.Canceled) {
		t.Errorf("r1: %d attempts, error %v; want 1 attempt, not retried, ending in context.Canceled", r1.Attempts, r1.Err)
	}
	if res.Status != Cancelled || !errors.Is(err, interrupted) {
		t.Errorf("Run() = %s, %v; want cancelled, wrapping the interrupt", res.Status, err)
	}
	if s, r := started.Load(), returned.Load(); s != 3 || r != 3 {
		t.Errorf("%d tasks started, %d returned by the time Run returned; want 3 and 3", s, r)
	}
	assertNoLeak(t, baseline)
}

// assertNoLeak waits for the goroutine count to fall back to baseline: a goroutine that
// signalled its WaitGroup may take a moment to exit.
func assertNoLeak(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// Cancelling while nodes are starting must give each node exactly one terminal event,
// whether or not its worker had reported it running yet.
func TestRunCancelWhileStarting(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	block := task(func(ctx context.Context, _ int) error { <-ctx.Done(); return ctx.Err() })
	g := mustNew(t, Node{Name: "x", Task: block}, Node{Name: "y", Task: block}, Node{Name: "z", Task: block})
	obs := &observer{}
	res, err := Run(ctx, g, Options{MaxParallel: 2, Observer: func(ev Event) {
		obs.Observe(ev)
		if ev.State == Running {
			cancel() // the other started node has not been reported running yet
		}
	}})
	for _, name := range []string{"x", "y", "z"} {
		if err := checkSequence(obs.Of(name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got, _ := res.Node(name); got.State != Cancelled {
			t.Errorf("%s: state %s, want cancelled", name, got.State)
		}
	}
	if res.Status != Cancelled || !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %s, %v; want cancelled, context.Canceled", res.Status, err)
	}
}

func TestRunCancelDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var attempts atomic.Int32
	g := mustNew(t, Node{Name: "flaky", Retries: 5, Backoff: Backoff{Initial: time.Hour},
		Task: task(func(context.Context, int) error {
			attempts.Add(1)
			return errors.New("unavailable")
		})})
	obs := &observer{}
	// The real sleep: it must give up its hour-long wait when the run is cancelled.
	res, err := Run(ctx, g, Options{Observer: func(ev Event) {
		obs.Observe(ev)
		if ev.State == Retrying {
			cancel()
		}
	}})
	got, _ := res.Node("flaky")
	if got.State != Cancelled || got.Attempts != 1 || attempts.Load() != 1 {
		t.Errorf("node = %s after %d attempts (task ran %d times), want cancelled after 1", got.State, got.Attempts, attempts.Load())
	}
	if want := []State{Queued, Running, Retrying, Cancelled}; !slices.Equal(states(obs.Of("flaky")), want) {
		t.Errorf("events %v, want %v", states(obs.Of("flaky")), want)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run() error = %v, want context.Canceled", err)
	}
}

func TestRunAlreadyCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var ran atomic.Bool
	mark := task(func(context.Context, int) error { ran.Store(true); return nil })
	g := mustNew(t, Node{Name: "a", Task: mark}, Node{Name: "b", Task: mark, DependsOn: []string{"a"}})
	res, err := Run(ctx, g, Options{})
	if ran.Load() {
		t.Error("a task ran although the run was cancelled before it began")
	}
	for _, n := range res.Nodes {
		if n.State != Cancelled {
			t.Errorf("%s: state %s, want cancelled", n.Name, n.State)
		}
	}
	if res.Status != Cancelled || !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %s, %v; want cancelled, context.Canceled", res.Status, err)
	}
}
