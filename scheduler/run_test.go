package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// TestRunRecord: a run whose middle stage fails for good after a retry. Its record says
// what a user asks of it: per stage the status, every attempt, rows, versions, notes,
// log lines; the run's trigger, definition and error.
func TestRunRecord(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	spec := parseSpec(t, strings.Replace(fmt.Sprintf(testPipeline, ""), "depends_on: [a]}", "depends_on: [a], retries: 1, retry_delay: 1ms}", 1))
	e.stages.fail["b"] = 2
	rec, err := e.runner.Run(context.Background(), spec, Trigger{Kind: Manual, By: "ana@laptop"}, Hooks{})
	if err == nil || rec.Status != Failed {
		t.Fatalf("run: %v, status %s; want a failed run", err, rec.Status)
	}
	stored := e.record(t, rec.ID)
	got, _ := json.Marshal(stored)
	want, _ := json.Marshal(rec)
	if string(got) != string(want) {
		t.Errorf("stored record differs from the returned one:\n%s\n%s", got, want)
	}
	if p, isSlot, err := ParseID(rec.ID); err != nil || p != "p" || isSlot {
		t.Errorf("id %s: %s %v %v", rec.ID, p, isSlot, err)
	}
	if rec.Trigger.Kind != Manual || rec.Trigger.By != "ana@laptop" || !rec.Trigger.Slot.Equal(at(t0)) || rec.Attempt != 1 {
		t.Errorf("trigger %+v attempt %d", rec.Trigger, rec.Attempt)
	}
	if rec.Definition != string(spec.Source) || rec.DefinitionHash != spec.Hash || rec.File != "/pipelines/p.yaml" {
		t.Errorf("definition not kept: file %s hash %s", rec.File, rec.DefinitionHash)
	}
	if rec.Error != "stage b: b broke on attempt 2" || rec.Heartbeat.Instance != "A" || !rec.Start.Equal(at(t0)) || !rec.End.Equal(at(t0)) {
		t.Errorf("error %q heartbeat %+v start %v end %v", rec.Error, rec.Heartbeat, rec.Start, rec.End)
	}
	type view struct {
		name, status string
		attempts     []string
		rowsIn       int64
		versions     []TableVersion
		notes, log   []string
		err, reason  string
	}
	var views []view
	for _, s := range rec.Stages {
		v := view{name: s.Name, status: string(s.Status), rowsIn: s.RowsIn, versions: s.VersionsWritten, notes: s.Notes, err: s.Error, reason: s.Reason}
		for _, a := range s.Attempts {
			v.attempts = append(v.attempts, fmt.Sprintf("%d:%s", a.N, a.Error))
		}
		for _, l := range s.Log {
			v.log = append(v.log, strings.TrimPrefix(l, "00:30:00.000 "))
		}
		views = append(views, v)
	}
	wantViews := []view{
		{"a", "succeeded", []string{"1:"}, 3, []TableVersion{{"raw.t", 1}}, []string{"fake a"},
			[]string{"attempt 1 started", "INFO working attempt=1", "attempt 1 succeeded"}, "", ""},
		{"b", "failed", []string{"1:b broke on attempt 1", "2:b broke on attempt 2"}, 0, nil, nil,
			[]string{"attempt 1 started", "INFO working attempt=1", "attempt 1 failed: b broke on attempt 1", "attempt 2 started", "INFO working attempt=2", "attempt 2 failed: b broke on attempt 2"}, "b broke on attempt 2", ""},
		// A skipped stage has no error of its own: the reason says why it did not run.
		{"c", "skipped", nil, 0, nil, nil, []string{`skipped: upstream "b" failed`}, "", `skipped: upstream "b" failed`},
	}
	for i := range wantViews {
		if i >= len(views) || fmt.Sprint(views[i]) != fmt.Sprint(wantViews[i]) {
			t.Errorf("stages\n got %+v\nwant %+v", views, wantViews)
			break
		}
	}
	if ids, _ := e.store.ActiveIDs(context.Background()); len(ids) != 0 {
		t.Errorf("active markers %v after the run ended", ids)
	}
	entries, err := e.store.List(context.Background(), "p", 10, nil)
	if err != nil || len(entries) != 1 || entries[0].ID != rec.ID || entries[0].Status != Failed || entries[0].Error != rec.Error {
		t.Errorf("index %+v (%v), want the failed run", entries, err)
	}
}

