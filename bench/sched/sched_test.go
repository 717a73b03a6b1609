// Package sched benchmarks the scheduler at scale: go test -bench . -benchtime 3x ./bench/sched
// (the bench/README.md explains the figures). It is a benchmark, never a timed test.
package sched

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// opener serves the warehouse, and its run records as serve keeps them on local disk:
// the same directory written without fsync (scheduler.RecordsOpener).
type opener struct{ wh, records objectstore.Store }

func (o opener) Records(context.Context, *pipelines.Spec) (objectstore.Store, error) {
	return o.records, nil
}

// counting counts writes (a diagnostic for the benchmark).
type counting struct {
	objectstore.Store
	n atomic.Int64
}

func (c *counting) Put(ctx context.Context, k string, r io.Reader, n int64) error {
	c.n.Add(1)
	return c.Store.Put(ctx, k, r, n)
}

func (c *counting) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) error {
	c.n.Add(1)
	return c.Store.PutIfAbsent(ctx, k, r, n)
}

func (o opener) Warehouse(context.Context, *pipelines.Spec) (objectstore.Store, error) {
	return o.wh, nil
}

func (o opener) Location(context.Context, *pipelines.Spec, string) (objectstore.Store, string, error) {
	return nil, "", fmt.Errorf("no sources")
}

// idle is the engine of the benchmark: every stage does nothing (the benchmark measures
// the scheduler and its records, not a stage's work).
type idle struct{}

func (idle) RunStage(context.Context, pipelines.StageRun) (jobs.Result, error) {
	return jobs.Result{}, nil
}

// clock runs at real speed from an offset the benchmark moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// aim moves the clock so that t is d of real time away.
func (c *clock) aim(t time.Time, d time.Duration) {
	c.offset.Store(int64(t.Sub(time.Now().Add(d))))
}

// waitTick waits, as serve's loop does, for the next whole second of the clock.
func (c *clock) waitTick() {
	now := c.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
}

func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[int(float64(len(ds)-1)*q)]
}

