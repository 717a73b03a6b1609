package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

const runsStoreHelp = "Runs are recorded in the run store of each pipeline's warehouse, under\n" +
	"_orchestrator/; the commands find it from --pipelines DIR (the directory serve\n" +
	"takes) or --pipeline FILE, and work with or without a serve running. Output is\n" +
	"text, or --format json (JSON Lines; runs show prints the whole record)."

func runsCommand() *command {
	return &command{
		name:    "runs",
		summary: "list, show, trigger, cancel, retry, backfill and roll back runs; pause and resume schedules",
		help:    "Every run is recorded: its trigger, definition, status and per stage its attempts,\nrows, table versions and log.\n\n" + runsStoreHelp,
		subs: []*command{
			runsListCommand(),
			runsShowCommand(),
			runsTriggerCommand(),
			runsCancelCommand(),
			runsRetryCommand(),
			runsBackfillCommand(),
			runsRollbackCommand(),
			runsPauseCommand(true),
			runsPauseCommand(false),
		},
	}
}

// runsFlags are the flags every runs command has: where the pipelines are, the output.
type runsFlags struct {
	dir, file, format string
	s3                storeurl.Options
	stage             stageOptions
}

// addRunsFlags declares the flags of a runs command; runsStages adds those of the
// commands that run stages here (trigger, retry, backfill): help lists only flags that
// act.
func addRunsFlags(fs *flag.FlagSet, runsStages bool) *runsFlags {
	f := &runsFlags{}
	fs.StringVar(&f.dir, "pipelines", "", "the `dir`ectory of pipeline files (as serve takes it)")
	fs.StringVar(&f.file, "pipeline", "", "a pipeline `file`")
	fs.StringVar(&f.format, "format", formatText, "output format, `text|json`")
	addS3Flags(fs, &f.s3)
	if runsStages {
		addStageFlags(fs, &f.stage)
	}
	return f
}

// runsEnv is what a runs command works with: the pipelines it knows and their stores.
type runsEnv struct {
	e      *env
	specs  []*pipelines.Spec
	stores scheduler.URLOpener
	stage  stageOptions
	runner *scheduler.Runner
	format string
}

