package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The scheduler tests run on a fake clock: Tick is called at chosen instants, and the
// fake stages of a run wait until the test releases them. Nothing sleeps; the tests
// only wait (bounded) for the goroutines of runs to reach a stage.

const t0 = "2026-01-01T00:30:00Z"

func slot(h int) string { return fmt.Sprintf("p@20260101T%02d0000Z", h) }

func hour(h int) time.Time { return at(t0).Truncate(time.Hour).Add(time.Duration(h) * time.Hour) }

func TestOverlapSkip(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold = true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "")))
	e.tickAt(at(t0)) // first load: the slots from now on are the pipeline's
	e.tickAt(hour(1))
	if got := e.stages.waitStarted(t, 1); got[0] != slot(1)+"/a#1" {
		t.Fatalf("started %v", got)
	}
	e.tickAt(hour(2)) // slot 02:00 comes while 01:00 runs
	e.stages.noneStarted(t)
	e.stages.release(slot(1))
	e.waitStatus(t, slot(1), Succeeded)
	e.tickAt(hour(3))
	e.stages.release(slot(3))
	e.waitStatus(t, slot(3), Succeeded)
	want := []string{
		"20260101T010000Z scheduled succeeded",
		"20260101T020000Z scheduled skipped: overlap skip: max_active_runs (1) runs of the pipeline are active or waiting: p@20260101T010000Z",
		"20260101T030000Z scheduled succeeded",
	}
	if got := e.runs(t, "p"); !slices.Equal(got, want) {
		t.Errorf("runs\n got %q\nwant %q", got, want)
	}
}

func TestOverlapQueue(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold = true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "overlap: queue")))
	e.tickAt(at(t0))
	e.tickAt(hour(1))
	e.stages.waitStarted(t, 1)
	e.tickAt(hour(2))
	e.tickAt(hour(3))
	if r := e.record(t, slot(2)); r.Status != Queued || r.Trigger.Kind != Scheduled {
		t.Fatalf("slot 02:00 while 01:00 runs: %s %s, want a queued scheduled run", r.Trigger.Kind, r.Status)
	}
	e.stages.noneStarted(t)
	e.stages.release(slot(1))
	if got := e.stages.waitStarted(t, 3); !slices.Equal(got, []string{slot(1) + "/b#1", slot(1) + "/c#1", slot(2) + "/a#1"}) {
		t.Fatalf("started %v: want 01:00 to finish, then 02:00", got)
	}
	e.stages.noneStarted(t) // 03:00 waits for 02:00
	e.stages.release(slot(2))
	e.stages.release(slot(3))
	e.waitStatus(t, slot(3), Succeeded)
	r1, r2, r3 := e.record(t, slot(1)), e.record(t, slot(2)), e.record(t, slot(3))
	if r2.Start.Before(r1.End) || r3.Start.Before(r2.End) {
		t.Errorf("queued runs overlapped: 01 ended %v, 02 ran %v..%v, 03 started %v", r1.End, r2.Start, r2.End, r3.Start)
	}
}

func TestOverlapAllow(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold = true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "overlap: allow")))
	e.tickAt(at(t0))
	e.tickAt(hour(1))
	e.tickAt(hour(2))
	got := e.stages.waitStarted(t, 2)
	slices.Sort(got)
	if !slices.Equal(got, []string{slot(1) + "/a#1", slot(2) + "/a#1"}) {
		t.Fatalf("started %v: want both slots at once", got)
	}
	e.stages.release(slot(1))
	e.stages.release(slot(2))
	e.waitStatus(t, slot(1), Succeeded)
	e.waitStatus(t, slot(2), Succeeded)
}

