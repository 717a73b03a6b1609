package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// The load check (go test -run xxx -bench . -benchtime 1x ./web): 200 clients poll a
// running 100-stage run's page and its API for 10 s (ORCH_LOAD_SECONDS), and the page of
// an ended 100-stage run is rendered. Results: bench/results/*-web.md.

// widePipeline has 100 stages in 10 layers of 10, each depending on two stages of the
// layer before. Its stages are vacuums of one table so that it validates; the
// benchmark's runner replaces their work with a wait that logs and reports data facts.
func widePipeline() string {
	var b strings.Builder
	b.WriteString("pipeline: wide\ndescription: One hundred stages.\nwarehouse: ./warehouse\nmax_parallel: 10\n")
	b.WriteString("tables:\n  raw.t:\n    columns: [{name: id, type: string}]\nstages:\n")
	for l := range 10 {
		for i := range 10 {
			fmt.Fprintf(&b, "  - {name: s%d_%d, kind: vacuum, tables: [raw.t]", l, i)
			if l > 0 {
				fmt.Fprintf(&b, ", depends_on: [s%d_%d, s%d_%d]", l-1, i, l-1, (i+3)%10)
			}
			b.WriteString("}\n")
		}
	}
	return b.String()
}

// waitEngine runs each stage as a wait of d that logs a few lines and reports rows and
// versions, as a real stage's record would show them.
type waitEngine struct {
	d time.Duration
	n map[string]int // stage name → its place in the pipeline
}

func newWaitEngine(spec *pipelines.Spec, d time.Duration) waitEngine {
	e := waitEngine{d: d, n: map[string]int{}}
	for n, st := range spec.Stages {
		e.n[st.Name] = n
	}
	return e
}

func (e waitEngine) RunStage(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
	n := e.n[r.Stage.Name]
	log := r.Env.Logger
	log.Info("reading the source", "files", 3)
	select {
	case <-time.After(e.d):
	case <-ctx.Done():
		return jobs.Result{}, ctx.Err()
	}
	log.Info("committed", "rows", 1000+n)
	return jobs.Result{RowsRead: int64(1000 + n), RowsWritten: int64(1000 + n),
		VersionsRead: []jobs.TableVersion{{Table: "raw.t", Version: int64(n)}}, VersionsWritten: []jobs.TableVersion{{Table: "raw.t", Version: int64(n + 1)}},
		Notes: []string{fmt.Sprintf("%d rows merged", 1000+n)}}, nil
}

// wideEnv is a web server on a scheduler with the wide pipeline.
func wideEnv(b testing.TB, stageWait time.Duration) (*scheduler.Scheduler, *Server, string) {
	dir := b.TempDir()
	write(b, dir, "wide.yaml", widePipeline())
	spec, err := pipelines.Load(filepath.Join(dir, "wide.yaml"), pipelines.Options{})
	if err != nil {
		b.Fatal(err)
	}
	obs := NewObserver()
	runner := scheduler.NewRunner(scheduler.RunnerConfig{Opener: &testOpener{stores: map[string]objectstore.Store{}}, Logger: quiet,
		OnChange: obs.RunChanged, Engine: newWaitEngine(spec, stageWait)})
	sched := scheduler.New(scheduler.Config{Runner: runner, Logger: quiet, OnSlot: obs.SlotHandled})
	if err := sched.Set(context.Background(), []*pipelines.Spec{spec}); err != nil {
		b.Fatal(err)
	}
	site, err := New(Config{Scheduler: sched, Observer: obs, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		site.Close()
		sched.Shutdown(context.Background(), 10*time.Second, "benchmark over")
	})
	rec, err := sched.Trigger(context.Background(), "wide", scheduler.Trigger{Kind: scheduler.Manual})
	if err != nil {
		b.Fatal(err)
	}
	return sched, site, rec.ID
}

