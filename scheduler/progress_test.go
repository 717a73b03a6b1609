package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestProgressOfARunningStage: what a running stage reports reaches its stored record
// within seconds (rows, files and bytes, pass i of n), with a line in its log, while
// the stage still runs: a slow stage can be told from a hung one.
func TestProgressOfARunningStage(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold, e.stages.progress = true, true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "")))
	e.tickAt(at(t0))
	e.tickAt(hour(1))
	e.stages.waitStarted(t, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.store.Get(context.Background(), slot(1))
		if err == nil && len(r.Stages) > 0 && r.Stages[0].Progress != nil && r.Stages[0].Status == Running {
			p := r.Stages[0].Progress
			if got, want := p.Text(), "1,234,567 rows read · 1 of 4 files (1.0 MB of 4.0 MB) · pass 2 of 3 over the memory budget"; got != want {
				t.Errorf("progress %q, want %q", got, want)
			}
			if r.Stages[0].RowsIn != 1234567 {
				t.Errorf("rows in while running: %d, want 1234567", r.Stages[0].RowsIn)
			}
			if log := strings.Join(r.Stages[0].Log, "\n"); !strings.Contains(log, "progress: 0 of 4 files (0 B of 4.0 MB)") {
				t.Errorf("stage log %q: want a progress line", log)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress in the stored record within 10 s: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.stages.release(slot(1))
	e.waitStatus(t, slot(1), Succeeded)
}

// TestBadInputIsNotRetried: a stage that fails on a bad record of a file (the same at
// every attempt) fails at once, with retries left: no backoff, one attempt.
func TestBadInputIsNotRetried(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.fail["a"], e.stages.badInput = 3, true
	e.load(t, parseSpec(t, strings.Replace(fmt.Sprintf(testPipeline, ""), "{name: a, kind: vacuum,", "{name: a, kind: vacuum, retries: 2,", 1)))
	e.tickAt(at(t0))
	e.tickAt(hour(1))
	r := e.waitStatus(t, slot(1), Failed)
	if s := r.Stages[0]; len(s.Attempts) != 1 || !strings.Contains(s.Error, `landing/1.csv:3: column amount (2): "x" is not a decimal(10,2)`) {
		t.Errorf("stage a: %d attempts, error %q; want one attempt failing on the bad record", len(s.Attempts), s.Error)
	}
}