// open loads the pipelines; extra are pipeline files given as arguments. A file that
// is invalid (an edit in progress, while serve goes on with its previous version) is
// taken as its last valid definition, which its newest run recorded, saying so.
func (f *runsFlags) open(ctx context.Context, e *env, extra ...string) (*runsEnv, error) {
	if f.format != formatText && f.format != formatJSON {
		return nil, usagef("unknown format %q: want text or json", f.format)
	}
	re := &runsEnv{e: e, stores: e.opener(f.s3), stage: f.stage, format: f.format}
	re.runner = newRunner(e, re.stores, re.stage, slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	files := extra
	if f.file != "" {
		files = append(files, f.file)
	}
	var invalid []string
	for _, file := range files {
		spec, err := pipelines.Load(file, pipelines.Options{LookupEnv: e.lookupEnv})
		if err != nil {
			var perr *pipelines.Error
			if !errors.As(err, &perr) {
				return nil, err
			}
			if spec, err = re.lastValid(ctx, file); err != nil {
				fmt.Fprintln(e.stderr, problemText(perr))
				return nil, fmt.Errorf("%s is invalid, and %v", file, err)
			}
		}
		re.specs = append(re.specs, spec)
	}
	if f.dir != "" {
		dir, err := newPipelineDir(f.dir)
		if err != nil {
			return nil, err
		}
		_, report := dir.scan(e)
		for _, n := range report {
			if n.warn {
				invalid = append(invalid, n.file)
			}
		}
		specs, _ := dir.specs()
		re.specs = append(re.specs, specs...)
		for _, file := range invalid {
			spec, err := re.lastValid(ctx, file)
			if err != nil {
				fmt.Fprintf(e.stderr, "%s: invalid, skipped (%v)\n", file, err)
				continue
			}
			if re.spec(spec.Name) == nil {
				re.specs = append(re.specs, spec)
			}
		}
	}
	if len(re.specs) == 0 {
		if f.dir == "" && len(files) == 0 {
			return nil, usagef("missing --pipelines DIR or --pipeline FILE: they say where the run store is")
		}
		return nil, fmt.Errorf("no valid pipeline in %s", f.dir)
	}
	return re, nil
}

// lastValid is the last valid definition of the pipeline of an invalid file: the one
// its newest run recorded (found through the file's name and warehouse, which are read
// even when the rest is invalid). It says so on stderr.
func (re *runsEnv) lastValid(ctx context.Context, file string) (*pipelines.Spec, error) {
	opts := pipelines.Options{LookupEnv: re.e.lookupEnv}
	head, err := pipelines.ReadHeader(file, opts)
	if err != nil {
		return nil, fmt.Errorf("its run store cannot be found: %v", err)
	}
	store, err := re.runner.Store(ctx, head)
	if err != nil {
		return nil, err
	}
	entries, err := store.List(ctx, head.Name, 20, nil)
	if err != nil {
		return nil, err
	}
	for _, en := range entries {
		rec, err := store.Get(ctx, en.ID)
		if err != nil || rec.Definition == "" {
			continue
		}
		spec, err := scheduler.SpecOf(rec, opts)
		if err != nil {
			continue
		}
		fmt.Fprintf(re.e.stderr, "%s is invalid: pipeline %s is taken as its last valid definition, as run %s ran it\n", file, head.Name, rec.ID)
		return spec, nil
	}
	return nil, fmt.Errorf("pipeline %s has no run that recorded a valid definition", head.Name)
}

// spec returns the loaded pipeline called name, or nil.
func (re *runsEnv) spec(name string) *pipelines.Spec {
	for _, s := range re.specs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// allStores returns the run store of each distinct warehouse of the loaded pipelines.
func (re *runsEnv) allStores(ctx context.Context) ([]*scheduler.Store, error) {
	var out []*scheduler.Store
	seen := map[*scheduler.Store]bool{}
	for _, s := range re.specs {
		st, err := re.runner.Store(ctx, s)
		if err != nil {
			return nil, err
		}
		if !seen[st] {
			seen[st] = true
			out = append(out, st)
		}
	}
	return out, nil
}

// find reads a run's record: from the store of its pipeline if that is loaded, else
// from every store the loaded pipelines use.
func (re *runsEnv) find(ctx context.Context, id string) (*scheduler.Record, *scheduler.Store, error) {
	name, _, err := scheduler.ParseID(id)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	var stores []*scheduler.Store
	if spec := re.spec(name); spec != nil {
		st, err := re.runner.Store(ctx, spec)
		if err != nil {
			return nil, nil, err
		}
		stores = []*scheduler.Store{st}
	} else if stores, err = re.allStores(ctx); err != nil {
		return nil, nil, err
	}
	for _, st := range stores {
		rec, err := st.Get(ctx, id)
		if err == nil {
			return rec, st, nil
		}
		if !errors.Is(err, objectstore.ErrNotExist) {
			return nil, nil, err
		}
	}
	return nil, nil, fmt.Errorf("run %s: not in the run store of pipeline %s's warehouse", id, name)
}

func runsListCommand() *command {
	return &command{
		name:    "list",
		summary: "list runs, newest first",
		help: "List runs newest first: of one pipeline (--name), or of every pipeline with runs in\n" +
			"the run stores found. Skipped slots are runs too, with their reason.\n\n" + runsStoreHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			f := addRunsFlags(fs, false)
			name := fs.String("name", "", "only the runs of this `pipeline`")
			status := fs.String("status", "", "only runs in this `status` (queued, running, succeeded, failed, cancelled, skipped, interrupted)")
			limit := fs.Int("limit", 50, "at most `n` runs")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("unexpected argument %q", args[0])
				}
				if *limit <= 0 {
					return usagef("--limit must be 1 or more, got %d", *limit)
				}
				switch scheduler.Status(*status) {
				case "", scheduler.Queued, scheduler.Running, scheduler.Succeeded, scheduler.Failed, scheduler.Cancelled, scheduler.Skipped, scheduler.Interrupted:
				default:
					return usagef("unknown --status %q: want queued, running, succeeded, failed, cancelled, skipped or interrupted", *status)
				}
				re, err := f.open(ctx, e)
				if err != nil {
					return err
				}
				entries, err := re.list(ctx, *name, scheduler.Status(*status), *limit)
				if err != nil {
					return err
				}
				return writeEntries(e, re.format, entries)
			}
		},
	}
}

