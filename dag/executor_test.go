package dag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunRespectsMaxParallel(t *testing.T) {
	tests := []struct {
		name        string
		maxParallel int
		want        int
	}{
		{"one at a time", 1, 1},
		{"three", 3, 3},
		{"default", 0, DefaultMaxParallel},
		{"more slots than nodes", 50, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cur, peak atomic.Int32
			full, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			var nodes []Node
			for i := range 12 {
				nodes = append(nodes, Node{Name: fmt.Sprint("n", i), Task: task(func(context.Context, int) error {
					n := cur.Add(1)
					defer cur.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					if n == int32(tt.want) {
						once.Do(func() { close(full) })
					}
					<-release
					return nil
				})})
			}
			wait, _ := runAsync(t.Context(), mustNew(t, nodes...), Options{MaxParallel: tt.maxParallel})
			waitFor(t, fmt.Sprintf("%d tasks running at once", tt.want), full)
			// Give an executor that ignores its limit a chance to start one task too many
			// while the others hold their slots. (Not a timing assertion: a correct
			// executor passes however long this takes.)
			time.Sleep(50 * time.Millisecond)
			close(release)
			res, err := wait(t)
			if err != nil || res.Status != Succeeded {
				t.Fatalf("Run() = %s, %v; want succeeded", res.Status, err)
			}
			if got := peak.Load(); got != int32(tt.want) {
				t.Errorf("most tasks running at once = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestRunOneAtATimeFollowsReadyOrder(t *testing.T) {
	var mu sync.Mutex
	var started []string
	mk := func(name string, deps ...string) Node {
		return Node{Name: name, DependsOn: deps, Task: task(func(context.Context, int) error {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, name)
			return nil
		})}
	}
	g := mustNew(t, mk("report", "clean"), mk("extract"), mk("clean", "extract"), mk("archive"), mk("audit", "extract"))
	if _, err := Run(t.Context(), g, Options{MaxParallel: 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{"extract", "clean", "report", "archive", "audit"}
	if !slices.Equal(started, want) || !slices.Equal(g.Order(), want) {
		t.Errorf("start order = %q, Order() = %q; want both %q", started, g.Order(), want)
	}
}

func TestRunDiamondInDependencyOrder(t *testing.T) {
	var mu sync.Mutex
	var log []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	started := map[string]chan struct{}{"b": make(chan struct{}), "c": make(chan struct{})}
	mk := func(name string, deps ...string) Node {
		return Node{Name: name, DependsOn: deps, Task: task(func(context.Context, int) error {
			record("start " + name)
			defer record("end " + name)
			// b and c are independent: each waits to see the other running.
			if ch, ok := started[name]; ok {
				close(ch)
				other := map[string]string{"b": "c", "c": "b"}[name]
				select {
				case <-started[other]:
				case <-time.After(waitLimit):
					return fmt.Errorf("%s never saw %s running", name, other)
				}
			}
			return nil
		})}
	}
	g := mustNew(t, mk("d", "b", "c"), mk("b", "a"), mk("c", "a"), mk("a"))
	res, err := Run(t.Context(), g, Options{})
	if err != nil || res.Status != Succeeded {
		t.Fatalf("Run() = %s, %v; want succeeded", res.Status, err)
	}
	pos := func(s string) int { return slices.Index(log, s) }
	for _, before := range [][2]string{
		{"end a", "start b"}, {"end a", "start c"}, {"end b", "start d"}, {"end c", "start d"},
		{"start b", "end c"}, {"start c", "end b"},
	} {
		if pos(before[0]) < 0 || pos(before[1]) < 0 || pos(before[0]) > pos(before[1]) {
			t.Errorf("%q should come before %q; log: %q", before[0], before[1], log)
		}
	}
}

func TestRunRetries(t *testing.T) {
	boom := errors.New("boom")
	failUntil := func(n int, err error) func(context.Context, int) error {
		return func(_ context.Context, attempt int) error {
			if attempt <= n {
				return fmt.Errorf("attempt %d: %w", attempt, err)
			}
			return nil
		}
	}
	tests := []struct {
		name         string
		node         Node
		rand         func() float64
		wantState    State
		wantAttempts int
		wantDelays   []time.Duration
		wantErr      string
	}{
		{
			name:      "fails twice then succeeds",
			node:      Node{Retries: 3, Backoff: Backoff{Initial: 100 * time.Millisecond}, Task: task(failUntil(2, boom))},
			wantState: Succeeded, wantAttempts: 3,
			wantDelays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
		},
		{
			name:      "full jitter from the injected source",
			node:      Node{Retries: 3, Backoff: Backoff{Initial: time.Second, Jitter: FullJitter}, Task: task(failUntil(2, boom))},
			rand:      constRand(0.5),
			wantState: Succeeded, wantAttempts: 3,
			wantDelays: []time.Duration{500 * time.Millisecond, time.Second},
		},
		{
			name: "equal jitter, capped",
			node: Node{Retries: 4, Task: task(failUntil(3, boom)),
				Backoff: Backoff{Initial: time.Second, Multiplier: 3, Max: 5 * time.Second, Jitter: EqualJitter}},
			rand:      constRand(0.5),
			wantState: Succeeded, wantAttempts: 4,
			wantDelays: []time.Duration{750 * time.Millisecond, 2250 * time.Millisecond, 3750 * time.Millisecond},
		},
		{
			name:      "retries exhausted",
			node:      Node{Retries: 2, Backoff: Backoff{Initial: time.Second}, Task: task(failUntil(99, boom))},
			wantState: Failed, wantAttempts: 3,
			wantDelays: []time.Duration{time.Second, 2 * time.Second},
			wantErr:    "attempt 3: boom",
		},
		{
			name:      "no retries",
			node:      Node{Task: task(failUntil(99, boom))},
			wantState: Failed, wantAttempts: 1,
			wantErr: "attempt 1: boom",
		},
		{
			name: "permanent error is not retried",
			node: Node{Retries: 5, Backoff: Backoff{Initial: time.Second}, Task: task(func(ctx context.Context, a int) error {
				return fmt.Errorf("load config: %w", Permanent(failUntil(99, boom)(ctx, a)))
			})},
			wantState: Failed, wantAttempts: 1,
			wantErr: "load config: attempt 1: boom",
		},
		{
			name: "panic fails at once",
			node: Node{Retries: 5, Task: task(func(context.Context, int) error {
				panic("nil map")
			})},
			wantState: Failed, wantAttempts: 1,
			wantErr: "task panicked: nil map",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var attempts []int
			inner := tt.node.Task
			tt.node.Name = "stage"
			tt.node.Task = task(func(ctx context.Context, attempt int) error {
				attempts = append(attempts, attempt)
				return inner.Run(ctx, attempt)
			})
			sleep, obs := &fakeSleep{}, &observer{}
			res, err := Run(t.Context(), mustNew(t, tt.node), Options{Sleep: sleep.Sleep, Rand: tt.rand, Observer: obs.Observe})

			got, _ := res.Node("stage")
			if got.State != tt.wantState || got.Attempts != tt.wantAttempts {
				t.Errorf("node = %s after %d attempts, want %s after %d", got.State, got.Attempts, tt.wantState, tt.wantAttempts)
			}
			if want := []int{1, 2, 3, 4, 5, 6}[:tt.wantAttempts]; !slices.Equal(attempts, want) {
				t.Errorf("task saw attempts %v, want %v", attempts, want)
			}
			if d := sleep.Delays(); !slices.Equal(d, tt.wantDelays) {
				t.Errorf("slept %v, want %v", d, tt.wantDelays)
			}
			var retrying []Event
			for _, ev := range obs.Of("stage") {
				if ev.State == Retrying {
					retrying = append(retrying, ev)
				}
			}
			if len(retrying) != len(tt.wantDelays) {
				t.Fatalf("%d retrying events, want %d", len(retrying), len(tt.wantDelays))
			}
			for i, ev := range retrying {
				if ev.Delay != tt.wantDelays[i] || ev.Attempt != i+1 || !errors.Is(ev.Err, boom) {
					t.Errorf("retrying event %d = attempt %d, delay %v, err %v; want attempt %d, delay %v, err boom",
						i, ev.Attempt, ev.Delay, ev.Err, i+1, tt.wantDelays[i])
				}
			}
			if err := checkSequence(obs.Of("stage")); err != nil {
				t.Error(err)
			}
			if tt.wantErr == "" {
				if err != nil || got.Err != nil {
					t.Errorf("Run() error = %v, node error = %v; want nil", err, got.Err)
				}
				return
			}
			if got.Err == nil || !strings.HasPrefix(got.Err.Error(), tt.wantErr) {
				t.Errorf("node error = %v, want %q", got.Err, tt.wantErr)
			}
			if want := fmt.Sprintf("run failed: node %q: %s", "stage", tt.wantErr); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Run() error = %v, want %q", err, want)
			}
		})
	}
}

func TestRunAttemptTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	block := func(ctx context.Context, _ int) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("attempt context has no deadline")
		}
		<-ctx.Done()
		return ctx.Err()
	}
	tests := []struct {
		name         string
		task         func(context.Context, int) error
		wantState    State
		wantAttempts int
	}{
		{"blocks every attempt", block, Failed, 2},
		{"blocks once, then succeeds", func(ctx context.Context, attempt int) error {
			if attempt == 1 {
				return block(ctx, attempt)
			}
			return nil
		}, Succeeded, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &observer{}
			g := mustNew(t, Node{Name: "slow", Task: task(tt.task), Retries: 1, Timeout: timeout})
			res, _ := Run(t.Context(), g, Options{Sleep: (&fakeSleep{}).Sleep, Observer: obs.Observe})
			got, _ := res.Node("slow")
			if got.State != tt.wantState || got.Attempts != tt.wantAttempts {
				t.Errorf("node = %s after %d attempts, want %s after %d", got.State, got.Attempts, tt.wantState, tt.wantAttempts)
			}
			evs := obs.Of("slow")
			retry := evs[slices.IndexFunc(evs, func(e Event) bool { return e.State == Retrying })]
			for _, err := range []error{retry.Err, got.Err} {
				if err == nil && got.State == Succeeded {
					continue
				}
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 50ms") {
					t.Errorf("error = %v, want a DeadlineExceeded saying it timed out after 50ms", err)
				}
			}
		})
	}
}