func TestMaxActiveRuns(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold = true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "overlap: allow\nmax_active_runs: 2")))
	e.tickAt(at(t0))
	for h := 1; h <= 3; h++ {
		e.tickAt(hour(h))
	}
	e.stages.waitStarted(t, 2)
	e.stages.noneStarted(t)
	if r := e.record(t, slot(3)); r.Status != Queued {
		t.Fatalf("third slot with two running: %s, want queued", r.Status)
	}
	e.stages.release(slot(1))
	e.stages.waitStarted(t, 2) // 01:00's b and c
	if got := e.stages.waitStarted(t, 1); got[0] != slot(3)+"/a#1" {
		t.Fatalf("started %v, want slot 03:00 once 01:00 ended", got)
	}
	e.stages.release(slot(2))
	e.stages.release(slot(3))
	e.waitStatus(t, slot(3), Succeeded)
}

// TestCatchupAfterDowntime: no scheduler ran from 00:30 to 05:10; the hourly slots 01:00
// to 05:00 were missed. Each policy gives every one of them a record once the new
// scheduler holds the lease.
func TestCatchupAfterDowntime(t *testing.T) {
	late := "catchup latest: the later slot 2026-01-01T05:00:00Z runs instead"
	cases := []struct {
		policy string
		want   []string
	}{
		{"catchup: none", []string{
			"20260101T010000Z scheduled skipped: catchup none: the slot was missed while no scheduler ran",
			"20260101T020000Z scheduled skipped: catchup none: the slot was missed while no scheduler ran",
			"20260101T030000Z scheduled skipped: catchup none: the slot was missed while no scheduler ran",
			"20260101T040000Z scheduled skipped: catchup none: the slot was missed while no scheduler ran",
			"20260101T050000Z scheduled skipped: catchup none: the slot was missed while no scheduler ran",
		}},
		{"catchup: latest", []string{
			"20260101T010000Z scheduled skipped: " + late,
			"20260101T020000Z scheduled skipped: " + late,
			"20260101T030000Z scheduled skipped: " + late,
			"20260101T040000Z scheduled skipped: " + late,
			"20260101T050000Z catchup succeeded",
		}},
		{"catchup: all", []string{
			"20260101T010000Z catchup succeeded",
			"20260101T020000Z catchup succeeded",
			"20260101T030000Z catchup succeeded",
			"20260101T040000Z catchup succeeded",
			"20260101T050000Z catchup succeeded",
		}},
		{"catchup: all\ncatchup_window: 3h", []string{
			"20260101T010000Z scheduled skipped: outside catchup_window (3h0m0s): the slot was missed while no scheduler ran",
			"20260101T020000Z scheduled skipped: outside catchup_window (3h0m0s): the slot was missed while no scheduler ran",
			"20260101T030000Z catchup succeeded",
			"20260101T040000Z catchup succeeded",
			"20260101T050000Z catchup succeeded",
		}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.policy, "\n", " "), func(t *testing.T) {
			wh := mem.New(mem.Config{})
			spec := parseSpec(t, fmt.Sprintf(testPipeline, tc.policy))
			before := newEnv(t, at(t0), wh, "A")
			before.load(t, spec)
			before.tickAt(at(t0)) // the scheduler that then went down
			after := newEnv(t, hour(5).Add(10*time.Minute), wh, "B")
			after.load(t, spec)
			// B, started in another process, takes the silent lease over once it has
			// watched it unchanged for a TTL by its own clock (A's renewal time, hours
			// old by the clock A wrote it with, is never compared with B's).
			after.tickAt(hour(5).Add(10 * time.Minute))
			after.tickAt(hour(5).Add(10*time.Minute + DefaultLeaseTTL))
			after.sched.Wait()
			if got := after.runs(t, "p"); !slices.Equal(got, tc.want) {
				t.Errorf("runs\n got %q\nwant %q", got, tc.want)
			}
			var order []time.Time
			for h := 1; h <= 5; h++ {
				if r := after.record(t, slot(h)); r.Status == Succeeded {
					order = append(order, r.Start, r.End)
				}
			}
			if !slices.IsSortedFunc(order, time.Time.Compare) {
				t.Errorf("caught-up slots overlapped or ran out of order: %v", order)
			}
		})
	}
}

