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

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// hookServer records the notifications posted to it.
type hookServer struct {
	mu   sync.Mutex
	msgs []Message
	srv  *httptest.Server
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m Message
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil || m.Event == "" {
			t.Errorf("a notification that is not one: %s %s %s", r.Method, r.URL, b)
		}
		h.mu.Lock()
		h.msgs = append(h.msgs, m)
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// events returns the events posted so far, as "event table" words.
func (h *hookServer) events() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range h.msgs {
		out = append(out, strings.TrimSpace(m.Event+" "+m.Table))
	}
	return out
}

func watchEnv(t *testing.T, start time.Time, yaml string, hook string) (*env, *pipelines.Spec) {
	t.Helper()
	e := newEnv(t, start, nil, "A")
	e.runner.cfg.Notifier = NewNotifier(NotifierConfig{MinWait: time.Millisecond, MaxWait: time.Millisecond, Now: e.clock.Now, Logger: quiet, BaseURL: "http://orch"})
	spec, err := pipelines.Parse("/pipelines/p.yaml", []byte(yaml), pipelines.Options{LookupEnv: func(k string) (string, bool) {
		return hook, k == "HOOK"
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.load(t, spec)
	return e, spec
}

// A run not ended 30 minutes after its slot fires deadline_missed once, however often
// the scheduler looks; its end fires deadline_recovered once; a run on time fires
// nothing. A second scheduler taking the warehouse over (the state is stored) fires
// nothing again.
func TestDeadlineBreachAndRecoveryFireOnce(t *testing.T) {
	hooks := newHookServer(t)
	yaml := fmt.Sprintf(testPipeline, "deadline: 30m\nnotify: {on_failure: [\"${HOOK}\"]}")
	e, _ := watchEnv(t, at("2026-01-01T09:59:00Z"), yaml, hooks.srv.URL)
	e.stages.hold = true
	e.tickAt(at("2026-01-01T09:59:00Z")) // the first load
	e.tickAt(at("2026-01-01T10:00:00Z")) // slot 10:00 starts, and is held
	id := SlotID("p", at("2026-01-01T10:00:00Z"))
	for _, ts := range []string{"10:10:00", "10:29:59", "10:30:00", "10:31:00", "10:45:00"} {
		e.tickAt(at("2026-01-01T" + ts + "Z"))
	}
	e.runner.Wait()
	if got := hooks.events(); len(got) != 1 || got[0] != EventDeadlineMissed {
		t.Fatalf("after the deadline: %v, want one %s", got, EventDeadlineMissed)
	}
	w := e.sched.Watches("p")
	if len(w) != 1 || !w[0].Breached || w[0].Run != id || !w[0].Since.Equal(at("2026-01-01T10:30:00Z")) {
		t.Errorf("watch %+v, want breached since 10:30 by run %s", w, id)
	}
	hooks.mu.Lock()
	m := hooks.msgs[0]
	hooks.mu.Unlock()
	if m.RunID != id || m.Status != Running || !strings.Contains(m.Detail, "had not ended 30m after it") || m.Link != "http://orch/runs/"+id {
		t.Errorf("message %+v", m)
	}

	// A second scheduler of the same warehouse (after a restart) reads the state: no
	// second breach.
	e.stages.release(id)
	e.sched.Wait()
	e.tickAt(at("2026-01-01T10:50:00Z"))
	e.tickAt(at("2026-01-01T10:51:00Z"))
	e.runner.Wait()
	if got := hooks.events(); len(got) != 2 || got[1] != EventDeadlineRecovered {
		t.Fatalf("after the run ended: %v, want %s once more", got, EventDeadlineRecovered)
	}
	e.stages.hold = false
	for _, ts := range []string{"11:00", "11:20", "11:30", "11:45", "12:00", "12:30"} {
		e.tickAt(at("2026-01-01T" + ts + ":00Z"))
		e.sched.Wait()
	}
	e.runner.Wait()
	if got := hooks.events(); len(got) != 2 {
		t.Errorf("runs on time: %v, want no more events", got)
	}
	if w := e.sched.Watches("p"); len(w) != 1 || w[0].Breached || !w[0].Slot.Equal(at("2026-01-01T12:00:00Z")) || w[0].RunStatus != Succeeded {
		t.Errorf("watch %+v, want on time at slot 12:00", w)
	}

	// A new process on the warehouse: it reads the stored state and sends nothing.
	e2 := newEnv(t, at("2026-01-01T12:31:00Z"), e.wh, "B")
	e2.runner.cfg.Notifier = e.runner.cfg.Notifier
	e.sched.Shutdown(context.Background(), time.Second, "test")
	spec2 := parseSpecEnv(t, yaml, hooks.srv.URL)
	e2.load(t, spec2)
	e2.tickAt(at("2026-01-01T12:31:00Z"))
	e2.runner.Wait()
	if got := hooks.events(); len(got) != 2 {
		t.Errorf("a new scheduler: %v, want no more events", got)
	}
	if w := e2.sched.Watches("p"); len(w) != 1 || w[0].Breached || !w[0].Checked.Equal(at("2026-01-01T12:31:00Z")) {
		t.Errorf("the new scheduler's watch %+v, want it checked at 12:31, on time", w)
	}
}

func parseSpecEnv(t *testing.T, yaml, hook string) *pipelines.Spec {
	t.Helper()
	spec, err := pipelines.Parse("/pipelines/p.yaml", []byte(yaml), pipelines.Options{LookupEnv: func(k string) (string, bool) { return hook, k == "HOOK" }})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// A table whose newest data change gets older than its freshness fires freshness_stale
// once; a commit of data fires freshness_recovered once; commits that change no data
// (properties) do not make it fresh. Ages come from the commits' in-commit timestamps.
func TestFreshnessBreachAndRecoveryFireOnce(t *testing.T) {
	hooks := newHookServer(t)
	yaml := `pipeline: p
notify: {on_failure: ["${HOOK}"]}
tables:
  raw.t:
    freshness: 2h
    columns: [{name: id, type: string}]
stages:
  - {name: a, kind: vacuum, tables: [raw.t]}
`
	start := at("2026-01-01T08:00:00Z")
	e, _ := watchEnv(t, start, yaml, hooks.srv.URL)
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	ds, err := delta.SchemaFromArrow(schema)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.Create(ctx, e.wh, "raw/t", delta.CreateOptions{Schema: ds, Properties: map[string]string{"delta.enableInCommitTimestamps": "true"}}, delta.Options{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	write := func() {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.StringBuilder).Append("x")
		rec := b.NewRecordBatch()
		defer rec.Release()
		if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Set(at("2026-01-01T08:30:00Z"))
	write() // v1 at 08:30
	step := func(ts string) {
		e.tickAt(at("2026-01-01T" + ts + ":00Z"))
	}
	for _, ts := range []string{"09:00", "10:00", "10:29"} {
		step(ts)
	}
	e.runner.Wait()
	if got := hooks.events(); len(got) != 0 {
		t.Fatalf("within 2h of the last write: %v, want none", got)
	}
	for _, ts := range []string{"10:31", "10:40", "11:00", "12:00"} {
		step(ts)
	}
	if _, err := tbl.SetProperties(ctx, map[string]string{"delta.logRetentionDuration": "interval 60 days"}, nil); err != nil {
		t.Fatal(err)
	}
	step("12:10")
	e.runner.Wait()
	if got := hooks.events(); len(got) != 1 || got[0] != EventFreshnessStale+" raw.t" {
		t.Fatalf("stale: %v, want one %s", got, EventFreshnessStale)
	}
	w := e.sched.Watches("p")
	if len(w) != 1 || !w[0].Breached || w[0].Version != 1 || w[0].Age != 3*time.Hour+40*time.Minute || !w[0].Since.Equal(at("2026-01-01T10:30:00Z")) {
		t.Errorf("watch %+v, want stale since 10:30, v1 3h40m old", w)
	}
	e.clock.Set(at("2026-01-01T12:20:00Z"))
	write() // v3
	for _, ts := range []string{"12:21", "12:30", "13:00"} {
		step(ts)
	}
	e.runner.Wait()
	if got := hooks.events(); len(got) != 2 || got[1] != EventFreshnessRecovered+" raw.t" {
		t.Fatalf("after a write: %v, want %s once more", got, EventFreshnessRecovered)
	}
	if w := e.sched.Watches("p"); len(w) != 1 || w[0].Breached || w[0].Version != 3 {
		t.Errorf("watch %+v, want fresh at v3", w)
	}
	hooks.mu.Lock()
	m := hooks.msgs[0]
	hooks.mu.Unlock()
	if m.Pipeline != "p" || m.Table != "raw.t" || m.Link != "http://orch/tables/raw.t" || !strings.Contains(m.Detail, "stale: last data change v1") {
		t.Errorf("message %+v", m)
	}
}