func TestRunFailureSkipsDownstream(t *testing.T) {
	boom := errors.New("boom")
	var mu sync.Mutex
	ran := map[string]bool{}
	mk := func(name string, err error, deps ...string) Node {
		return Node{Name: name, DependsOn: deps, Task: task(func(context.Context, int) error {
			mu.Lock()
			defer mu.Unlock()
			ran[name] = true
			return err
		})}
	}
	g := mustNew(t,
		mk("extract", boom),
		mk("clean", nil, "extract"),
		mk("report", nil, "clean"),
		mk("audit", nil, "extract"),
		mk("archive", nil),
		mk("load", nil, "archive"),
		mk("summary", nil, "report", "load"),
	)
	obs := &observer{}
	res, err := Run(t.Context(), g, Options{Observer: obs.Observe})
	want := map[string]State{
		"extract": Failed, "clean": Skipped, "report": Skipped, "audit": Skipped,
		"archive": Succeeded, "load": Succeeded, "summary": Skipped,
	}
	for name, wantState := range want {
		got, _ := res.Node(name)
		if got.State != wantState {
			t.Errorf("%s: state %s, want %s", name, got.State, wantState)
		}
		if wantRan := wantState != Skipped; ran[name] != wantRan {
			t.Errorf("%s: task ran = %v, want %v", name, ran[name], wantRan)
		}
		if wantState != Skipped {
			continue
		}
		var skip *SkippedError
		if !errors.As(got.Err, &skip) || skip.Upstream != "extract" || got.Attempts != 0 {
			t.Errorf("%s: error %v after %d attempts, want a SkippedError naming extract and 0 attempts", name, got.Err, got.Attempts)
		}
		if evs := obs.Of(name); len(evs) != 2 || evs[1].State != Skipped || evs[1].Err.Error() != `skipped: upstream "extract" failed` {
			t.Errorf("%s: events %v, want queued then skipped because upstream \"extract\" failed", name, evs)
		}
	}
	if res.Status != Failed {
		t.Errorf("Status = %s, want failed", res.Status)
	}
	if want := `run failed: node "extract": boom`; err == nil || err.Error() != want || !errors.Is(err, boom) {
		t.Errorf("Run() error = %v, want %q wrapping boom", err, want)
	}
}

