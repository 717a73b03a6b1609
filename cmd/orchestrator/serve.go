package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/scheduler"
	"github.com/orchestrator-io/orchestrator/web"
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
			"each warehouse (503 while shutting down). The same server has the web pages (/),\n" +
			"the JSON API (/api/v1/, described at /api/v1/openapi.json) and /metrics.\n\n" +
			"It listens on 127.0.0.1 unless --addr says otherwise; another address needs a\n" +
			"token: --auth-token-file FILE or ORCH_AUTH_TOKEN (may view and trigger), and\n" +
			"optionally --read-token-file FILE or ORCH_READ_TOKEN (may view only). Browsers\n" +
			"log in at /login; programs send Authorization: Bearer TOKEN.\n\n" +
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
			fs.DurationVar(&o.watchEvery, "watch-every", scheduler.DefaultWatchEvery, "how often the freshness of tables (freshness: in a pipeline) is read from their logs")
			fs.StringVar(&o.baseURL, "base-url", "", "the `URL` notifications link runs to (default http://ADDR)")
			fs.StringVar(&o.tokenFile, "auth-token-file", "", "a `file` holding the token that may view and trigger (else ORCH_AUTH_TOKEN)")
			fs.StringVar(&o.readTokenFile, "read-token-file", "", "a `file` holding a token that may only view (else ORCH_READ_TOKEN)")
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
	tokenFile          string
	readTokenFile      string
	maxStages          int
	grace              time.Duration
	heartbeatTimeout   time.Duration
	leaseTTL           time.Duration
	watchEvery         time.Duration
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
	auth, err := serveAuth(e, o)
	if err != nil {
		return err
	}
	if err := web.CheckListen(o.addr, auth); err != nil {
		return usagef("%v", err)
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	addr := ln.Addr().String()
	if o.baseURL == "" {
		o.baseURL = "http://" + addr
	}
	sweepSpill(o.stage, logger)
	dispatcher := executor.NewDispatcher(0)
	defer dispatcher.Close()
	obs := web.NewObserver()
	s := &server{e: e, o: o, logger: logger}
	s.runner, s.sched = newServeScheduler(e, o, addr, logger, dispatcher, obs)
	bg := context.WithoutCancel(ctx) // the loop's store work is not cut by the signal
	s.loader = &pipelineLoader{e: e, dir: dir, sched: s.sched, log: logger}
	s.loader.load(bg)

	s.site, err = web.New(web.Config{
		Scheduler: s.sched, Observer: obs, Auth: auth, Addr: addr, Now: e.now, Logger: logger,
		EngineInfo: "orchestrator " + version,
		LoadErrors: s.loader.loadErrors,
		Stopping:   s.stopping.Load,
	})
	if err != nil {
		ln.Close()
		return err
	}
	srv := s.site.HTTPServer()
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()
	logger.Info(fmt.Sprintf("serving %s on http://%s (pid %d)", o.dir, addr, s.runner.Identity().PID), "pipelines", len(s.sched.Pipelines()))
	return s.loop(ctx, bg, srv, srvDone)
}

// newServeScheduler builds serve's runner (its stages run through dispatcher, its runs
// are observed by obs) and the scheduler over it, listening on addr.
func newServeScheduler(e *env, o serveOptions, addr string, logger *slog.Logger, dispatcher *executor.Dispatcher, obs *web.Observer) (*scheduler.Runner, *scheduler.Scheduler) {
	var limiter *scheduler.Limiter
	if o.maxStages > 0 {
		limiter = scheduler.NewLimiter(o.maxStages)
	}
	var sched *scheduler.Scheduler
	runner := scheduler.NewRunner(scheduler.RunnerConfig{
		Engine:       dispatcher,
		OnChange:     obs.RunChanged,
		MemoryBudget: o.stage.memoryBudget,
		SpillDir:     o.stage.spillDir,
		Opener:       e.opener(o.s3),
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
		Addr: addr, Logger: logger, OnSlot: obs.SlotHandled, OnTick: obs.TickDone, WatchEvery: o.watchEvery,
	})
	return runner, sched
}

// pipelineLoader loads a pipeline directory's changed files into the scheduler and keeps
// the files that failed to load for the web server.
type pipelineLoader struct {
	e     *env
	dir   *pipelineDir
	sched *scheduler.Scheduler
	log   *slog.Logger

	mu       sync.Mutex // guards loadErrs, which the web server reads
	loadErrs []web.LoadError
}

