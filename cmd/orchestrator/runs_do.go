package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

const handOffHelp = "When a serve schedules the pipeline (it holds the lease of its warehouse), the run\n" +
	"goes to it, through the run store, and waits there under the pipeline's\n" +
	"max_active_runs; otherwise it runs in this process, with live progress on stderr.\n" +
	"--wait waits for a run handed to a serve and prints its summary."

// servedBy returns the lease of the serve that schedules spec, or nil.
func (re *runsEnv) servedBy(ctx context.Context, store *scheduler.Store, spec *pipelines.Spec) *scheduler.LeaseBody {
	lease, err := store.LiveLease(ctx)
	if err != nil || lease == nil || !lease.Schedules(spec.Name) {
		return nil
	}
	return lease
}

// handOff gives a queued record to the serve holding lease: created (new) or saved as
// its next attempt, with a run request. With wait it waits for the run to end and prints
// its summary.
func (re *runsEnv) handOff(ctx context.Context, store *scheduler.Store, rec *scheduler.Record, existing bool, lease *scheduler.LeaseBody, wait bool, created ...func() error) error {
	rec.Heartbeat = nil // no one runs it until the serve takes it
	var err error
	if existing {
		err = store.Save(ctx, rec)
	} else {
		err = store.Create(ctx, rec)
	}
	if err != nil {
		return scheduler.RetryConflict(ctx, store, rec, err)
	}
	for _, f := range created {
		if err := f(); err != nil {
			return err
		}
	}
	if err := store.Request(ctx, rec.ID, scheduler.RequestRun, re.e.who(), re.e.now()); err != nil {
		return err
	}
	fmt.Fprintf(re.e.stderr, "run %s queued for the serve on %s (pid %d)\n", rec.ID, lease.Holder.Host, lease.Holder.PID)
	if !wait {
		fmt.Fprintln(re.e.stdout, rec.ID)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for run %s (it goes on in the serve): %w", rec.ID, context.Cause(ctx))
		case <-time.After(500 * time.Millisecond):
		}
		r, err := store.Get(ctx, rec.ID)
		if err != nil {
			return err
		}
		if !r.Status.Active() {
			if len(r.Stages) == 0 {
				fmt.Fprintf(re.e.stderr, "run %s %s: %s%s\n", r.ID, r.Status, r.Reason, r.Error)
				return errReported
			}
			return endOfRun(re.e, re.format, r)
		}
	}
}

func runsTriggerCommand() *command {
	return &command{
		name:    "trigger",
		args:    "PIPELINE.yaml",
		summary: "run a pipeline now, in the serve that schedules it or here",
		help:    "Start a manual run of the pipeline, with --param values for its parameters.\n\n" + handOffHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			f := addRunsFlags(fs, true)
			params := paramFlag{}
			fs.Var(params, "param", "set a pipeline parameter: `name=value` (repeatable)")
			wait := fs.Bool("wait", false, "wait for a run handed to a serve to end")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("want one PIPELINE.yaml")
				}
				re, err := f.open(ctx, e, args[0])
				if err != nil {
					return err
				}
				spec := re.specs[0]
				if _, err := spec.ResolveParams(params); err != nil {
					return usagef("%v", err)
				}
				trig := scheduler.Trigger{Kind: scheduler.Manual, By: e.who(), Params: params}
				store, err := re.runner.Store(ctx, spec)
				if err != nil {
					return err
				}
				if lease := re.servedBy(ctx, store, spec); lease != nil {
					rec, err := re.runner.Prepare(spec, trig, "")
					if err != nil {
						return err
					}
					return re.handOff(ctx, store, rec, false, lease, *wait)
				}
				return runWithDisplay(e, re.stores, re.stage, spec, re.format, func(r *scheduler.Runner, h scheduler.Hooks) (*scheduler.Record, error) {
					return r.Run(ctx, spec, trig, h)
				})
			}
		},
	}
}

