package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/orchestrator-io/orchestrator/pipelines"
)

func validateCommand() *command {
	return &command{
		name:    "validate",
		args:    "PIPELINE.yaml...",
		summary: "check pipeline files and report every problem",
		help: "Check each pipeline file: YAML syntax, unknown keys, types, stage kinds, tables,\n" +
			"dependencies and cycles, cron schedules and time zones. A valid file prints\n" +
			"\"ok: FILE (pipeline NAME, N tables, M stages)\" on stdout; an invalid one prints\n" +
			"every problem, one per line as FILE:LINE:COL: MESSAGE, on stderr.\n" +
			"\n" +
			"${VAR} references are expanded from the environment, as when the pipeline runs.\n" +
			"The exit code is 1 when any file is invalid.",
		setup: func(fs *flag.FlagSet) runFunc {
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("missing PIPELINE.yaml")
				}
				return validate(e, args)
			}
		},
	}
}

func validate(e *env, files []string) error {
	failed := 0
	for _, file := range files {
		spec, err := pipelines.Load(file, pipelines.Options{LookupEnv: e.lookupEnv})
		var perr *pipelines.Error
		switch {
		case err == nil:
			fmt.Fprintf(e.stdout, "ok: %s (pipeline %s, %s, %s)\n", file, spec.Name,
				plural(len(spec.Tables), "table"), plural(len(spec.Stages), "stage"))
			continue
		case errors.As(err, &perr):
			for _, p := range perr.Problems {
				fmt.Fprintln(e.stderr, p.String())
			}
		default:
			fmt.Fprintln(e.stderr, err)
		}
		failed++
	}
	if failed > 0 {
		if len(files) > 1 {
			fmt.Fprintf(e.stderr, "%d of %d pipeline files are invalid\n", failed, len(files))
		}
		return errReported
	}
	return nil
}

// plural renders "1 table", "3 tables".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
