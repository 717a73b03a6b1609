package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// tableArgHelp explains TABLE; every table command shows it.
const tableArgHelp = "TABLE is a table name declared in the pipeline given with --pipeline (it lives\n" +
	"under the pipeline's warehouse), or a location: a directory (./sales, /data/sales),\n" +
	"file:///data/sales or s3://bucket/prefix/sales. S3 settings come from --s3-* flags,\n" +
	"else the pipeline's storage section, else AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n" +
	"AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) and\n" +
	"S3_FORCE_PATH_STYLE. Credentials are never flags."

func tableCommand() *command {
	return &command{
		name:    "table",
		summary: "ask a Delta table about its history, rows, changes, properties and schema; alter, vacuum, restore",
		help:    "Inspect and maintain Delta tables.\n\n" + tableArgHelp,
		subs: []*command{
			historyCommand(),
			showCommand(),
			changesCommand(),
			diffCommand(),
			propertiesCommand(),
			schemaCommand(),
			alterCommand(),
			vacuumCommand(),
			restoreCommand(),
		},
	}
}

// tableFlags are the flags every table command has: where the table is and how to print.
type tableFlags struct {
	pipeline string
	format   string
	s3       storeurl.Options
}

func addTableFlags(fs *flag.FlagSet) *tableFlags {
	tf := &tableFlags{}
	fs.StringVar(&tf.pipeline, "pipeline", "", "resolve TABLE as a table declared in this pipeline `file`")
	fs.StringVar(&tf.format, "format", formatText, formatUsage)
	addS3Flags(fs, &tf.s3)
	return tf
}

// addS3Flags declares the S3 settings that may be flags (credentials may not: they would
// show in the process list and shell history).
func addS3Flags(fs *flag.FlagSet, o *storeurl.Options) {
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", "S3 endpoint `URL`, e.g. http://127.0.0.1:9000 for MinIO (default AWS)")
	fs.StringVar(&o.Region, "s3-region", "", "S3 `region`")
	fs.BoolVar(&o.PathStyle, "s3-path-style", false, "use path-style S3 requests (MinIO and most self-hosted stores)")
}

// stageOptions are the settings of the stages a process runs (run, serve, runs).
type stageOptions struct {
	memoryBudget jobs.ByteSize
	spillDir     string
}

func addStageFlags(fs *flag.FlagSet, o *stageOptions) {
	o.memoryBudget = jobs.DefaultMemoryBudget
	fs.Var(&o.memoryBudget, "memory-budget", "`size` of memory each upsert or snapshot ingest, scd1_merge and scd2_merge may\n"+
		"use unless its memory_budget says, e.g. 512MiB or 4GiB; a larger batch works in\n"+
		"passes over spill files")
	fs.StringVar(&o.spillDir, "spill-dir", "", "`dir`ectory of the spill files (default: the system's temporary directory)")
}

// openedTable is a table a command works on.
type openedTable struct {
	name  string // as the user gave it
	table *delta.Table
	// uri is the table's absolute location (file:///dir or s3://bucket/prefix/table),
	// which resolves file paths a foreign writer logged as absolute URIs.
	uri string
	// spec and decl are the pipeline and the declaration, when TABLE named a declared
	// table; nil for a location.
	spec *pipelines.Spec
	decl *jobs.Table
}

// target is where a TABLE argument points.
type target struct {
	loc      string // local directory or URL of the table root
	opts     storeurl.Options
	identity string // userName for commits; "" = the OS user
	spec     *pipelines.Spec
	decl     *jobs.Table
}

// open resolves TABLE and opens the Delta table there.
func (tf *tableFlags) open(ctx context.Context, e *env, args []string) (*openedTable, error) {
	if err := checkFormat(tf.format); err != nil {
		return nil, err
	}
	switch len(args) {
	case 0:
		return nil, usagef("missing TABLE")
	case 1:
	default:
		return nil, usagef("unexpected argument %q after TABLE", args[1])
	}
	name := args[0]
	tg, err := tf.resolve(e, name)
	if err != nil {
		return nil, err
	}
	store, root, err := e.stores.Table(ctx, tg.loc, tg.opts)
	if err != nil && tg.decl != nil {
		return nil, fmt.Errorf("table %s at %s: %w", name, tg.loc, err)
	} else if err != nil {
		return nil, fmt.Errorf("table %s: %w", name, err)
	}
	tbl, err := delta.Open(ctx, store, root, delta.Options{
		Now:        e.now,
		EngineInfo: "orchestrator/" + version,
		UserName:   tg.identity,
		Logger:     slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", name, err)
	}
	return &openedTable{name: name, table: tbl, uri: storeurl.URI(tg.loc), spec: tg.spec, decl: tg.decl}, nil
}

// resolve turns TABLE into a location (a directory or URL whose root is the table), the
// S3 options for it and the identity to record in commits.
func (tf *tableFlags) resolve(e *env, name string) (target, error) {
	if tf.pipeline == "" {
		if !isLocation(name) {
			if _, statErr := os.Stat(name); statErr != nil {
				return target{}, usagef("TABLE %q is neither a location nor a declared table: write ./%s for a directory, or pass --pipeline FILE to look the name up", name, name)
			}
		}
		return target{loc: name, opts: tf.s3}, nil
	}
	spec, err := pipelines.Load(tf.pipeline, pipelines.Options{LookupEnv: e.lookupEnv, TablesOnly: true})
	if err != nil {
		var perr *pipelines.Error
		if errors.As(err, &perr) {
			return target{}, fmt.Errorf("pipeline %s is invalid (run orchestrator validate):\n%w", tf.pipeline, err)
		}
		return target{}, err
	}
	tg := target{opts: tf.s3.Over(spec.Storage.StoreOptions()), identity: spec.Identity}
	decl, loc, err := spec.TableLocation(name)
	switch {
	case errors.Is(err, pipelines.ErrUndeclaredTable) && isLocation(name):
		tg.loc = name
		return tg, nil
	case errors.Is(err, pipelines.ErrUndeclaredTable):
		return target{}, usagef("%v", err)
	case err != nil:
		return target{}, err
	}
	tg.loc, tg.spec, tg.decl = loc, spec, decl
	return tg, nil
}

// isLocation reports whether TABLE is written as a location rather than a name.
func isLocation(s string) bool {
	return storeurl.IsURL(s) || strings.ContainsRune(s, '/') ||
		strings.ContainsRune(s, filepath.Separator) || s == "." || s == ".."
}

// writeRows renders a whole result set in the chosen format.
func writeRows(e *env, format string, cols []column, rows [][]cell) error {
	w := newRowWriter(e.stdout, format)
	if err := w.header(cols); err != nil {
		return err
	}
	for _, r := range rows {
		if err := w.row(r); err != nil {
			return err
		}
	}
	return w.flush()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