func runsCancelCommand() *command {
	return &command{
		name:    "cancel",
		args:    "RUN_ID",
		summary: "cancel a queued or running run",
		help: "Cancel a run: a queued one ends cancelled at once; a running one stops at its\n" +
			"stages' next safe point (every table stays at a committed version). A run of a\n" +
			"serve is cancelled through the run store; a run whose process is gone is marked\n" +
			"cancelled here.\n\n" + runsStoreHelp,
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
				rec, store, err := re.find(ctx, args[0])
				if err != nil {
					return err
				}
				if !rec.Status.Active() {
					return fmt.Errorf("run %s is %s already", rec.ID, rec.Status)
				}
				lease, _ := store.LiveLease(ctx)
				hb := rec.Heartbeat
				switch {
				case lease != nil && (hb == nil || hb.Instance == lease.Holder.Instance):
					if err := store.Request(ctx, rec.ID, scheduler.RequestCancel, e.who(), e.now()); err != nil {
						return err
					}
					fmt.Fprintf(e.stderr, "run %s: cancel requested from the serve on %s (pid %d)\n", rec.ID, lease.Holder.Host, lease.Holder.PID)
					return nil
				case hb != nil && e.now().Sub(hb.Time) < scheduler.DefaultHeartbeatTimeout:
					return fmt.Errorf("run %s runs in process %d on %s, which is not a serve: stop it there (Ctrl-C)", rec.ID, hb.PID, hb.Host)
				}
				rec.Status, rec.Reason, rec.End = scheduler.Cancelled, "cancelled by "+e.who()+" (no process was running it)", e.now().UTC()
				if err := store.Save(ctx, rec); err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "run %s cancelled\n", rec.ID)
				return nil
			}
		},
	}
}

// definitionOf reads the pipeline a record ran.
func (re *runsEnv) definitionOf(rec *scheduler.Record) (*pipelines.Spec, error) {
	return scheduler.SpecOf(rec, pipelines.Options{LookupEnv: re.e.lookupEnv})
}

func runsRetryCommand() *command {
	return &command{
		name:    "retry",
		args:    "RUN_ID",
		summary: "run a run's failed stages again, and their downstream",
		help: "Run again, as a new run of its own (trigger retry), the stages of an ended run that\n" +
			"did not succeed and every stage downstream of them; the stages that succeeded are\n" +
			"not repeated. It runs the definition the run ran, with its slot and parameters.\n" +
			"The two records link each other.\n\n" + handOffHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			f := addRunsFlags(fs, true)
			wait := fs.Bool("wait", false, "wait for a run handed to a serve to end")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("want one RUN_ID")
				}
				re, err := f.open(ctx, e)
				if err != nil {
					return err
				}
				old, store, err := re.find(ctx, args[0])
				if err != nil {
					return err
				}
				spec, err := re.definitionOf(old)
				if err != nil {
					return err
				}
				rec, err := re.runner.PrepareRetry(ctx, store, old, spec, e.who())
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "retry of run %s: run %s, stages %s\n", old.ID, rec.ID, strings.Join(rec.Trigger.Stages, ", "))
				if lease := re.servedBy(ctx, store, spec); lease != nil {
					return re.handOff(ctx, store, rec, false, lease, *wait, func() error {
						return store.Link(ctx, old.ID, scheduler.Retry, rec.ID, scheduler.Queued)
					})
				}
				return runWithDisplay(e, re.stores, re.stage, spec, re.format, func(r *scheduler.Runner, h scheduler.Hooks) (*scheduler.Record, error) {
					if err := r.Create(ctx, spec, store, rec); err != nil {
						return nil, scheduler.RetryConflict(ctx, store, rec, err)
					}
					if err := store.Link(ctx, old.ID, scheduler.Retry, rec.ID, scheduler.Queued); err != nil {
						fmt.Fprintf(e.stderr, "link run %s to its retry: %v\n", old.ID, err)
					}
					return r.Execute(ctx, rec.ID, h)
				})
			}
		},
	}
}