// load scans the directory, reports what it loaded and skipped on stderr and, when the
// set of valid pipelines changed, hands it to the scheduler.
func (l *pipelineLoader) load(ctx context.Context) {
	changed, report := l.dir.scan(l.e)
	errs := l.dir.loadErrors()
	l.mu.Lock()
	l.loadErrs = errs
	l.mu.Unlock()
	for _, n := range report {
		n.log(l.log)
	}
	if !changed {
		return
	}
	specs, dups := l.dir.specs()
	for _, d := range dups {
		l.log.Warn(d)
	}
	if err := l.sched.Set(ctx, specs); err != nil {
		l.log.Error("load the pipelines", "err", err)
	}
}

// loadErrors lists the files that failed to load at the last scan.
func (l *pipelineLoader) loadErrors() []web.LoadError {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.loadErrs)
}

// server is a running serve: its scheduler and runner, the loader of its pipeline
// directory and its web site.
type server struct {
	e        *env
	o        serveOptions
	runner   *scheduler.Runner
	sched    *scheduler.Scheduler
	loader   *pipelineLoader
	site     *web.Server
	stopping atomic.Bool // a shutdown is in progress: /healthz answers 503
	logger   *slog.Logger
}

// loop ticks the scheduler on whole seconds and reloads the pipeline files every
// reloadEvery until ctx ends (a graceful shutdown) or the HTTP server srv fails (srvDone).
// bg is the context of the store work, which the signal does not cut.
func (s *server) loop(ctx, bg context.Context, srv *http.Server, srvDone <-chan error) error {
	lastLoad, lastSweep := s.e.now(), s.e.now()
	for {
		now := s.e.now()
		wait := now.Truncate(time.Second).Add(time.Second).Sub(now) // ticks on whole seconds, when slots fall
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			s.shutdown(bg, srv, context.Cause(ctx))
			return nil
		case err := <-srvDone:
			t.Stop()
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			s.sched.Shutdown(bg, s.o.grace, "serve's HTTP server failed")
			return fmt.Errorf("serve: %w", err)
		case <-t.C:
		}
		if s.e.now().Sub(lastLoad) >= reloadEvery {
			s.loader.load(bg)
			lastLoad = s.e.now()
		}
		if s.e.now().Sub(lastSweep) >= spillSweepEvery {
			sweepSpill(s.o.stage, s.logger)
			lastSweep = s.e.now()
		}
		s.sched.Tick(bg)
	}
}

// shutdown stops serve gracefully: no new runs, running stages get the grace period to
// finish, notifications get sent, then the web site and the HTTP server close.
func (s *server) shutdown(bg context.Context, srv *http.Server, cause error) {
	s.stopping.Store(true)
	s.logger.Info("stopping: no new runs; running stages get the grace period to finish", "cause", cause.Error(), "grace", s.o.grace.String())
	s.sched.Shutdown(bg, s.o.grace, "serve shut down")
	waitNotifications(s.runner, 10*time.Second)
	sctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	s.site.Close()
	srv.Shutdown(sctx)
	s.logger.Info("stopped: every run's record is final")
}

// serveAuth reads the tokens: --auth-token-file or ORCH_AUTH_TOKEN, --read-token-file
// or ORCH_READ_TOKEN.
func serveAuth(e *env, o serveOptions) (web.Auth, error) {
	read := func(file, envVar string) (string, error) {
		if file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return "", fmt.Errorf("token file: %w", err)
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" {
				return "", fmt.Errorf("token file %s is empty", file)
			}
			return tok, nil
		}
		v, _ := e.lookupEnv(envVar)
		return strings.TrimSpace(v), nil
	}
	var a web.Auth
	var err error
	if a.Token, err = read(o.tokenFile, "ORCH_AUTH_TOKEN"); err != nil {
		return a, err
	}
	if a.ReadToken, err = read(o.readTokenFile, "ORCH_READ_TOKEN"); err != nil {
		return a, err
	}
	if a.ReadToken != "" && a.Token == "" {
		return a, usagef("a read-only token needs a full one too (--auth-token-file or ORCH_AUTH_TOKEN)")
	}
	if a.ReadToken != "" && a.ReadToken == a.Token {
		return a, usagef("the read-only token must differ from the full one")
	}
	return a, nil
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

// health is the body of /healthz.
type health = web.Health
