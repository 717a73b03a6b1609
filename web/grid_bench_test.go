package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// gridRuns is the history's length (ORCH_GRID_RUNS overrides, for a quick look).
var gridRuns = envInt("ORCH_GRID_RUNS", 100_000)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// oneStore serves one warehouse store.
type oneStore struct{ st objectstore.Store }

func (o oneStore) Warehouse(context.Context, *pipelines.Spec) (objectstore.Store, error) {
	return o.st, nil
}

func (o oneStore) Location(context.Context, *pipelines.Spec, string) (objectstore.Store, string, error) {
	return o.st, "", nil
}

// BenchmarkGrid100k: the runs grid and the runs list of a pipeline with 100,000 runs
// (go test ./web -run '^$' -bench Grid100k -benchtime 20x): the first page (25 runs, each
// with its stages' states), a page of a rare status (1 run in 1,000 failed; a page
// examines at most 1,000 index entries), the pipeline's page, the newest 50 runs, the
// runs page, and the runs page of an hour in the middle of the history, on
// a local warehouse whose records are written without fsync (as serve keeps them).
func BenchmarkGrid100k(b *testing.B) {
	n := gridRuns
	dir := b.TempDir()
	write(b, dir, "big.yaml", "pipeline: big\nwarehouse: ./warehouse\ntables:\n  raw.t:\n    columns: [{name: id, type: string}]\nstages:\n"+
		"  - {name: a, kind: vacuum, tables: [raw.t]}\n  - {name: b, kind: vacuum, tables: [raw.t], depends_on: [a]}\n  - {name: c, kind: vacuum, tables: [raw.t], depends_on: [a]}\n  - {name: d, kind: vacuum, tables: [raw.t], depends_on: [b, c]}\n")
	spec, err := pipelines.Load(filepath.Join(dir, "big.yaml"), pipelines.Options{})
	if err != nil {
		b.Fatal(err)
	}
	wh, err := fs.New(fs.Config{Dir: spec.Warehouse, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	store := scheduler.NewStore(wh)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(16)
	var next atomic.Int64
	for range 16 {
		g.Go(func() error {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return nil
				}
				slot := base.Add(time.Duration(i) * time.Minute)
				st := scheduler.Succeeded
				if i%1000 == 500 {
					st = scheduler.Failed
				}
				r := &scheduler.Record{ID: scheduler.SlotID("big", slot), Pipeline: "big", Status: st, Trigger: scheduler.Trigger{Kind: scheduler.Scheduled, Slot: slot},
					Attempt: 1, Created: slot, Start: slot, End: slot.Add(time.Second)}
				for _, name := range []string{"a", "b", "c", "d"} {
					r.Stages = append(r.Stages, scheduler.StageRecord{Name: name, Kind: "vacuum", Status: st, Start: slot, End: slot.Add(time.Second)})
				}
				if err := store.Create(ctx, r); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d runs in %s", n, time.Since(start).Round(time.Second))
	obs := NewObserver()
	runner := scheduler.NewRunner(scheduler.RunnerConfig{Opener: oneStore{wh}, Logger: quiet, OnChange: obs.RunChanged})
	sched := scheduler.New(scheduler.Config{Runner: runner, Logger: quiet})
	if err := sched.Set(ctx, []*pipelines.Spec{spec}); err != nil {
		b.Fatal(err)
	}
	site, err := New(Config{Scheduler: sched, Observer: obs, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	h := site.Handler()
	get := func(path, want string) time.Duration {
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1"
		rr := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(rr, req)
		took := time.Since(t0)
		if rr.Code != 200 || !strings.Contains(rr.Body.String(), want) {
			b.Fatalf("GET %s: %d %.300s", path, rr.Code, rr.Body.String())
		}
		return took
	}
	var grid, failed, page, list, runs, hour []time.Duration
	// An hour in the middle of the history: the runs page of a time range.
	mid := base.Add(time.Duration(n/2) * time.Minute)
	rangeQ := "/runs?from=" + mid.Format("2006-01-02T15:04") + "&to=" + mid.Add(59*time.Minute).Format("2006-01-02T15:04")
	b.ResetTimer()
	for b.Loop() {
		grid = append(grid, get("/api/v1/pipelines/big/grid", fmt.Sprintf(`"seq":%d`, n)))
		failed = append(failed, get("/api/v1/pipelines/big/grid?status=failed", `"status":"failed"`))
		page = append(page, get("/pipelines/big", fmt.Sprintf("%d runs recorded", n)))
		list = append(list, get("/api/v1/runs?limit=50", fmt.Sprintf(`"seq":%d`, n-49)))
		runs = append(runs, get("/runs", scheduler.SlotID("big", base.Add(time.Duration(n-1)*time.Minute))))
		hour = append(hour, get(rangeQ, scheduler.SlotID("big", mid.Add(59*time.Minute))))
	}
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(grid), "grid-p50-ms")
	b.ReportMetric(p50(failed), "failed-p50-ms")
	b.ReportMetric(p50(page), "page-p50-ms")
	b.ReportMetric(p50(list), "list50-p50-ms")
	b.ReportMetric(p50(runs), "runs-page-p50-ms")
	b.ReportMetric(p50(hour), "runs-hour-p50-ms")
}