func runsBackfillCommand() *command {
	return &command{
		name:    "backfill",
		args:    "PIPELINE.yaml --from T1 --to T2",
		summary: "run a pipeline's past slots",
		help: "Run the pipeline's slots from --from to --to (RFC 3339; both included, none after\n" +
			"now), oldest first, each as its slot's run: ${run.slot} and ${run.slot_date} are\n" +
			"the slot's, so each reads its own files. A slot that succeeded already is skipped\n" +
			"unless --rerun (then it is the slot's next attempt); one that failed or was\n" +
			"skipped runs again. The slots are listed first; --dry-run stops there.\n\n" + handOffHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			f := addRunsFlags(fs, true)
			from := fs.String("from", "", "the first `time` of the range")
			to := fs.String("to", "", "the last `time` of the range")
			dry := fs.Bool("dry-run", false, "list the slots and what would be done, and stop")
			rerun := fs.Bool("rerun", false, "run slots that succeeded already again")
			params := paramFlag{}
			fs.Var(params, "param", "set a pipeline parameter: `name=value` (repeatable)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("want one PIPELINE.yaml")
				}
				if *from == "" || *to == "" {
					return usagef("missing --from or --to: the range of slots")
				}
				t1, err := parseTimestamp(*from)
				if err != nil {
					return usagef("--from: %v", err)
				}
				t2, err := parseTimestamp(*to)
				if err != nil {
					return usagef("--to: %v", err)
				}
				re, err := f.open(ctx, e, args[0])
				if err != nil {
					return err
				}
				spec := re.specs[0]
				if _, err := spec.ResolveParams(params); err != nil {
					return usagef("%v", err)
				}
				store, err := re.runner.Store(ctx, spec)
				if err != nil {
					return err
				}
				slots, err := scheduler.PlanBackfill(ctx, store, spec, t1, t2, e.now(), *rerun)
				if err != nil {
					return err
				}
				return re.backfill(ctx, store, spec, slots, params, *dry)
			}
		},
	}
}

func (re *runsEnv) backfill(ctx context.Context, store *scheduler.Store, spec *pipelines.Spec, slots []scheduler.BackfillSlot, params map[string]string, dry bool) error {
	e := re.e
	cols := []column{{name: "slot"}, {name: "local"}, {name: "run"}, {name: "action"}, {name: "existing"}, {name: "attempt", numeric: true}, {name: "result"}}
	rows := make([][]cell, len(slots))
	for i, b := range slots {
		rows[i] = []cell{timeText(b.Slot), rowtext.Text(b.Slot.In(spec.Location).Format(time.RFC3339)), rowtext.Text(b.ID), rowtext.Text(b.Action),
			optText(string(b.Existing)), intCell(int64(b.Attempt)), rowtext.Null}
	}
	if dry || len(slots) == 0 {
		if len(slots) == 0 {
			fmt.Fprintf(e.stderr, "no slot of %q in the range\n", spec.Schedule)
		}
		return writeRows(e, re.format, cols[:len(cols)-1], trim(rows, len(cols)-1))
	}
	lease := re.servedBy(ctx, store, spec)
	failed := 0
	for i, b := range slots {
		if b.Action == scheduler.BackfillSkip {
			rows[i][6] = rowtext.Text("skipped: " + string(b.Existing))
			continue
		}
		rec, existing, err := re.runner.PrepareBackfill(ctx, store, spec, b, e.who(), params)
		if err != nil {
			return err
		}
		if lease != nil {
			if err := re.handOff(ctx, store, rec, existing, lease, false); err != nil {
				return err
			}
			rows[i][6] = rowtext.Text("queued in the serve")
			continue
		}
		if existing {
			err = re.runner.Adopt(ctx, spec, store, rec)
		} else {
			err = re.runner.Create(ctx, spec, store, rec)
		}
		if err != nil {
			rows[i][6] = rowtext.Text(err.Error())
			failed++
			continue
		}
		fmt.Fprintf(e.stderr, "run %s (slot %s)\n", rec.ID, b.Slot.Format(time.RFC3339))
		out, err := re.runner.Execute(ctx, rec.ID, scheduler.Hooks{})
		if out != nil {
			rows[i][6] = rowtext.Text(string(out.Status))
			if out.Status != scheduler.Succeeded {
				failed++
			}
		}
		if errors.Is(err, context.Canceled) {
			break
		}
	}
	re.runner.Wait()
	if err := writeRows(e, re.format, cols, rows); err != nil {
		return err
	}
	if failed > 0 {
		fmt.Fprintf(e.stderr, "%d of %d slots did not succeed\n", failed, len(slots))
		return errReported
	}
	return nil
}

func trim(rows [][]cell, n int) [][]cell {
	out := make([][]cell, len(rows))
	for i, r := range rows {
		out[i] = r[:n]
	}
	return out
}