// TestRunParams: a run binds its parameters and slot into the stages' values, and the
// record keeps them; a missing parameter is refused before any record is made.
func TestRunParams(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	spec := parseSpec(t, strings.Replace(fmt.Sprintf(testPipeline, "params: [{name: day, type: date}]"),
		"{name: a, kind: vacuum,", "{name: a, description: \"day ${params.day} slot ${run.slot_date}\", kind: vacuum,", 1))
	if _, err := e.runner.Run(context.Background(), spec, Trigger{Kind: Manual}, Hooks{}); err == nil || !strings.Contains(err.Error(), "param day (date) has no default") {
		t.Fatalf("run without a required parameter: %v", err)
	}
	var desc string
	e.runner.cfg.Engine = engineFunc(func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
		desc = r.Spec.Stage("a").Description
		return e.stages.RunStage(ctx, r)
	})
	rec, err := e.runner.Run(context.Background(), spec, Trigger{Kind: Backfill, Slot: at("2025-12-24T08:00:00Z"), Params: map[string]string{"day": "2025-12-31"}}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if desc != "day 2025-12-31 slot 2025-12-24" || rec.ID != "p@20251224T080000Z" || rec.Params["day"] != "2025-12-31" {
		t.Errorf("bound description %q, id %s, params %v", desc, rec.ID, rec.Params)
	}
}

// TestListNewestOfMany: the newest runs of a long history list from the index, newest
// first, without reading the records; a status filter reads further back.
func TestListNewestOfMany(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	ctx := context.Background()
	for i := range 300 {
		r := &Record{ID: SlotID("p", at(t0).Add(time.Duration(i)*time.Minute)), Pipeline: "p", Status: Succeeded,
			Trigger: Trigger{Kind: Scheduled}, Created: at(t0).Add(time.Duration(i) * time.Minute)}
		if i%100 == 7 {
			r.Status = Failed
		}
		if err := e.store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.store.List(ctx, "p", 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 || got[0].Seq != 300 || got[49].Seq != 251 || got[0].ID != SlotID("p", at(t0).Add(299*time.Minute)) {
		t.Errorf("newest 50: %d entries, %d..%d", len(got), got[0].Seq, got[len(got)-1].Seq)
	}
	failed, err := e.store.List(ctx, "p", 10, func(en Entry) bool { return en.Status == Failed })
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, f := range failed {
		seqs = append(seqs, f.Seq)
	}
	if !slices.Equal(seqs, []int64{208, 108, 8}) {
		t.Errorf("failed runs %v, want seqs 208, 108, 8", seqs)
	}
	// A second creator of an id loses, and leaves no index entry behind.
	dup := &Record{ID: SlotID("p", at(t0)), Pipeline: "p", Status: Succeeded, Created: at(t0)}
	if err := e.store.Create(ctx, dup); !errors.Is(err, objectstore.ErrExist) {
		t.Errorf("second create of %s: %v, want ErrExist", dup.ID, err)
	}
	if got, _ := e.store.List(ctx, "p", 1, nil); got[0].Seq != 300 {
		t.Errorf("newest entry after a lost create: seq %d, want 300", got[0].Seq)
	}
}

// TestPrune: retention removes what is beyond keep_runs, never an active run.
func TestPrune(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	ctx := context.Background()
	for i := range 10 {
		r := &Record{ID: SlotID("p", at(t0).Add(time.Duration(i)*time.Hour)), Pipeline: "p", Status: Succeeded,
			Created: at(t0).Add(time.Duration(i) * time.Hour)}
		if i == 2 {
			r.Status = Running
		}
		if err := e.store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.store.Prune(ctx, "p", pipelines.History{KeepRuns: 4}, at(t0).Add(10*time.Hour))
	if err != nil || n != 5 {
		t.Fatalf("pruned %d (%v), want 5 of the 6 beyond the newest 4 (one is active)", n, err)
	}
	entries, _ := e.store.List(ctx, "p", 100, nil)
	var kept []int64
	for _, en := range entries {
		kept = append(kept, en.Seq)
	}
	if !slices.Equal(kept, []int64{10, 9, 8, 7, 3}) {
		t.Errorf("kept %v, want the newest 4 and the active run 3", kept)
	}
	if _, err := e.store.Get(ctx, SlotID("p", at(t0))); !errors.Is(err, objectstore.ErrNotExist) {
		t.Errorf("record of a pruned run: %v", err)
	}
	n, err = e.store.Prune(ctx, "p", pipelines.History{KeepDays: 1}, at(t0).Add(24*time.Hour+7*time.Hour+time.Minute))
	if err != nil || n != 2 {
		t.Errorf("pruned by age: %d (%v), want runs 7 and 8 (older than a day), not the active one", n, err)
	}
}

// failOnce fails the first Put of a key under prefix.
type failOnce struct {
	objectstore.Store
	prefix string
	mu     sync.Mutex
	failed bool
}

func (f *failOnce) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	f.mu.Lock()
	fail := !f.failed && strings.HasPrefix(key, f.prefix)
	f.failed = f.failed || fail
	f.mu.Unlock()
	if fail {
		return errors.New("the disk hiccuped")
	}
	return f.Store.Put(ctx, key, r, size)
}

// TestIndexedOnceWhenTheFirstSaveFails: a scheduled slot's run is claimed without an
// index entry and gets one at its first save; when the record's write then fails, the
// next save keeps that entry rather than claiming a second one, so the run is listed
// once, with its end.
func TestIndexedOnceWhenTheFirstSaveFails(t *testing.T) {
	wh := &failOnce{Store: mem.New(mem.Config{}), prefix: runsDir}
	e := newEnv(t, at(t0), wh, "A")
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "")))
	e.tickAt(at(t0)) // first load: the slots from now on are the pipeline's
	e.tickAt(hour(1))
	e.waitStatus(t, slot(1), Succeeded)
	if !wh.failed {
		t.Fatal("no record write failed: the test checks nothing")
	}
	entries, err := e.store.List(context.Background(), "p", 10, nil)
	if err != nil || len(entries) != 1 || entries[0].ID != slot(1) || entries[0].Seq != 1 || entries[0].Status != Succeeded {
		t.Errorf("index %+v (%v), want the slot's run once, succeeded", entries, err)
	}
	if got := e.record(t, slot(1)); got.Seq != 1 {
		t.Errorf("stored record: seq %d, want 1", got.Seq)
	}
}

