package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/pipelines"
)

// TestShutdownLetsRunningStagesFinish: on shutdown no new stage starts, a running one
// finishes within the grace, and the record ends consistent.
func TestShutdownLetsRunningStagesFinish(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold = true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "")))
	e.tickAt(at(t0))
	e.tickAt(hour(1))
	e.stages.waitStarted(t, 1)
	done := make(chan struct{})
	go func() {
		e.sched.Shutdown(context.Background(), time.Hour, "serve shut down")
		close(done)
	}()
	// Drain takes effect before the stage is let go: b must not start.
	waitUntil(t, func() bool { return e.runner.state(slot(1)) != nil && e.runner.state(slot(1)).soft.Err() != nil })
	e.stages.release(slot(1))
	<-done
	r := e.record(t, slot(1))
	got := []Status{r.Stages[0].Status, r.Stages[1].Status, r.Stages[2].Status}
	if r.Status != Cancelled || got[0] != Succeeded || got[1] != Cancelled || got[2] != Cancelled ||
		r.Reason != "serve shut down: stages not started were cancelled" {
		t.Errorf("after shutdown: %s %q, stages %v; want a cancelled run whose running stage succeeded", r.Status, r.Reason, got)
	}
	if ids, _ := e.store.ActiveIDs(context.Background()); len(ids) != 0 {
		t.Errorf("active runs after shutdown: %v", ids)
	}
	if l, _ := e.store.CurrentLease(context.Background()); !l.Released {
		t.Errorf("lease after shutdown: %+v, want released", l)
	}
}

// TestShutdownCancelsAfterGrace: a stage still running when the grace ends is cancelled.
func TestShutdownCancelsAfterGrace(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	e.stages.hold = true
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "")))
	e.tickAt(at(t0))
	e.tickAt(hour(1))
	e.stages.waitStarted(t, 1)
	e.sched.Shutdown(context.Background(), time.Millisecond, "serve shut down")
	r := e.record(t, slot(1))
	// A cancel is no error: the stage says why it was cancelled, and its attempt too.
	if s := r.Stages[0]; r.Status != Cancelled || s.Status != Cancelled || s.Error != "" ||
		!strings.Contains(s.Reason, "stages still running after the grace period were cancelled") ||
		len(s.Attempts) != 1 || !s.Attempts[0].Cancelled || s.Attempts[0].Error != "" {
		t.Errorf("after the grace: %s, stage a %s error %q reason %q attempts %+v; want both cancelled, with the reason and no error", r.Status, s.Status, s.Error, s.Reason, s.Attempts)
	}
	if lines := r.Stages[0].Log; len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "attempt 1 cancelled: serve shut down") {
		t.Errorf("stage log %q: want its last line to say the attempt was cancelled, and why", lines)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNotifications: a failed run posts its notification with retries; the delivery is
// in the record, and the secret in the URL is in neither the record nor the error.
func TestNotifications(t *testing.T) {
	var mu sync.Mutex
	var bodies []Message
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // retried
			return
		}
		var m Message
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &m)
		bodies = append(bodies, m)
	}))
	defer srv.Close()
	e := newEnv(t, at(t0), nil, "A")
	e.runner.cfg.Notifier = NewNotifier(NotifierConfig{MinWait: time.Millisecond, MaxWait: time.Millisecond, BaseURL: "http://orch:8080", Now: e.clock.Now, Logger: quiet})
	env := func(k string) (string, bool) {
		switch k {
		case "HOOK":
			return srv.URL + "/hook/s3cr3t", true
		case "DEAD":
			return "http://127.0.0.1:1/x/t0ps3cr3t", true
		}
		return "", false
	}
	yaml := fmt.Sprintf(testPipeline, "notify: {on_failure: [\"${HOOK}\", \"${DEAD}\"]}")
	spec, err := pipelines.Parse("/pipelines/p.yaml", []byte(yaml), pipelines.Options{LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	e.stages.fail["b"] = 1
	rec, _ := e.runner.Run(context.Background(), spec, Trigger{Kind: Manual}, Hooks{})
	e.runner.Wait()
	stored := e.record(t, rec.ID)
	if len(stored.Notifications) != 2 {
		t.Fatalf("notifications %+v, want 2", stored.Notifications)
	}
	ok, dead := stored.Notifications[0], stored.Notifications[1]
	if ok.URL != "${HOOK}" || ok.Status != 200 || ok.Attempts != 2 || ok.Error != "" || ok.Event != "failure" {
		t.Errorf("delivery to the hook: %+v, want 200 after 2 attempts, shown as ${HOOK}", ok)
	}
	if dead.URL != "${DEAD}" || dead.Error == "" || dead.Attempts != 5 {
		t.Errorf("delivery to a closed port: %+v, want an error after 5 attempts", dead)
	}
	b, _ := json.Marshal(stored)
	if strings.Contains(string(b), "s3cr3t") {
		t.Errorf("a secret is in the record: %s", b)
	}
	want := Message{Event: "failure", RunID: rec.ID, Pipeline: "p", Status: Failed, Trigger: "manual", Slot: at(t0), Start: at(t0), End: at(t0),
		FailedStage: "b", Error: "b broke on attempt 1", Link: "http://orch:8080/runs/" + rec.ID}
	if len(bodies) != 1 || bodies[0] != want {
		t.Errorf("posted %+v\nwant %+v", bodies, want)
	}
}
