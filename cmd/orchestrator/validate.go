package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
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
			"\n" +
			"With --check-tables, each declared table that exists in the warehouse is also\n" +
			"compared with its declaration: columns (name, type, nullability, identity),\n" +
			"partition columns and declared properties. Each difference is printed on stderr\n" +
			"with the command or declaration that converges them; a run refuses such tables.\n" +
			"The exit code is 1 when any file is invalid or any table differs.",
		setup: func(fs *flag.FlagSet) runFunc {
			checkTables := fs.Bool("check-tables", false, "also compare the tables that exist with their declarations")
			var s3 storeurl.Options
			addS3Flags(fs, &s3)
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("missing PIPELINE.yaml")
				}
				if *checkTables {
					return validateTables(ctx, e, args, s3)
				}
				return validate(e, args)
			}
		},
	}
}

func validate(e *env, files []string) error {
	return validateEach(e, files, func(spec *pipelines.Spec) (string, bool) { return "", true })
}

// validateEach loads each file and runs check on the valid ones; check returns a note
// for the ok line, and false when it reported a problem itself.
func validateEach(e *env, files []string, check func(spec *pipelines.Spec) (string, bool)) error {
	failed := 0
	for _, file := range files {
		spec, err := pipelines.Load(file, pipelines.Options{LookupEnv: e.lookupEnv})
		var perr *pipelines.Error
		switch {
		case err == nil:
			for _, w := range spec.Warnings {
				fmt.Fprintln(e.stderr, w.String())
			}
			note, ok := check(spec)
			if ok {
				fmt.Fprintf(e.stdout, "ok: %s (pipeline %s, %s, %s%s)\n", file, spec.Name,
					plural(len(spec.Tables), "table"), plural(len(spec.Stages), "stage"), note)
				continue
			}
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