// list returns the newest runs of one pipeline, or of every pipeline in the stores.
func (re *runsEnv) list(ctx context.Context, name string, status scheduler.Status, limit int) ([]scheduler.Entry, error) {
	var filter scheduler.Filter
	if status != "" { // interrupted: also the runs an interruption cut before their last attempt
		filter = func(en scheduler.Entry) bool {
			return en.Status == status || status == scheduler.Interrupted && en.WasInterrupted
		}
	}
	type source struct {
		store    *scheduler.Store
		pipeline string
	}
	var sources []source
	if name != "" {
		spec := re.spec(name)
		if spec == nil {
			return nil, usagef("pipeline %q is not among the pipelines given", name)
		}
		st, err := re.runner.Store(ctx, spec)
		if err != nil {
			return nil, err
		}
		sources = append(sources, source{st, name})
	} else {
		stores, err := re.allStores(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range stores {
			names, err := st.Pipelines(ctx)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				sources = append(sources, source{st, n})
			}
		}
	}
	var all []scheduler.Entry
	for _, src := range sources {
		es, err := src.store.List(ctx, src.pipeline, limit, filter)
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	scheduler.SortEntries(all)
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

var entryColumns = []column{
	{name: "run"}, {name: "pipeline"}, {name: "trigger"}, {name: "status"}, {name: "slot"},
	{name: "start"}, {name: "duration", numeric: true}, {name: "attempt", numeric: true}, {name: "reason"},
}

// statusCell is a run's status as a person reads it: "failed → retried: succeeded",
// "succeeded → rolled back" (JSON has the status; the outcome is its own field).
func statusCell(en scheduler.Entry) cell {
	text := string(en.Status)
	switch {
	case en.RolledBackBy != "":
		text += " → rolled back"
	case en.Outcome() != string(en.Status):
		text += " → " + en.Outcome()
	}
	return cell{Text: text, JSON: string(en.Status)}
}

func timeText(t time.Time) cell {
	if t.IsZero() {
		return rowtext.Null
	}
	return rowtext.Text(t.UTC().Format(time.RFC3339))
}

func writeEntries(e *env, format string, entries []scheduler.Entry) error {
	rows := make([][]cell, 0, len(entries))
	cols := entryColumns
	if format == formatJSON {
		cols = append(slices.Clone(cols), column{name: "outcome"})
	}
	for _, en := range entries {
		dur := rowtext.Null
		if !en.Start.IsZero() && !en.End.IsZero() {
			dur = durationCell(en.End.Sub(en.Start))
		}
		reason := optText(en.Reason)
		if en.Error != "" {
			reason = rowtext.Text(en.Error)
		}
		row := []cell{rowtext.Text(en.ID), rowtext.Text(en.Pipeline), rowtext.Text(string(en.Trigger)), statusCell(en),
			timeText(en.Slot), timeText(en.Start), dur, intCell(int64(en.Attempt)), reason}
		if format == formatJSON {
			row = append(row, rowtext.Text(en.Outcome()))
		}
		rows = append(rows, row)
	}
	return writeRows(e, format, cols, rows)
}

func runsShowCommand() *command {
	return &command{
		name:    "show",
		args:    "RUN_ID",
		summary: "show a run's record: trigger, status, stages, log",
		help: "Show everything recorded of a run: its trigger, slot and parameters, its status and\n" +
			"why, the definition it ran (hash), and per stage its status, attempts, rows, table\n" +
			"versions read and written, change feed ranges, notes and last log lines. With\n" +
			"--format json, the record itself.\n\n" + runsStoreHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			f := addRunsFlags(fs, false)
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("want one RUN_ID")
				}
				re, err := f.open(ctx, e)
				if err != nil {
					return err
				}
				rec, _, err := re.find(ctx, args[0])
				if err != nil {
					return err
				}
				if re.format == formatJSON {
					b, err := json.Marshal(rec)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(e.stdout, "%s\n", b)
					return err
				}
				return showRecord(e, rec)
			}
		},
	}
}

