package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestPauseResume: a paused pipeline's slots are recorded skipped, naming who paused it
// and when, by a scheduler that did not pause it (the state is in the run store); a
// manual run still runs; after the resume the next slot runs. Pausing twice says who
// did it first.
func TestPauseResume(t *testing.T) {
	a := newEnv(t, at(t0), nil, "A")
	spec := parseSpec(t, fmt.Sprintf(testPipeline, ""))
	a.load(t, spec)
	a.tickAt(at(t0))
	ctx := context.Background()

	// Another process (the CLI) pauses it through the store.
	p, err := NewStore(a.wh).SetPaused(ctx, "p", true, "ann@host", "source system down", hour(0))
	if err != nil || !p.Paused {
		t.Fatalf("pause: %+v %v", p, err)
	}
	if _, err := NewStore(a.wh).SetPaused(ctx, "p", true, "bob@host", "", hour(0)); err == nil || !strings.Contains(err.Error(), "already paused by ann@host") {
		t.Errorf("pause of a paused pipeline: %v, want it to name who paused it", err)
	}
	a.tickAt(hour(1))
	a.sched.Wait()
	r := a.record(t, slot(1))
	if r.Status != Skipped || !strings.Contains(r.Reason, "the schedule is paused by ann@host at 2026-01-01T00:00:00Z (source system down)") {
		t.Errorf("slot 1 while paused: %s %q, want skipped naming the pause", r.Status, r.Reason)
	}
	if got, _ := a.sched.PauseOf(ctx, "p"); !got.Paused || got.By != "ann@host" {
		t.Errorf("pause state %+v", got)
	}
	// People's runs still run.
	rec, err := a.sched.Trigger(ctx, "p", Trigger{Kind: Manual, By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	a.waitStatus(t, rec.ID, Succeeded)

	if _, err := a.sched.Pause(ctx, "p", false, "bob@host", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.store.PauseOf(ctx, "p"); got.Paused || got.By != "bob@host" {
		t.Errorf("after the resume: %+v, want resumed by bob@host", got)
	}
	if _, err := a.sched.Pause(ctx, "p", false, "bob@host", ""); err == nil || !strings.Contains(err.Error(), "is not paused") {
		t.Errorf("resume of a running schedule: %v", err)
	}
	a.tickAt(hour(2))
	a.sched.Wait()
	a.waitStatus(t, slot(2), Succeeded)
}