func TestManualTriggerDuringScheduledRun(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold = true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "")))
	e.tickAt(at(t0))
	e.tickAt(hour(1))
	e.stages.waitStarted(t, 1)
	e.clock.Set(hour(1).Add(20 * time.Minute))
	manual, err := e.sched.Trigger(context.Background(), "p", Trigger{Kind: Manual, By: "ana@laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.record(t, manual.ID); r.Status != Queued || r.Trigger.By != "ana@laptop" {
		t.Fatalf("manual run during a scheduled one: %s by %q, want queued by ana@laptop", r.Status, r.Trigger.By)
	}
	e.stages.noneStarted(t)
	e.stages.release(slot(1))
	e.stages.waitStarted(t, 2)
	if got := e.stages.waitStarted(t, 1); got[0] != manual.ID+"/a#1" {
		t.Fatalf("started %v, want the manual run once the scheduled one ended", got)
	}
	e.tickAt(hour(2)) // the next slot finds the manual run active
	e.stages.release(manual.ID)
	e.waitStatus(t, manual.ID, Succeeded)
	if r := e.record(t, slot(2)); r.Status != Skipped || !strings.Contains(r.Reason, manual.ID) {
		t.Errorf("slot 02:00 during the manual run: %s %q, want skipped naming %s", r.Status, r.Reason, manual.ID)
	}
}

// TestCrashBetweenRecordAndDispatch: a scheduler records slot 01:00 and dies before the
// run starts. The next scheduler finds the record without a live heartbeat, marks it
// interrupted and runs the same slot again as attempt 2: one record, no second slot.
func TestCrashBetweenRecordAndDispatch(t *testing.T) {
	wh := mem.New(mem.Config{})
	spec := parseSpec(t, fmt.Sprintf(testPipeline, ""))
	crashing := &crashStore{Store: wh, suffix: "runs/p/" + slot(1) + ".json"}
	a := newEnv(t, at(t0), crashing, "A")
	a.load(t, spec)
	a.tickAt(at(t0))
	a.tickAt(hour(1))
	a.sched.Wait()
	if !crashing.isDead() {
		t.Fatal("the first scheduler did not record the slot")
	}
	r := newEnv(t, at(t0), wh, "B").record(t, slot(1))
	if r.Status != Queued || r.Heartbeat.Instance != "A" {
		t.Fatalf("after the crash: %s by %+v, want queued by A", r.Status, r.Heartbeat)
	}

	b := newEnv(t, hour(1).Add(40*time.Second), wh, "B")
	b.load(t, spec)
	b.tickAt(hour(1).Add(40 * time.Second)) // A's lease is still fresh: B watches it
	b.tickAt(hour(1).Add(60 * time.Second)) // unchanged for a TTL: B takes it; A's heartbeat is 60 s old
	b.sched.Wait()
	r = b.record(t, slot(1))
	if r.Status != Succeeded || r.Attempt != 2 || r.Heartbeat.Instance != "B" ||
		r.Reason != "attempt 2: attempt 1 was interrupted (no heartbeat for 1m0s: host testhost pid 1000, last heartbeat 2026-01-01T01:00:00Z)" {
		t.Errorf("slot 01:00: %s attempt %d by %s (%q), want succeeded as attempt 2 by B", r.Status, r.Attempt, r.Heartbeat.Instance, r.Reason)
	}
	if got, want := b.runs(t, "p"), []string{"20260101T010000Z catchup succeeded: " + r.Reason}; !slices.Equal(got, want) {
		t.Errorf("runs %q, want %q: one record for the slot", got, want)
	}
	if got := b.stages.waitStarted(t, 3); got[0] != slot(1)+"/a#1" {
		t.Errorf("started %v", got)
	}
	b.stages.noneStarted(t)
}