// showRecord prints a record for a person.
func showRecord(e *env, rec *scheduler.Record) error {
	w := e.stdout
	line := func(k, format string, args ...any) { fmt.Fprintf(w, "%-12s %s\n", k, fmt.Sprintf(format, args...)) }
	line("run", "%s", rec.ID)
	line("pipeline", "%s (%s, definition sha256 %.12s)", rec.Pipeline, rec.File, rec.DefinitionHash)
	line("trigger", "%s", triggerText(rec.Trigger))
	if rec.Attempt > 1 {
		line("attempt", "%d", rec.Attempt)
	}
	if len(rec.Params) > 0 {
		var ps []string
		for _, k := range sortedKeys(rec.Params) {
			ps = append(ps, k+"="+rec.Params[k])
		}
		line("params", "%s", strings.Join(ps, " "))
	}
	line("status", "%s", statusCell(rec.Entry()).Text)
	if rec.Reason != "" {
		line("reason", "%s", rec.Reason)
	}
	if rec.Error != "" {
		line("error", "%s", rec.Error)
	}
	if !rec.SkippedThrough.IsZero() {
		line("skipped", "%d slots through %s", rec.SkippedCount, rec.SkippedThrough.Format(time.RFC3339))
	}
	line("created", "%s", rec.Created.Format(time.RFC3339))
	if !rec.Start.IsZero() {
		line("start", "%s", rec.Start.Format(time.RFC3339))
	}
	if !rec.End.IsZero() {
		line("end", "%s", rec.End.Format(time.RFC3339))
	}
	if hb := rec.Heartbeat; hb != nil {
		line("heartbeat", "%s by %s pid %d", hb.Time.Format(time.RFC3339), hb.Host, hb.PID)
	}
	for i, id := range rec.RetriedBy {
		if i == len(rec.RetriedBy)-1 && rec.RetryStatus != "" {
			line("retried by", "%s (%s)", id, rec.RetryStatus)
		} else {
			line("retried by", "%s", id)
		}
	}
	if rec.RolledBackBy != "" {
		line("rolled back", "by run %s", rec.RolledBackBy)
	}
	for _, d := range rec.Notifications {
		line("notified", "%s", deliveryText(d))
	}
	for _, a := range rec.Attempts {
		text := fmt.Sprintf("%d (%s) %s", a.N, a.Trigger, a.Status)
		if !a.Start.IsZero() {
			text += " from " + a.Start.Format(time.RFC3339)
		}
		if !a.End.IsZero() {
			text += " to " + a.End.Format(time.RFC3339)
		}
		if why := a.Error + a.Reason; why != "" {
			text += ": " + why
		}
		line("attempt", "%s", text)
	}
	for _, n := range rec.Notes {
		line("note", "%s", n)
	}
	if len(rec.Stages) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	if err := writeRunSummary(e, formatText, rec); err != nil {
		return err
	}
	for _, s := range rec.Stages {
		writeStageDetail(w, &s)
	}
	return nil
}

// triggerText is what started a run, for a person: its kind, slot, who, which run it
// retries and which stages it runs.
func triggerText(t scheduler.Trigger) string {
	text := string(t.Kind)
	if !t.Slot.IsZero() {
		text += " slot " + t.Slot.Format(time.RFC3339)
	}
	if t.By != "" {
		text += " by " + t.By
	}
	if t.Of != "" {
		text += " of run " + t.Of
	}
	if len(t.Stages) > 0 {
		text += " (stages " + strings.Join(t.Stages, ", ") + ")"
	}
	return text
}

// deliveryText is a notification's delivery, for a person.
func deliveryText(d scheduler.Delivery) string {
	text := fmt.Sprintf("%s %s: %d attempt(s)", d.Event, d.URL, d.Attempts)
	if d.Status != 0 {
		text += fmt.Sprintf(", HTTP %d", d.Status)
	}
	if d.Error != "" {
		text += ", " + d.Error
	}
	return text
}

// writeStageDetail writes what a stage read, its notes, its error and its log lines,
// under its name (nothing when it has none).
func writeStageDetail(w io.Writer, s *scheduler.StageRecord) {
	var detail []string
	for _, v := range s.VersionsRead {
		detail = append(detail, fmt.Sprintf("read %s@v%d", v.Table, v.Version))
	}
	for _, c := range s.ChangesRead {
		detail = append(detail, fmt.Sprintf("read the change feed of %s, versions (%d, %d]", c.Table, c.After, c.Through))
	}
	detail = append(detail, s.Notes...)
	for _, c := range s.Checks {
		detail = append(detail, c.Text())
	}
	if s.Error != "" && s.Status != scheduler.Succeeded {
		detail = append(detail, "error: "+s.Error)
	}
	if s.Reason != "" {
		detail = append(detail, string(s.Status)+": "+s.Reason)
	}
	if p := s.Progress; p != nil && s.Status.Active() {
		detail = append(detail, fmt.Sprintf("progress: %s (reported %s)", p.Text(), p.Updated.Format(time.RFC3339)))
	}
	if s.LogDropped > 0 {
		detail = append(detail, fmt.Sprintf("log: the last %d lines; all in %s", len(s.Log), s.LogObject))
	}
	if len(detail) == 0 && len(s.Log) == 0 {
		return
	}
	fmt.Fprintf(w, "\nstage %s:\n", s.Name)
	for _, d := range detail {
		fmt.Fprintf(w, "  %s\n", d)
	}
	for _, l := range s.Log {
		fmt.Fprintf(w, "  | %s\n", l)
	}
}