func runsRollbackCommand() *command {
	return &command{
		name:    "rollback",
		args:    "RUN_ID",
		summary: "undo a run's changes to its tables, keeping histories and readers true",
		help: "Undo a run, as a run of its own (trigger rollback) whose id every commit carries;\n" +
			"the two records link each other. Each table the run committed to is restored\n" +
			"(Delta RESTORE) to its version before the run; its RESTORE commit's change feed\n" +
			"holds only the net changes (the reversal of the run). An append-only history (a\n" +
			"capture_history target) is kept: its capture records the reversal at its next\n" +
			"run. A merge that reads a restored table's change feed (scd1/scd2 with\n" +
			"source_changes, in any pipeline given) goes back with it: its target and event\n" +
			"log are restored to before it read the run's versions, and its progress moves\n" +
			"past them, so it never sees the run nor its reversal. The files the run loaded\n" +
			"stay loaded (put a corrected file under a new name).\n\n" +
			"The plan is printed first: each table and reader and what happens to it. It\n" +
			"refuses when a later commit touched a table (the restore would undo it too) or\n" +
			"a reader cannot be kept exact, unless --force. --dry-run stops after the plan.\n" +
			"See docs/operations.md.\n\n" + runsStoreHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			f := addRunsFlags(fs, false)
			dry := fs.Bool("dry-run", false, "show what would be done, and stop")
			force := fs.Bool("force", false, "roll back even when the plan lists problems")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("want one RUN_ID")
				}
				re, err := f.open(ctx, e)
				if err != nil {
					return err
				}
				old, _, err := re.find(ctx, args[0])
				if err != nil {
					return err
				}
				spec, err := re.definitionOf(old)
				if err != nil {
					return err
				}
				plan, err := re.runner.PlanRollback(ctx, spec, old, re.specs)
				if err != nil {
					return err
				}
				if err := writeRollbackPlan(e, re.format, plan); err != nil {
					return err
				}
				if *dry {
					return nil
				}
				rec, err := re.runner.Rollback(ctx, spec, plan, *force, e.who(), nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "run %s rolled back by run %s\n", old.ID, rec.ID)
				return nil
			}
		},
	}
}

func writeRollbackPlan(e *env, format string, plan *scheduler.RollbackPlan) error {
	if format == formatJSON {
		b, err := json.Marshal(struct {
			*scheduler.RollbackPlan
			Run      string   `json:"run"`
			Problems []string `json:"problems"`
		}{plan, plan.Run.ID, plan.Problems()})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	cols := []column{{name: "table"}, {name: "action"}, {name: "undoes"}, {name: "restore_to", numeric: true}, {name: "latest", numeric: true}, {name: "why"}}
	var rows [][]cell
	for _, t := range plan.Tables {
		undoes, to := rowtext.Null, rowtext.Null
		if t.Action == scheduler.RollbackRestore {
			undoes, to = rowtext.Text(fmt.Sprintf("versions %d..%d", t.First, t.Latest)), intCell(t.RestoreTo)
		}
		why := t.Why
		if len(t.Progress) > 0 {
			var rs []string
			for _, p := range t.Progress {
				rs = append(rs, p.Reader)
			}
			why += "; progress of " + strings.Join(rs, ", ") + " set to the RESTORE of what it reads"
		}
		rows = append(rows, []cell{rowtext.Text(t.Table), rowtext.Text(t.Action), undoes, to, intCell(t.Latest), rowtext.Text(why)})
	}
	if err := writeRows(e, format, cols, rows); err != nil {
		return err
	}
	if len(plan.Readers) > 0 {
		fmt.Fprintln(e.stdout)
		rcols := []column{{name: "reader"}, {name: "reads"}, {name: "into"}, {name: "action"}, {name: "detail"}}
		var rrows [][]cell
		for _, rd := range plan.Readers {
			rrows = append(rrows, []cell{rowtext.Text(fmt.Sprintf("%s (%s, pipeline %s)", rd.Stage, rd.Kind, rd.Pipeline)), rowtext.Text(rd.Source), rowtext.Text(rd.Target), rowtext.Text(rd.Action), rowtext.Text(rd.Detail)})
		}
		if err := writeRows(e, format, rcols, rrows); err != nil {
			return err
		}
	}
	if problems := plan.Problems(); len(problems) > 0 {
		fmt.Fprintf(e.stderr, "the rollback would not be exact (--force goes on regardless):\n")
		for _, p := range problems {
			fmt.Fprintf(e.stderr, "  %s\n", p)
		}
	}
	return nil
}