// BenchmarkServe1000EveryMinute: one scheduler with 1,000 pipelines scheduled every
// minute on a local warehouse (the fs store; the run records without fsync, as serve
// writes them, unless -sync), and with the run store in memory. Each
// iteration is one minute boundary: 1,000 slots come due at once. Reported: the planner's
// time at the boundary (deciding the 1,000 due slots), the whole boundary tick (planning,
// recording the slots and dispatching their runs), an idle tick (nothing due), and the
// lag from each slot to its run's start, p50 and p99.
func BenchmarkServe1000EveryMinute(b *testing.B) {
	b.Run("fs", func(b *testing.B) {
		dir := keptDir(b)
		fsw, err := fs.New(fs.Config{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		records, err := fs.New(fs.Config{Dir: dir, NoSync: !*sync})
		if err != nil {
			b.Fatal(err)
		}
		serve1000(b, fsw, records)
	})
	b.Run("mem", func(b *testing.B) {
		st := mem.New(mem.Config{})
		serve1000(b, st, st)
	})
}

var (
	sync   = flag.Bool("sync", false, "write the run records on local disk with fsync, as the tables are")
	parent = flag.String("dir", "", "make the local warehouses in this directory (default: the system's temporary directory)")
	spaced = flag.Bool("spaced", false, "let a real minute pass from one boundary to the next, as in serve (by default the clock jumps to the next boundary once the runs are done)")
)

// keptDirs are removed when every benchmark has run.
var keptDirs []string

// keptDir is a temporary directory kept until every benchmark has run. The testing
// package runs a benchmark's function once with b.N = 1 before its timed round, and
// b.TempDir would remove that round's warehouse, some 10,000 files, just before the
// timed round starts: on an ext4 without a journal, which passes over inodes freed in
// the last minute or more at every file create, that removal alone would slow the timed
// round's first boundary several fold. A serve has no such removal behind it.
func keptDir(b *testing.B) string {
	dir, err := os.MkdirTemp(*parent, "sched-bench-")
	if err != nil {
		b.Fatal(err)
	}
	keptDirs = append(keptDirs, dir)
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range keptDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func serve1000(b *testing.B, fsw, records objectstore.Store) {
	const n = 1000
	var err error
	wh := &counting{Store: records}
	c := &clock{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runner := scheduler.NewRunner(scheduler.RunnerConfig{Opener: opener{fsw, wh}, Now: c.Now, Engine: idle{}, Logger: quiet})
	var ticks []scheduler.TickTimes // of the boundaries
	var tickMu gosync.Mutex
	sched := scheduler.New(scheduler.Config{Runner: runner, Now: c.Now, Logger: quiet, OnTick: func(t scheduler.TickTimes) {
		if t.Slots > 0 {
			tickMu.Lock()
			ticks = append(ticks, t)
			tickMu.Unlock()
		}
	}})
	specs := make([]*pipelines.Spec, n)
	for i := range specs {
		yaml := fmt.Sprintf("pipeline: p%04d\nschedule: \"* * * * *\"\ntables: {raw.t: {columns: [{name: id, type: string}]}}\nstages: [{name: v, kind: vacuum, tables: [raw.t]}]\n", i)
		if specs[i], err = pipelines.Parse(fmt.Sprintf("/p%04d.yaml", i), []byte(yaml), pipelines.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := sched.Set(ctx, specs); err != nil {
		b.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.aim(base.Add(30*time.Second), 0)
	sched.Tick(ctx) // first load: the lease, every watermark
	store := scheduler.NewStore(records)
	var boundary, idle, lags []time.Duration
	var last time.Time // the real time of the last boundary
	b.ResetTimer()
	for i := range b.N {
		minute := base.Add(time.Duration(i+1) * time.Minute)
		if *spaced && !last.IsZero() {
			time.Sleep(time.Until(last.Add(time.Minute - time.Second)))
		}
		c.aim(minute, 300*time.Millisecond)
		c.waitTick()
		start := time.Now()
		last = start
		w0 := wh.n.Load()
		sched.Tick(ctx)
		boundary = append(boundary, time.Since(start))
		tickMu.Lock()
		t := ticks[len(ticks)-1]
		tickMu.Unlock()
		b.Logf("boundary tick: %s (plan %s, record %s, dispatch %s), %d writes of records", time.Since(start), t.Plan, t.Record, t.Dispatch, wh.n.Load()-w0)
		sched.Wait()
		b.Logf("runs done: %d writes of records in all", wh.n.Load()-w0)
		for k := range 3 { // seconds with nothing due
			c.waitTick()
			start := time.Now()
			sched.Tick(ctx)
			if k > 0 {
				idle = append(idle, time.Since(start))
			}
		}
		b.StopTimer()
		var mu gosync.Mutex
		var g errgroup.Group
		g.SetLimit(16)
		for _, s := range specs {
			g.Go(func() error {
				r, err := store.Get(ctx, scheduler.SlotID(s.Name, minute))
				if err != nil {
					return err
				}
				if r.Status != scheduler.Succeeded {
					return fmt.Errorf("run %s: %s %s", r.ID, r.Status, r.Reason)
				}
				mu.Lock()
				lags = append(lags, r.Start.Sub(minute))
				mu.Unlock()
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	var plan []time.Duration
	for _, t := range ticks {
		plan = append(plan, t.Plan)
	}
	b.ReportMetric(float64(quantile(plan, 1).Microseconds())/1000, "plan-max-ms")
	b.ReportMetric(float64(quantile(boundary, 1).Milliseconds()), "boundary-tick-max-ms")
	b.ReportMetric(float64(quantile(idle, 1).Microseconds())/1000, "idle-tick-max-ms")
	b.ReportMetric(float64(quantile(lags, 0.5).Milliseconds()), "lag-p50-ms")
	b.ReportMetric(float64(quantile(lags, 0.99).Milliseconds()), "lag-p99-ms")
}

// BenchmarkRunsList100k: the newest 50 runs of a pipeline with 100,000 runs, as runs
// list reads them from a local warehouse's index. Reported: p50 and p95 of one listing.
func BenchmarkRunsList100k(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	fast, err := fs.New(fs.Config{Dir: dir, NoSync: true}) // to write the history quickly
	if err != nil {
		b.Fatal(err)
	}
	wh, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	store := scheduler.NewStore(fast)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The records are written by 16 writers, as a busy serve would over months.
	var g errgroup.Group
	g.SetLimit(16)
	var next atomic.Int64
	for range 16 {
		g.Go(func() error {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return nil
				}
				slot := base.Add(time.Duration(i) * time.Minute)
				r := &scheduler.Record{ID: scheduler.SlotID("big", slot), Pipeline: "big", Status: scheduler.Succeeded,
					Trigger: scheduler.Trigger{Kind: scheduler.Scheduled, Slot: slot}, Attempt: 1, Created: slot, Start: slot, End: slot.Add(time.Second)}
				if err := store.Create(ctx, r); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		fresh := scheduler.NewStore(wh) // no cache: as a new runs list process
		start := time.Now()
		es, err := fresh.List(ctx, "big", 50, nil)
		took = append(took, time.Since(start))
		if err != nil || len(es) != 50 || es[0].Seq != n {
			b.Fatalf("list: %d entries, newest %v (%v)", len(es), es[0].Seq, err)
		}
	}
	b.ReportMetric(float64(quantile(took, 0.5).Microseconds())/1000, "list-p50-ms")
	b.ReportMetric(float64(quantile(took, 0.95).Microseconds())/1000, "list-p95-ms")
}
