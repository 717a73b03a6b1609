package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// shopPipeline is the test pipeline: an upsert ingest with a change feed, its change
// history, and an SCD2 dimension from the feed. Its description holds markup that must
// stay text.
const shopPipeline = `pipeline: shop
description: "Orders <script>alert('desc')</script> and customers."
schedule: "0 2 * * *"
timezone: Europe/Berlin
deadline: 45m
params:
  - {name: region, type: string, default: eu}
warehouse: ./warehouse
tables:
  raw.customers:
    description: Customers as loaded.
    freshness: 26h
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: name, type: string}
      - {name: city, type: string}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties:
      delta.enableChangeDataFeed: true
  audit.customers_history:
    columns:
      - {name: customer_id, type: string}
      - {name: name, type: string}
      - {name: city, type: string}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
      - {name: _change_type, type: string}
      - {name: _commit_version, type: bigint}
      - {name: _commit_timestamp, type: timestamp}
  dim.customer:
    columns:
      - {name: customer_sk, type: bigint, identity: {start: 1, step: 1}}
      - {name: customer_id, type: string, nullable: false}
      - {name: name, type: string}
      - {name: city, type: string}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
    properties:
      delta.enableChangeDataFeed: true
stages:
  - {name: load, kind: ingest, source: landing/*.csv, target: raw.customers, mode: upsert, keys: [customer_id]}
  - {name: history, kind: capture_history, depends_on: [load], source: raw.customers, target: audit.customers_history}
  - name: dim
    kind: scd2_merge
    depends_on: [load]
    source: raw.customers
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [name, city]
    deletes: close
    columns: {surrogate_key: customer_sk}
`

// slowPipeline reads one URL, which the test holds or makes fail.
const slowPipeline = `pipeline: slow
warehouse: ./warehouse
tables:
  raw.signals:
    columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
stages:
  - {name: fetch, kind: ingest, source: "%s/signals.csv", format: csv, target: raw.signals, http: {retries: 0, timeout: 1m}}
`

// testOpener opens local directories (the warehouse, ingest sources).
type testOpener struct {
	mu     sync.Mutex
	stores map[string]objectstore.Store
}

func (o *testOpener) open(dir string) (objectstore.Store, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st, ok := o.stores[dir]; ok {
		return st, nil
	}
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		return nil, err
	}
	o.stores[dir] = st
	return st, nil
}

func (o *testOpener) Warehouse(_ context.Context, spec *pipelines.Spec) (objectstore.Store, error) {
	return o.open(spec.Warehouse)
}

func (o *testOpener) Location(_ context.Context, spec *pipelines.Spec, loc string) (objectstore.Store, string, error) {
	st, err := o.open(loc)
	return st, "", err
}

// testEnv is a scheduler with pipelines loaded and a web server on it.
type testEnv struct {
	t     testing.TB
	dir   string
	sched *scheduler.Scheduler
	site  *Server
	srv   *httptest.Server
	src   *gatedSource
	specs map[string]*pipelines.Spec
}