// BenchmarkRunPage100Stages renders the page of an ended 100-stage run, each time anew
// (its handler, not the response cache).
func BenchmarkRunPage100Stages(b *testing.B) {
	sched, site, id := wideEnv(b, 0)
	for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if rec, err := sched.Record(context.Background(), id); err == nil && rec.Status == scheduler.Succeeded {
			break
		}
		if time.Now().After(end) {
			b.Fatal("the run did not end")
		}
	}
	var size int
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest("GET", "/runs/"+id, nil)
		req.SetPathValue("id", id)
		req = req.WithContext(withRole(req.Context(), roleAdmin))
		rr := httptest.NewRecorder()
		site.pageRun(rr, req)
		if rr.Code != 200 || !strings.Contains(rr.Body.String(), "s9_9") {
			b.Fatalf("run page: %d", rr.Code)
		}
		size = rr.Body.Len()
	}
	b.ReportMetric(float64(size)/1024, "page-KB")
}

// BenchmarkLoad: 200 clients, each polling once a second, alternately the run page and
// the run's JSON, during a run of the 100-stage pipeline.
func BenchmarkLoad(b *testing.B) {
	seconds := 10
	if v, err := strconv.Atoi(os.Getenv("ORCH_LOAD_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	const clients = 200
	dur := time.Duration(seconds) * time.Second
	sched, site, id := wideEnv(b, dur/8) // ten layers: the run outlasts the check
	srv := httptest.NewServer(site.Handler())
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	for b.Loop() {
		var (
			mu        sync.Mutex
			latencies []time.Duration
			errs      []string
			pageBytes int
		)
		start := time.Now()
		end := start.Add(dur)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				// Spread the clients over the second, as browsers polling do.
				next := start.Add(time.Duration(c) * time.Second / clients)
				for i := 0; ; i++ {
					time.Sleep(time.Until(next))
					if time.Now().After(end) {
						return
					}
					path := "/runs/" + id
					if i%2 == 1 {
						path = "/api/v1/runs/" + id
					}
					t0 := time.Now()
					resp, err := client.Get(srv.URL + path)
					var n int
					if err == nil {
						var body []byte
						body, err = io.ReadAll(resp.Body)
						resp.Body.Close()
						n = len(body)
						if err == nil && resp.StatusCode != 200 {
							err = fmt.Errorf("%s: %d", path, resp.StatusCode)
						}
					}
					lat := time.Since(t0)
					mu.Lock()
					latencies = append(latencies, lat)
					if err != nil {
						errs = append(errs, err.Error())
					}
					if i%2 == 0 {
						pageBytes = max(pageBytes, n)
					}
					mu.Unlock()
					next = next.Add(time.Second)
				}
			})
		}
		wg.Wait()
		rec, _ := sched.Record(context.Background(), id)
		slices.Sort(latencies)
		q := func(p float64) time.Duration { return latencies[min(int(float64(len(latencies))*p), len(latencies)-1)] }
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(float64(len(latencies)), "requests")
		b.ReportMetric(float64(len(errs)), "errors")
		b.ReportMetric(ms(q(0.5)), "p50-ms")
		b.ReportMetric(ms(q(0.99)), "p99-ms")
		b.ReportMetric(ms(latencies[len(latencies)-1]), "max-ms")
		b.ReportMetric(float64(pageBytes)/1024, "page-KB")
		b.Logf("%d clients for %s during run %s (%s at the end): %d requests, %d errors, p50 %.1f ms, p99 %.1f ms, max %.1f ms, run page up to %.1f KB",
			clients, dur, id, rec.Status, len(latencies), len(errs), ms(q(0.5)), ms(q(0.99)), ms(latencies[len(latencies)-1]), float64(pageBytes)/1024)
		if len(errs) > 0 {
			b.Errorf("%d errors, the first: %s", len(errs), errs[0])
		}
		if rec.Status != scheduler.Running {
			b.Errorf("the run was %s at the end of the check, want running throughout", rec.Status)
		}
	}
}