func TestRunEvents(t *testing.T) {
	tries := map[string]*atomic.Int32{"flaky": {}}
	g := mustNew(t,
		Node{Name: "ok", Task: noop},
		Node{Name: "flaky", Retries: 2, Task: task(func(context.Context, int) error {
			if tries["flaky"].Add(1) == 1 {
				return errors.New("transient")
			}
			return nil
		})},
		Node{Name: "broken", Retries: 1, DependsOn: []string{"ok"}, Task: task(func(context.Context, int) error {
			return errors.New("broken")
		})},
		Node{Name: "child", DependsOn: []string{"broken", "flaky"}, Task: noop},
		Node{Name: "grandchild", DependsOn: []string{"child"}, Task: noop},
	)
	clock, obs := &fakeClock{}, &observer{}
	res, _ := Run(t.Context(), g, Options{Now: clock.Now, Sleep: (&fakeSleep{}).Sleep, Observer: obs.Observe})

	want := map[string][]State{
		"ok":         {Queued, Running, Succeeded},
		"flaky":      {Queued, Running, Retrying, Running, Succeeded},
		"broken":     {Queued, Running, Retrying, Running, Failed},
		"child":      {Queued, Skipped},
		"grandchild": {Queued, Skipped},
	}
	for name, wantStates := range want {
		evs := obs.Of(name)
		if got := states(evs); !slices.Equal(got, wantStates) {
			t.Errorf("%s: events %v, want %v", name, got, wantStates)
		}
		if err := checkSequence(evs); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// The result agrees with the events, and both tell the injected clock's time.
		got, _ := res.Node(name)
		last := evs[len(evs)-1]
		if got.End != last.Time || got.State != last.State || !last.Time.After(epoch) {
			t.Errorf("%s: result ends %s at %v, last event %s at %v", name, got.State, got.End, last.State, last.Time)
		}
		if i := slices.IndexFunc(evs, func(e Event) bool { return e.State == Running }); i >= 0 && got.Start != evs[i].Time {
			t.Errorf("%s: result starts at %v, first running event at %v", name, got.Start, evs[i].Time)
		}
	}
	if obs.overlap.Load() {
		t.Error("observer was called concurrently")
	}
	if !res.Start.After(epoch) || !res.End.After(res.Start) {
		t.Errorf("run from %v to %v, want times from the injected clock, in order", res.Start, res.End)
	}
	if got, want := len(res.Nodes), g.Len(); got != want {
		t.Errorf("%d node results, want %d", got, want)
	}
}

func TestRunSubgraphRunsOnlySelected(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	mk := func(name string, deps ...string) Node {
		return Node{Name: name, DependsOn: deps, Task: task(func(context.Context, int) error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, name)
			return nil
		})}
	}
	g := mustNew(t, mk("extract"), mk("clean", "extract"), mk("report", "clean"))
	sub, err := g.Subgraph("clean", "report")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), sub, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"clean", "report"}; !slices.Equal(ran, want) || len(res.Nodes) != 2 {
		t.Errorf("ran %q with %d results, want %q", ran, len(res.Nodes), want)
	}
}

func TestRunEmptyAndNil(t *testing.T) {
	obs := &observer{}
	res, err := Run(t.Context(), mustNew(t), Options{Observer: obs.Observe})
	if err != nil || res.Status != Succeeded || len(obs.events) != 0 {
		t.Errorf("empty graph: %s, %v, %d events; want succeeded, nil, none", res.Status, err, len(obs.events))
	}
	if _, err := Run(t.Context(), nil, Options{}); err == nil {
		t.Error("Run(nil graph) error = nil, want an error")
	}
}
