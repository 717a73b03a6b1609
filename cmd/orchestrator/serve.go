package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

func serveCommand() *command {
	return &command{
		name:    "serve",
		args:    "--pipelines DIR",
		summary: "run the pipelines of a directory on their schedules, and serve /healthz",
		help: "Load every *.yaml and *.yml file of DIR (an invalid one is reported and skipped),\n" +
			"run each pipeline on its schedule under its overlap and catch-up policies, and\n" +
			"record every run in its warehouse's run store. A changed file is loaded again\n" +
			"within seconds; an invalid change keeps the previous version running and is\n" +
			"reported. Runs asked for with \"runs trigger\", \"runs retry\" or \"runs backfill\"\n" +
			"come to the serve that schedules their pipeline.\n\n" +
			"Several serve processes may share a warehouse: one holds its lease and schedules\n" +
			"it, the others take over within --lease-ttl when it stops. A run whose process\n" +
			"stopped heartbeating for --heartbeat-timeout is marked interrupted, and a slot\n" +
			"run again under the pipeline's catch-up policy.\n\n" +
			"GET /healthz answers 200 with the pipelines, the files skipped and the lease of\n" +
			"each warehouse (503 while shutting down).\n\n" +
			"SIGTERM or SIGINT: no new run starts, running stages get --shutdown-grace to\n" +
			"reach a safe point, then are cancelled; every record ends consistent.",
		setup: func(fs *flag.FlagSet) runFunc {
			var o serveOptions
			fs.StringVar(&o.dir, "pipelines", "", "the `dir`ectory of pipeline files")
			fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen `address` of the HTTP server")
			fs.IntVar(&o.maxStages, "max-stages", 0, "at most `n` stages running at once across all pipelines (0: no limit)")
			fs.DurationVar(&o.grace, "shutdown-grace", 30*time.Second, "how long running stages get to finish on shutdown")
			fs.DurationVar(&o.heartbeatTimeout, "heartbeat-timeout", scheduler.DefaultHeartbeatTimeout, "a run whose heartbeat is older is marked interrupted")
			fs.DurationVar(&o.leaseTTL, "lease-ttl", scheduler.DefaultLeaseTTL, "a silent lease holder loses the lease after this long")
			fs.StringVar(&o.baseURL, "base-url", "", "the `URL` notifications link runs to (default http://ADDR)")
			addS3Flags(fs, &o.s3)
			addStageFlags(fs, &o.stage)
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("unexpected argument %q", args[0])
				}
				if o.dir == "" {
					return usagef("missing --pipelines DIR")
				}
				if o.maxStages < 0 {
					return usagef("--max-stages must be 0 or more, got %d", o.maxStages)
				}
				return serve(ctx, e, o)
			}
		},
	}
}

type serveOptions struct {
	dir, addr, baseURL string
	maxStages          int
	grace              time.Duration
	heartbeatTimeout   time.Duration
	leaseTTL           time.Duration
	s3                 storeurl.Options
	stage              stageOptions
}

// reloadEvery is how often serve looks for changed pipeline files.
const reloadEvery = 2 * time.Second

func serve(ctx context.Context, e *env, o serveOptions) error {
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir, err := newPipelineDir(o.dir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	addr := ln.Addr().String()
	if o.baseURL == "" {
		o.baseURL = "http://" + addr
	}
	stores := newStoreCache(o.s3)
	defer stores.close()
	var limiter *scheduler.Limiter
	if o.maxStages > 0 {
		limiter = scheduler.NewLimiter(o.maxStages)
	}
	var sched *scheduler.Scheduler
	runner := scheduler.NewRunner(scheduler.RunnerConfig{
		MemoryBudget: o.stage.memoryBudget,
		SpillDir:     o.stage.spillDir,
		Opener:       stores,
		Now:          e.now,
		EngineInfo:   "orchestrator/" + version,
		Logger:       logger,
		Limiter:      limiter,
		Notifier:     scheduler.NewNotifier(scheduler.NotifierConfig{Now: e.now, Logger: logger, BaseURL: o.baseURL}),
		Consumers: func() []jobs.Consumer { // vacuum keeps what any loaded pipeline has to read
			var all []jobs.Consumer
			for _, s := range sched.Pipelines() {
				all = append(all, s.Consumers()...)
			}
			return all
		},
	})
	sched = scheduler.New(scheduler.Config{
		Runner: runner, Now: e.now, HeartbeatTimeout: o.heartbeatTimeout, LeaseTTL: o.leaseTTL,
		Addr: addr, Logger: logger,
	})
	bg := context.WithoutCancel(ctx) // the loop's store work is not cut by the signal
	load := func() {
		changed, report := dir.scan(e)
		for _, line := range report {
			fmt.Fprintln(e.stderr, line)
		}
		if !changed {
			return
		}
		specs, dups := dir.specs()
		for _, d := range dups {
			fmt.Fprintln(e.stderr, d)
		}
		if err := sched.Set(bg, specs); err != nil {
			fmt.Fprintf(e.stderr, "serve: %v\n", err)
		}
	}
	load()

	var stopping sync.Mutex
	stopped := false
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		stopping.Lock()
		down := stopped
		stopping.Unlock()
		h := health{Status: "ok", Addr: addr, Invalid: dir.invalid(), Leases: sched.Leases(), ActiveRuns: len(runner.Owned())}
		for _, s := range sched.Pipelines() {
			h.Pipelines = append(h.Pipelines, s.Name)
		}
		code := http.StatusOK
		if down {
			h.Status, code = "stopping", http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(h)
	})
	// The web pages mount on this mux too; they reach runs through sched and the run
	// stores (sched.Pipelines, Runner.Store, Trigger, Cancel).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()
	fmt.Fprintf(e.stderr, "serving %s on http://%s (pid %d)\n", o.dir, addr, runner.Identity().PID)

	lastLoad := e.now()
	for {
		now := e.now()
		wait := now.Truncate(time.Second).Add(time.Second).Sub(now) // ticks on whole seconds, when slots fall
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			stopping.Lock()
			stopped = true
			stopping.Unlock()
			fmt.Fprintf(e.stderr, "serve: stopping (%v): no new runs; running stages get up to %s to finish\n", context.Cause(ctx), o.grace)
			sched.Shutdown(bg, o.grace, "serve shut down")
			waitNotifications(runner, 10*time.Second)
			sctx, cancel := context.WithTimeout(bg, 5*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
			fmt.Fprintln(e.stderr, "serve: stopped; every run's record is final")
			return nil
		case err := <-srvDone:
			t.Stop()
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			sched.Shutdown(bg, o.grace, "serve's HTTP server failed")
			return fmt.Errorf("serve: %w", err)
		case <-t.C:
		}
		if e.now().Sub(lastLoad) >= reloadEvery {
			load()
			lastLoad = e.now()
		}
		sched.Tick(bg)
	}
}

// health is the body of /healthz.
type health struct {
	Status     string                 `json:"status"`
	Addr       string                 `json:"addr"`
	Pipelines  []string               `json:"pipelines"`
	Invalid    []string               `json:"invalid_files,omitempty"`
	Leases     []scheduler.LeaseState `json:"leases"`
	ActiveRuns int                    `json:"active_runs"`
}

// waitNotifications waits for the runner's notifications, at most d.
func waitNotifications(r *scheduler.Runner, d time.Duration) {
	done := make(chan struct{})
	go func() {
		r.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}