// A scheduled run starts when the scheduler dispatches it, as Airflow's run start_date
// does: its Start is that instant even when its goroutine gets to it later, while its
// stages' attempts say when each began.
func TestStartIsWhenDispatched(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	ctx := context.Background()
	rec := e.claimSlot(t, parseSpec(t, fmt.Sprintf(testPipeline, "")), at(t0))
	e.clock.Set(at(t0).Add(time.Second))
	e.runner.dispatched(rec.ID)
	e.clock.Set(at(t0).Add(3 * time.Second)) // the run's goroutine is late
	done, err := e.runner.Execute(ctx, rec.ID, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	stored := e.record(t, rec.ID)
	for _, r := range []*Record{done, stored} {
		if !r.Start.Equal(at(t0).Add(time.Second)) || r.Status != Succeeded {
			t.Errorf("run start %v status %s, want %v (dispatched), succeeded", r.Start, r.Status, at(t0).Add(time.Second))
		}
		if a := r.Stages[0].Attempts; len(a) != 1 || !a[0].Start.Equal(at(t0).Add(3*time.Second)) {
			t.Errorf("first stage's attempts %+v, want one started at %v", a, at(t0).Add(3*time.Second))
		}
	}
}

// A tick tells OnTick how many slots it planned and how long each phase took.
func TestTickTimesItsPhases(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	var ticks []TickTimes
	e.sched.cfg.OnTick = func(tt TickTimes) { ticks = append(ticks, tt) }
	e.load(t, parseSpec(t, fmt.Sprintf(testPipeline, "")))
	e.tickAt(at(t0)) // first load: nothing due
	e.tickAt(hour(1))
	e.waitStatus(t, slot(1), Succeeded)
	if len(ticks) != 2 || ticks[0].Slots != 0 || ticks[1].Slots != 1 || ticks[1].Record <= 0 {
		t.Fatalf("tick times %+v, want a first tick with no slot and a second that planned and recorded one", ticks)
	}
}

// slowFirstPut counts the Puts (rewrites) of keys under a prefix; the first of them
// does not end before ended reports true (or 5 s have passed).
type slowFirstPut struct {
	objectstore.Store
	prefix string
	ended  func() bool
	n      atomic.Int64
}

func (c *slowFirstPut) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasPrefix(key, c.prefix) && c.n.Add(1) == 1 {
		for deadline := time.Now().Add(5 * time.Second); !c.ended() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	return c.Store.Put(ctx, key, r, size)
}

// TestStateChangesCoalesce: the state changes of a run that come while its record is
// being written are written together: a one-stage run whose stage runs and ends while
// the record's first rewrite is under way rewrites it once more at most (ended), not
// once per change (stage running, stage done, ended), and the stored record is the
// final one.
func TestStateChangesCoalesce(t *testing.T) {
	wh := &slowFirstPut{Store: mem.New(mem.Config{}), prefix: runsDir}
	e := newEnv(t, at(t0), wh, "A")
	e.load(t, parseSpec(t, oneStagePipeline()))
	e.tickAt(at(t0))
	for h := 1; h <= 5; h++ {
		wh.n.Store(0)
		wh.ended = func() bool {
			r, ok := e.runner.Record(slot(h))
			return ok && !r.End.IsZero()
		}
		e.tickAt(hour(h))
		e.sched.Wait()
		got := e.record(t, slot(h))
		if got.Status != Succeeded || len(got.Stages) != 1 || got.Stages[0].Status != Succeeded || got.Seq != int64(h) {
			t.Fatalf("slot %d: stored record %s, stages %+v, seq %d; want it succeeded, its stage too, indexed", h, got.Status, got.Stages, got.Seq)
		}
		if n := wh.n.Load(); n > 2 {
			t.Fatalf("slot %d: the record was rewritten %d times after its claim, want at most 2 (started, ended)", h, n)
		}
	}
}

// failEnd fails the first write of a record that has ended.
type failEnd struct {
	objectstore.Store
	mu     sync.Mutex
	failed bool
}

func (f *failEnd) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasPrefix(key, runsDir) {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		f.mu.Lock()
		fail := !f.failed && !rec.End.IsZero()
		f.failed = f.failed || fail
		f.mu.Unlock()
		if fail {
			return errors.New("the disk hiccuped")
		}
		r = bytes.NewReader(b)
	}
	return f.Store.Put(ctx, key, r, size)
}