// TestLeaseTakeover: two schedulers on one warehouse. A holds the lease and schedules;
// B waits. When A stops (dies), B takes over once A's lease has not changed for a TTL,
// and schedules from A's watermark: every slot once.
func TestLeaseTakeover(t *testing.T) {
	wh := mem.New(mem.Config{})
	spec := parseSpec(t, strings.Replace(fmt.Sprintf(testPipeline, "catchup: all"), `"0 * * * *"`, `"*/10 * * * * *"`, 1))
	a := newEnv(t, at(t0), wh, "A")
	b := newEnv(t, at(t0), wh, "B")
	a.load(t, spec)
	b.load(t, spec)
	tick := func(e *env, ts time.Time) {
		e.tickAt(ts)
		e.sched.Wait()
	}
	start := at(t0)
	for s := 0; s <= 60; s += 5 {
		ts := start.Add(time.Duration(s) * time.Second)
		tick(a, ts)
		tick(b, ts)
	}
	if !a.sched.Leases()[0].Held || b.sched.Leases()[0].Held {
		t.Fatalf("leases: A %+v, B %+v; want A to hold it", a.sched.Leases(), b.sched.Leases())
	}
	// A dies at 60 s. B sees the lease unchanged from 65 s on and takes it at 80 s.
	for s := 65; s <= 120; s += 5 {
		tick(b, start.Add(time.Duration(s)*time.Second))
	}
	ls := b.sched.Leases()[0]
	if !ls.Held || ls.Gen != 2 {
		t.Fatalf("B's lease after A died: %+v, want generation 2 held", ls)
	}
	tick(a, start.Add(125*time.Second)) // A comes back: it lost the lease
	if a.sched.Leases()[0].Held {
		t.Error("A still holds the lease after B took it")
	}
	entries, err := b.store.List(context.Background(), "p", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	seen := map[string]bool{}
	for _, en := range entries {
		r := b.record(t, en.ID)
		if seen[en.ID] || r.Status != Succeeded {
			t.Errorf("run %s: %s (listed twice: %v)", en.ID, r.Status, seen[en.ID])
		}
		seen[en.ID] = true
		by[r.Heartbeat.Instance]++
	}
	// Slots every 10 s after 00:30:00 up to 00:32:00: 12, each once.
	for s := 10; s <= 120; s += 10 {
		if id := SlotID("p", start.Add(time.Duration(s)*time.Second)); !seen[id] {
			t.Errorf("slot %s has no record", id)
		}
	}
	if len(seen) != 12 || by["A"] != 6 || by["B"] != 6 {
		t.Errorf("%d slots run, by %v; want 12: 6 by A before it died, 6 by B", len(seen), by)
	}
}

// TestInterruptedOnRestart: a run of a process of this host that is gone is marked
// interrupted at once, with its host, pid and last heartbeat.
func TestInterruptedOnRestart(t *testing.T) {
	e := newEnv(t, at(t0), nil, "B")
	e.sched.cfg.Alive = func(host string, pid int) bool { return pid != 4242 }
	spec := parseSpec(t, fmt.Sprintf(testPipeline, "catchup: none"))
	e.load(t, spec)
	rec, err := e.runner.Prepare(spec, Trigger{Kind: Manual}, "")
	if err != nil {
		t.Fatal(err)
	}
	rec.Status, rec.Heartbeat = Running, &Heartbeat{Host: "testhost", PID: 4242, Instance: "old", Time: at(t0).Add(-5 * time.Second)}
	if err := e.store.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	e.tickAt(at(t0))
	r := e.record(t, rec.ID)
	want := "its process is gone: host testhost pid 4242, last heartbeat 2026-01-01T00:29:55Z"
	if r.Status != Interrupted || r.Reason != want || !r.End.Equal(at(t0)) {
		t.Errorf("record %s %q end %v, want interrupted %q", r.Status, r.Reason, r.End, want)
	}
	if ids, _ := e.store.ActiveIDs(context.Background()); len(ids) != 0 {
		t.Errorf("active runs %v after marking, want none", ids)
	}
}
