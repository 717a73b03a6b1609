package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

func runCommand() *command {
	return &command{
		name:    "run",
		args:    "PIPELINE.yaml",
		summary: "run a pipeline once, now",
		help: "Run a pipeline once, now: every stage, or only those named with --stage (their\n" +
			"upstream stages are not run). Independent stages run at once, up to the\n" +
			"pipeline's max_parallel; a failed stage is retried as configured, and the stages\n" +
			"downstream of one that fails for good are skipped.\n\n" +
			"Progress goes to stderr: live per stage on a terminal, a line per state change\n" +
			"otherwise. The summary goes to stdout: per stage its status, attempts, duration,\n" +
			"rows read and written, and the table versions it committed.\n\n" +
			"Ctrl-C (SIGINT) or SIGTERM cancels the run: running stages stop at a safe point,\n" +
			"so every table stays at a committed version, and a rerun does the rest of the\n" +
			"work exactly once. The exit code is 1 when any stage did not succeed.\n\n" +
			"The run is recorded in the warehouse's run store (see \"runs --help\"), like the\n" +
			"runs of serve; --param sets the pipeline's parameters for it.\n\n" +
			"S3 settings for an s3:// warehouse or source come from --s3-* flags, else the\n" +
			"pipeline's storage section, else the AWS_* variables (see \"table --help\").",
		setup: func(fs *flag.FlagSet) runFunc {
			var stages listFlag
			stages.split = true
			fs.Var(&stages, "stage", "run only this `stage` (repeatable, or comma-separated)")
			params := paramFlag{}
			fs.Var(params, "param", "set a pipeline parameter: `name=value` (repeatable)")
			format := fs.String("format", formatText, "summary "+formatUsage)
			var s3 storeurl.Options
			addS3Flags(fs, &s3)
			var so stageOptions
			addStageFlags(fs, &so)
			return func(ctx context.Context, e *env, args []string) error {
				if err := checkFormat(*format); err != nil {
					return err
				}
				switch len(args) {
				case 0:
					return usagef("missing PIPELINE.yaml")
				case 1:
				default:
					return usagef("unexpected argument %q after PIPELINE.yaml", args[1])
				}
				return runPipeline(ctx, e, args[0], stages.values, params, *format, s3, so)
			}
		},
	}
}

func runPipeline(ctx context.Context, e *env, file string, only []string, params map[string]string, format string, s3 storeurl.Options, so stageOptions) error {
	spec, err := loadPipeline(e, file)
	if err != nil {
		return err
	}
	for _, name := range only {
		if spec.Stage(name) == nil {
			names := make([]string, len(spec.Stages))
			for i, st := range spec.Stages {
				names[i] = st.Name
			}
			return usagef("--stage %q: no such stage in %s; stages: %s", name, file, strings.Join(names, ", "))
		}
	}
	if _, err := spec.ResolveParams(params); err != nil {
		return usagef("%v", err)
	}
	if storeurl.InProcess(spec.Warehouse) {
		return fmt.Errorf("pipeline %s: warehouse %s lives only in this process, so the run's tables would be lost when it ends", spec.Name, spec.Warehouse)
	}
	stores := e.opener(s3)
	trig := scheduler.Trigger{Kind: scheduler.Manual, By: e.who(), Params: params, Stages: only}
	return runWithDisplay(e, stores, so, spec, format, func(r *scheduler.Runner, h scheduler.Hooks) (*scheduler.Record, error) {
		return r.Run(ctx, spec, trig, h)
	})
}

// runWithDisplay carries out one run in this process (start makes it with the runner
// and hooks it is given) with live progress on stderr, then prints its summary on
// stdout. It returns nil if the run succeeded, else errReported (or what kept the run
// from starting).
func runWithDisplay(e *env, stores scheduler.Opener, so stageOptions, spec *pipelines.Spec, format string, start func(*scheduler.Runner, scheduler.Hooks) (*scheduler.Record, error)) error {
	disp := newRunDisplay(e.stderr, e.now)
	sweepSpill(so, slog.New(slog.NewTextHandler(disp, &slog.HandlerOptions{Level: slog.LevelInfo})))
	logger := slog.New(slog.NewTextHandler(disp, &slog.HandlerOptions{Level: slog.LevelWarn}))
	runner := newRunner(e, stores, so, logger, nil)
	rec, err := start(runner, scheduler.Hooks{
		Observer: disp.event,
		Progress: disp.progress,
		Done:     disp.done,
		Logger:   logger,
		Started: func(id string, stages []string) {
			fmt.Fprintf(e.stderr, "run %s of pipeline %s: %s, warehouse %s\n", id, spec.Name, plural(len(stages), "stage"), spec.Warehouse)
			disp.start(stages)
		},
	})
	disp.stop()
	runner.Wait()
	if rec == nil || len(rec.Stages) == 0 {
		return err
	}
	return endOfRun(e, format, rec)
}

// endOfRun prints an ended run's summary and returns nil if it succeeded.
func endOfRun(e *env, format string, rec *scheduler.Record) error {
	if err := writeRunSummary(e, format, rec); err != nil {
		return err
	}
	switch rec.Status {
	case scheduler.Succeeded:
		return nil
	case scheduler.Cancelled:
		fmt.Fprintf(e.stderr, "run %s cancelled: every table is at a committed version; run again to finish the work\n", rec.ID)
	default:
		fmt.Fprintf(e.stderr, "run %s %s\n", rec.ID, rec.Status)
	}
	return errReported
}

// loadPipeline loads and validates a pipeline file, printing its problems.
func loadPipeline(e *env, file string) (*pipelines.Spec, error) {
	spec, err := pipelines.Load(file, pipelines.Options{LookupEnv: e.lookupEnv})
	if err != nil {
		var perr *pipelines.Error
		if errors.As(err, &perr) {
			for _, p := range perr.Problems {
				fmt.Fprintln(e.stderr, p.String())
			}
			return nil, errReported
		}
		return nil, err
	}
	return spec, nil
}

// heartbeatEvery is how often a CLI run heartbeats its record (a third of the default
// heartbeat timeout, so a serve never takes it for dead).
const heartbeatEvery = scheduler.DefaultHeartbeatTimeout / 3

// newRunner is the runner of the CLI's runs and of serve: runs are recorded in each
// pipeline's warehouse, and notifications are sent. limiter bounds stages (serve).
func newRunner(e *env, stores scheduler.Opener, so stageOptions, logger *slog.Logger, limiter *scheduler.Limiter) *scheduler.Runner {
	return scheduler.NewRunner(scheduler.RunnerConfig{
		Engine:         executor.NewDispatcher(0),
		MemoryBudget:   so.memoryBudget,
		SpillDir:       so.spillDir,
		Opener:         stores,
		Now:            e.now,
		EngineInfo:     "orchestrator/" + version,
		Logger:         logger,
		Limiter:        limiter,
		HeartbeatEvery: heartbeatEvery,
		Notifier:       scheduler.NewNotifier(scheduler.NotifierConfig{Now: e.now, Logger: logger}),
	})
}