// TestFailedWriteOfTheEndIsRetried: when the write that carries a run's end fails
// (whether the run's end made it or a write of earlier changes took the end along),
// the end is written again, so the stored record is not left running.
func TestFailedWriteOfTheEndIsRetried(t *testing.T) {
	for range 10 {
		wh := &failEnd{Store: mem.New(mem.Config{})}
		e := newEnv(t, at(t0), wh, "A")
		e.load(t, parseSpec(t, oneStagePipeline()))
		e.tickAt(at(t0))
		e.tickAt(hour(1))
		e.sched.Wait()
		e.runner.Wait() // a write retried in the background
		if !wh.failed {
			t.Fatal("no write of the run's end failed: the test checks nothing")
		}
		if got := e.record(t, slot(1)); got.Status != Succeeded || got.Stages[0].Status != Succeeded {
			t.Fatalf("stored record %s, stage %s; want both succeeded", got.Status, got.Stages[0].Status)
		}
	}
}

// TestNoWritesAfterTakeover: a run another process took over writes nothing more, and a
// change it makes after that leaves no writer behind.
func TestNoWritesAfterTakeover(t *testing.T) {
	e := newEnv(t, at(t0), nil, "A")
	ctx := context.Background()
	rec := e.claimSlot(t, parseSpec(t, fmt.Sprintf(testPipeline, "")), at(t0))
	rs := e.runner.state(rec.ID)
	rs.mu.Lock()
	rs.lost = true
	rs.rec.Status = Running
	rs.mu.Unlock()
	rs.saveSoon(ctx)
	done := make(chan struct{})
	go func() {
		e.runner.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the background writer of a run taken over did not stop")
	}
	if got := e.record(t, rec.ID); got.Status != Queued {
		t.Errorf("stored record %s, want it as claimed (queued): a run taken over writes nothing", got.Status)
	}
	e.runner.release(rec.ID)
}
