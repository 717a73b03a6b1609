package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
)

func changesCommand() *command {
	return &command{
		name:    "changes",
		args:    "TABLE --from V|T",
		summary: "print a table's change data feed between two versions or times",
		help: "Print the change data feed of a table (Spark's table_changes): the rows inserted,\n" +
			"deleted and updated (update_preimage and update_postimage) by each version from\n" +
			"--from to --to (both inclusive; --to defaults to the latest version), with\n" +
			"_change_type, _commit_version and _commit_timestamp after the data columns.\n\n" +
			"--from and --to are a version number or a time (RFC 3339, e.g.\n" +
			"2026-01-14T10:00:00Z; a time without a zone, or a bare date, is UTC). A start time\n" +
			"selects the first version committed at or after it, an end time the last version\n" +
			"committed at or before it. The table must have " + delta.PropEnableChangeDataFeed + " = true\n" +
			"over the whole range.\n\n" + tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			from := fs.String("from", "", "first `version|time` of the range (required)")
			to := fs.String("to", "", "last `version|time` of the range (default: the latest version)")
			var types, columns listFlag
			types.split, columns.split = true, true
			fs.Var(&types, "types", "keep only these change `types`: insert, delete, update_preimage,\nupdate_postimage (comma-separated, repeatable)")
			fs.Var(&columns, "columns", "print only these data `columns`, in this order (the change columns follow)")
			limit := fs.Int64("limit", 0, "print at most `n` rows (0: all)")
			return func(ctx context.Context, e *env, args []string) error {
				if *from == "" {
					return usagef("missing --from: the first version or time of the range")
				}
				if *limit < 0 {
					return usagef("--limit must be 0 or more, got %d", *limit)
				}
				opts := delta.ChangesOptions{Types: types.values, Columns: columns.values}
				v, t, err := parseVersionOrTime(*from)
				if err != nil {
					return usagef("--from: %v", err)
				}
				opts.StartVersion, opts.StartTime = v, t
				if *to != "" {
					v, t, err := parseVersionOrTime(*to)
					if err != nil {
						return usagef("--to: %v", err)
					}
					opts.EndVersion, opts.EndTime = v, t
				}
				for _, ct := range types.values {
					switch ct {
					case delta.ChangeInsert, delta.ChangeDelete, delta.ChangeUpdatePreimage, delta.ChangeUpdatePostimage:
					default:
						return usagef("--types: unknown change type %q: want insert, delete, update_preimage or update_postimage", ct)
					}
				}
				tbl, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				opts.TableURI = tbl.uri
				rdr, err := tbl.table.Changes(ctx, opts)
				if err != nil {
					return err
				}
				defer rdr.Release()
				if err := writeRecords(e, tf.format, rdr, *limit); err != nil {
					return fmt.Errorf("table %s: %w", tbl.name, err)
				}
				return nil
			}
		},
	}
}

// parseVersionOrTime reads --from and --to: a version number, or a time as --timestamp
// takes it.
func parseVersionOrTime(s string) (*int64, time.Time, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		if v < 0 {
			return nil, time.Time{}, fmt.Errorf("version %d: must be 0 or more", v)
		}
		return &v, time.Time{}, nil
	}
	t, err := parseTimestamp(s)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%q is neither a version number nor a time: want 3, 2026-01-14T10:00:00Z, 2026-01-14T10:00:00 (UTC) or 2026-01-14", s)
	}
	return nil, t, nil
}
