package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

func scheduleCommand() *command {
	return &command{
		name:    "schedule",
		args:    "PIPELINE.yaml",
		summary: "print a pipeline's next slots, in its zone and in UTC",
		help: "Print the next --next slots of the pipeline's schedule after --from (RFC 3339;\n" +
			"default now), each in the pipeline's timezone and in UTC, with how daylight saving\n" +
			"time placed it: a fixed-time slot whose local time is skipped runs once at the\n" +
			"transition, one whose local time repeats runs once at the first; other\n" +
			"expressions run by elapsed time. Warnings (a step that does not divide its field,\n" +
			"like */7) go to stderr. An @every schedule counts from its anchor in the run store\n" +
			"(the first time a serve saw it), or from --from when it has none yet.",
		setup: func(fs *flag.FlagSet) runFunc {
			next := fs.Int("next", 10, "how many `n` slots")
			from := fs.String("from", "", "list the slots after this `time` (default now)")
			format := fs.String("format", formatText, formatUsage)
			var s3 storeurl.Options
			addS3Flags(fs, &s3)
			return func(ctx context.Context, e *env, args []string) error {
				if err := checkFormat(*format); err != nil {
					return err
				}
				if len(args) != 1 {
					return usagef("want one PIPELINE.yaml")
				}
				if *next < 1 {
					return usagef("--next must be 1 or more, got %d", *next)
				}
				after := e.now()
				if *from != "" {
					t, err := parseTimestamp(*from)
					if err != nil {
						return usagef("--from: %v", err)
					}
					after = t
				}
				spec, err := loadPipeline(e, args[0])
				if err != nil {
					return err
				}
				if spec.Cron == nil {
					return fmt.Errorf("pipeline %s has no schedule: it runs on demand only", spec.Name)
				}
				fmt.Fprintf(e.stderr, "%s: %q in %s\n", spec.Name, spec.Schedule, spec.Location)
				sched := spec.Cron
				if sched.Every() > 0 {
					// As serve anchors it: at the second the first scheduler loaded the
					// pipeline, kept in the run store.
					anchor, stored := e.now().UTC().Truncate(time.Second), false
					dir, local := storeurl.Local(spec.Warehouse)
					if _, err := os.Stat(dir); !local || err == nil { // a run store to read
						if st, err := newRunner(e, e.opener(s3), stageOptions{}, nil, nil).Store(ctx, spec); err == nil {
							if a, ok := st.StoredAnchor(ctx, spec.Name); ok {
								anchor, stored = a, true
							}
						}
					}
					sched = sched.Anchored(anchor)
					if stored {
						fmt.Fprintf(e.stderr, "every %s from %s, when a serve first loaded it (as every serve of the warehouse plans it)\n", sched.Every(), anchor.Format(time.RFC3339))
					} else {
						fmt.Fprintf(e.stderr, "every %s from %s: no serve has loaded it yet; the first one anchors it at the second it loads it, so these slots assume that is now\n", sched.Every(), anchor.Format(time.RFC3339))
					}
				}
				for _, w := range sched.Warnings() {
					fmt.Fprintf(e.stderr, "warning: %s\n", w)
				}
				cols := []column{{name: "local"}, {name: "utc"}, {name: "note"}}
				var rows [][]cell
				t := after
				for range *next {
					sl := sched.NextSlot(t)
					if sl.Time.IsZero() {
						break
					}
					rows = append(rows, []cell{rowtext.Text(sl.Time.In(spec.Location).Format(time.RFC3339)), rowtext.Text(sl.Time.UTC().Format(time.RFC3339)), rowtext.Text(sl.Note(sched))})
					t = sl.Time
				}
				return writeRows(e, *format, cols, rows)
			}
		},
	}
}
