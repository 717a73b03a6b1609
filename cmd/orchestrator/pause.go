package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
)

func runsPauseCommand(paused bool) *command {
	c := &command{
		name:    "resume",
		args:    "PIPELINE",
		summary: "resume a paused pipeline's schedule",
		help: "Resume the schedule of a paused pipeline (a name, or its file): its next slot\n" +
			"runs. The slots that came while it was paused stay recorded skipped; `runs\n" +
			"backfill` runs them if they are wanted.\n\n" + runsStoreHelp,
	}
	if paused {
		c.name, c.summary = "pause", "pause a pipeline's schedule: its slots are skipped until resumed"
		c.help = "Pause the schedule of a pipeline (a name, or its file): from the next tick of the\n" +
			"serve that schedules it, its slots are recorded skipped with the reason \"the\n" +
			"schedule is paused by WHO at WHEN\", until `runs resume`. Runs that people start\n" +
			"(trigger, retry, backfill, rollback) still run. The pause is kept in the run\n" +
			"store: every serve of the warehouse honours it, across restarts, and the pages\n" +
			"show it.\n\n" + runsStoreHelp
	}
	c.setup = func(fs *flag.FlagSet) runFunc {
		f := addRunsFlags(fs, false)
		reason := new(string)
		if paused {
			fs.StringVar(reason, "reason", "", "why, shown with the pause")
		}
		return func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usagef("want one PIPELINE (a name, or its file)")
			}
			var files []string
			name := args[0]
			if strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
				files = []string{name}
			}
			re, err := f.open(ctx, e, files...)
			if err != nil {
				return err
			}
			spec := re.specs[0]
			if files == nil {
				if spec = re.spec(name); spec == nil {
					return usagef("pipeline %q is not among the pipelines given", name)
				}
			}
			store, err := re.runner.Store(ctx, spec)
			if err != nil {
				return err
			}
			p, err := store.SetPaused(ctx, spec.Name, paused, e.who(), *reason, e.now())
			if err != nil {
				return err
			}
			if re.format == formatJSON {
				b, err := json.Marshal(p)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(e.stdout, "%s\n", b)
				return err
			}
			fmt.Fprintf(e.stdout, "pipeline %s: schedule %s\n", spec.Name, p.Text())
			return nil
		}
	}
	return c
}
