package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/jobs"
)

func vacuumCommand() *command {
	return &command{
		name:    "vacuum",
		args:    "TABLE",
		summary: "delete data files the table no longer needs",
		help: "Delete the data files that no version inside the retention window needs: files\n" +
			"neither live nor removed more recently than --retain, and older than it. The\n" +
			"default retention is the table's " + delta.PropDeletedFileRetentionDur + " (7 days when\n" +
			"unset); a shorter one is refused unless --force, since time travel and change\n" +
			"feed reads of older versions fail once their files are gone. The deleted (with\n" +
			"--dry-run: the deletable) files are printed, relative to the table root, with a\n" +
			"summary on stderr. A real run records VACUUM START and VACUUM END in the history.\n\n" +
			"With --pipeline, the files of versions that a stage reading the table's change\n" +
			"feed (capture_history, or scd1_merge / scd2_merge with source_changes) has yet\n" +
			"to read are kept, as the pipeline's vacuum stage does; --force ignores them.\n\n" +
			tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			var retain durationFlag
			fs.Var(&retain, "retain", "keep files needed by the versions of this `duration`: 168h, 7d, 36h30m\n(default: the table's "+delta.PropDeletedFileRetentionDur+")")
			dryRun := fs.Bool("dry-run", false, "list the files that would be deleted; delete nothing")
			force := fs.Bool("force", false, "allow a retention shorter than the table's "+delta.PropDeletedFileRetentionDur+",\nand delete files that a pipeline stage has yet to read from the change feed")
			return func(ctx context.Context, e *env, args []string) error {
				t, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				opts := delta.VacuumOptions{DryRun: *dryRun, Force: *force, TableURI: t.uri}
				keep, who, err := keepForConsumers(ctx, t, *force)
				if err != nil {
					return err
				}
				if keep >= 0 {
					opts.KeepVersionsFrom, opts.KeepFor = &keep, who
				}
				if retain.set {
					opts.Retain = &retain.d
				}
				res, err := t.table.Vacuum(ctx, opts)
				if errors.Is(err, delta.ErrRetentionTooShort) {
					if snap, serr := t.table.Snapshot(ctx); serr == nil {
						return fmt.Errorf("table %s: --retain %s is shorter than the table's %s (%s): time travel and change feed reads of versions in between would fail; pass --force to vacuum anyway",
							t.name, formatDuration(retain.d), delta.PropDeletedFileRetentionDur, formatDuration(snap.DeletedFileRetention()))
					}
				}
				if err != nil {
					return err
				}
				rows := make([][]cell, len(res.FilesDeleted))
				for i, f := range res.FilesDeleted {
					rows[i] = []cell{rowtext.Text(f)}
				}
				if err := writeRows(e, tf.format, []column{{name: "file"}}, rows); err != nil {
					return err
				}
				verb := "deleted"
				if res.DryRun {
					verb = "dry run: would delete"
				}
				fmt.Fprintf(e.stderr, "table %s: %s %s (%s); retention %s, cutoff %s",
					t.name, verb, plural(len(res.FilesDeleted), "file"), plural(int(res.BytesDeleted), "byte"),
					formatDuration(res.Retention), formatTime(res.Cutoff))
				if res.FilesKept > 0 {
					fmt.Fprintf(e.stderr, "; kept %s that %s still needs from version %d", plural(res.FilesKept, "file"), who, keep)
				}
				if res.EndVersion >= 0 {
					fmt.Fprintf(e.stderr, "; versions %d-%d", res.StartVersion, res.EndVersion)
				}
				fmt.Fprintln(e.stderr)
				return nil
			}
		},
	}
}

// keepForConsumers returns the oldest version of a declared table that a change feed
// consumer of its pipeline still has to read (-1: none, or not a declared table, or
// force), and who that is.
func keepForConsumers(ctx context.Context, t *openedTable, force bool) (int64, string, error) {
	if t.spec == nil || force {
		return -1, "", nil
	}
	env := &jobs.Env{Warehouse: t.table.Store(), Tables: map[string]*jobs.Table{}}
	for _, d := range t.spec.Tables {
		env.Tables[d.Name] = d
	}
	return jobs.KeepFrom(ctx, env, t.spec.Consumers(), t.table, t.decl)
}

// formatDuration shows whole days as "7d", other durations as Go does ("36h30m0s").
func formatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d != 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}

// durationFlag is a Go duration that also takes whole days ("7d").
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want a duration such as 168h or 7d")
		}
		f.d, f.set = time.Duration(n)*24*time.Hour, true
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration such as 168h or 7d")
	}
	f.d, f.set = d, true
	return nil
}