type envOptions struct {
	auth       Auth
	loadErrors []LoadError
	maxRows    int
	now        func() time.Time // the web's clock (retention horizons); nil: time.Now
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	dir := t.TempDir()
	e := &testEnv{t: t, dir: dir, specs: map[string]*pipelines.Spec{}, src: newGatedSource(t)}
	write(t, dir, "shop.yaml", shopPipeline)
	write(t, dir, "slow.yaml", fmt.Sprintf(slowPipeline, e.src.srv.URL))
	write(t, dir, "landing/1.csv", "customer_id,name,city\nC-1,Ann,Seattle\nC-2,<script>alert('cell')</script>,Paris\n")
	var specs []*pipelines.Spec
	for _, f := range []string{"shop.yaml", "slow.yaml"} {
		spec, err := pipelines.Load(filepath.Join(dir, f), pipelines.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.specs[spec.Name] = spec
		specs = append(specs, spec)
	}
	obs := NewObserver()
	runner := scheduler.NewRunner(scheduler.RunnerConfig{Opener: &testOpener{stores: map[string]objectstore.Store{}}, Logger: quiet, OnChange: obs.RunChanged, EngineInfo: "orchestrator/test"})
	e.sched = scheduler.New(scheduler.Config{Runner: runner, Logger: quiet, OnSlot: obs.SlotHandled, WatchEvery: time.Nanosecond})
	ctx := context.Background()
	if err := e.sched.Set(ctx, specs); err != nil {
		t.Fatal(err)
	}
	e.sched.Tick(ctx)
	site, err := New(Config{Scheduler: e.sched, Observer: obs, Auth: o.auth, Logger: quiet, EngineInfo: "orchestrator test", MaxRows: o.maxRows, Now: o.now,
		LoadErrors: func() []LoadError { return o.loadErrors }})
	if err != nil {
		t.Fatal(err)
	}
	e.site = site
	e.srv = httptest.NewServer(site.Handler())
	t.Cleanup(func() {
		site.Close()
		e.srv.Close()
		e.src.release()
		e.sched.Shutdown(context.Background(), 10*time.Second, "test over")
	})
	return e
}

func write(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run triggers a run of pipeline and waits for it to end.
func (e *testEnv) run(pipeline string) *scheduler.Record {
	e.t.Helper()
	rec, err := e.sched.Trigger(context.Background(), pipeline, scheduler.Trigger{Kind: scheduler.Manual, By: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.waitEnd(rec.ID)
}

// waitEnd waits for a run to end and its record to be final.
func (e *testEnv) waitEnd(id string) *scheduler.Record {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, live := e.sched.Runner().Record(id); !live {
			if rec, err := e.sched.Record(context.Background(), id); err == nil && !rec.Status.Active() {
				return rec
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("run %s did not end within 60 s", id)
	return nil
}

// twoRuns runs shop twice: the second run moves C-1 to Portland and adds C-3.
func (e *testEnv) twoRuns() (first, second *scheduler.Record) {
	e.t.Helper()
	first = e.run("shop")
	write(e.t, e.dir, "landing/2.csv", "customer_id,name,city\nC-1,Ann,Portland\nC-3,Cy,Lyon\n")
	second = e.run("shop")
	for _, r := range []*scheduler.Record{first, second} {
		if r.Status != scheduler.Succeeded {
			e.t.Fatalf("run %s: %s %s", r.ID, r.Status, r.Error)
		}
	}
	return first, second
}

// req is a request to the test server.
type req struct {
	method, path string
	body         string
	header       map[string]string
}

func (e *testEnv) do(r req) (*http.Response, string) {
	e.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	if r.method == "" {
		r.method = "GET"
	}
	hr, err := http.NewRequest(r.method, e.srv.URL+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	resp, err := c.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// getJSON gets path, wants 200, and decodes the body into v.
func (e *testEnv) getJSON(path string, v any) {
	e.t.Helper()
	resp, body := e.do(req{path: path})
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		e.t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
}

// gatedSource serves signals.csv: at once while open, after release while held, or
// 500 when failing.
type gatedSource struct {
	srv  *httptest.Server
	mu   sync.Mutex
	gate chan struct{}
	fail bool
	hits chan struct{}
}

func newGatedSource(t testing.TB) *gatedSource {
	g := &gatedSource{hits: make(chan struct{}, 100)}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		gate, fail := g.gate, g.fail
		g.mu.Unlock()
		select {
		case g.hits <- struct{}{}:
		default:
		}
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if fail {
			http.Error(w, "the source is down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		io.WriteString(w, "id\ns1\ns2\n")
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gatedSource) hold() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedSource) release() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gatedSource) setFail(f bool) {
	g.mu.Lock()
	g.fail = f
	g.mu.Unlock()
}
