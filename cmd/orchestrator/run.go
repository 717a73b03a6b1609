package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
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
			"S3 settings for an s3:// warehouse or source come from --s3-* flags, else the\n" +
			"pipeline's storage section, else the AWS_* variables (see \"table --help\").",
		setup: func(fs *flag.FlagSet) runFunc {
			var stages listFlag
			stages.split = true
			fs.Var(&stages, "stage", "run only this `stage` (repeatable, or comma-separated)")
			format := fs.String("format", formatText, "summary "+formatUsage)
			var s3 storeurl.Options
			addS3Flags(fs, &s3)
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
				return runPipeline(ctx, e, args[0], stages.values, *format, s3)
			}
		},
	}
}

func runPipeline(ctx context.Context, e *env, file string, only []string, format string, s3 storeurl.Options) error {
	spec, err := pipelines.Load(file, pipelines.Options{LookupEnv: e.lookupEnv})
	if err != nil {
		var perr *pipelines.Error
		if errors.As(err, &perr) {
			for _, p := range perr.Problems {
				fmt.Fprintln(e.stderr, p.String())
			}
			return errReported
		}
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
	if strings.HasPrefix(spec.Warehouse, "mem://") {
		return fmt.Errorf("pipeline %s: warehouse %s lives only in this process, so the run's tables would be lost when it ends", spec.Name, spec.Warehouse)
	}
	stores := &storeCache{opts: storageOptions(spec.Storage, s3)}
	defer stores.close()
	warehouse, err := stores.open(ctx, spec.Warehouse)
	if err != nil {
		return fmt.Errorf("pipeline %s: warehouse: %w", spec.Name, err)
	}

	runID := newRunID(e)
	disp := newRunDisplay(e.stderr, e.now)
	logger := slog.New(slog.NewTextHandler(disp, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g, err := pipelines.Compile(spec, pipelines.Runtime{
		Warehouse:    warehouse,
		OpenLocation: stores.openLocation,
		Delta: delta.Options{
			Now:        e.now,
			EngineInfo: "orchestrator/" + version,
			UserName:   spec.Identity,
			Logger:     logger,
		},
		RunID:    runID,
		Logger:   logger,
		Progress: disp.progress,
		Done:     disp.done,
	})
	if err != nil {
		return err
	}
	if len(only) > 0 {
		if g, err = g.Subgraph(only...); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stderr, "run %s of pipeline %s: %s, warehouse %s\n", runID, spec.Name, plural(g.Len(), "stage"), spec.Warehouse)
	disp.start(g.Order())
	// A failed or cancelled run also returns an error; its nodes' errors are in the
	// progress lines and the summary.
	res, err := dag.Run(ctx, g, dag.Options{MaxParallel: spec.MaxParallel, Observer: disp.event, Now: e.now})
	disp.stop()
	if err != nil && len(res.Nodes) == 0 {
		return err
	}
	cols, rows := summaryColumns, disp.summary(res)
	if format == formatText {
		cols = cols[:len(cols)-1]
		for i := range rows {
			rows[i] = rows[i][:len(cols)]
		}
	}
	if err := writeRows(e, format, cols, rows); err != nil {
		return err
	}
	switch res.Status {
	case dag.Succeeded:
		return nil
	case dag.Cancelled:
		fmt.Fprintf(e.stderr, "run %s cancelled: every table is at a committed version; run again to finish the work\n", runID)
	default:
		fmt.Fprintf(e.stderr, "run %s failed\n", runID)
	}
	return errReported
}

// newRunID names a run: its start time and a random suffix, e.g. 20260114T020000Z-k3f9q2.
func newRunID(e *env) string {
	return e.now().UTC().Format("20060102T150405Z") + "-" + strings.ToLower(rand.Text()[:6])
}

// storeCache opens each store a run needs once and closes them when the run ends.
type storeCache struct {
	opts   storeurl.Options
	mu     sync.Mutex // guards stores
	stores map[string]objectstore.Store
}

func (c *storeCache) open(ctx context.Context, loc string) (objectstore.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stores[loc]; ok {
		return st, nil
	}
	st, err := storeurl.Open(ctx, loc, c.opts)
	if err != nil {
		return nil, err
	}
	if c.stores == nil {
		c.stores = map[string]objectstore.Store{}
	}
	c.stores[loc] = st
	return st, nil
}

// openLocation opens a source directory for ingest: a local directory is a store of its
// own (it must exist: a missing source is an error, not an empty directory to create);
// an s3://bucket/prefix is the bucket's store and the prefix inside it.
func (c *storeCache) openLocation(ctx context.Context, location string) (objectstore.Store, string, error) {
	if rest, ok := strings.CutPrefix(location, "file://"); ok {
		location = rest
	}
	if scheme, _, ok := strings.Cut(location, "://"); ok {
		u, err := url.Parse(location)
		if err != nil {
			return nil, "", err
		}
		st, err := c.open(ctx, scheme+"://"+u.Host)
		if err != nil {
			return nil, "", err
		}
		return st, strings.Trim(u.Path, "/"), nil
	}
	fi, err := os.Stat(location)
	if err != nil {
		return nil, "", err
	}
	if !fi.IsDir() {
		return nil, "", fmt.Errorf("%s is not a directory", location)
	}
	st, err := c.open(ctx, location)
	return st, "", err
}

func (c *storeCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stores {
		if cl, ok := st.(io.Closer); ok {
			cl.Close()
		}
	}
}
