package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/orchestrator-io/orchestrator/delta"
)

func restoreCommand() *command {
	return &command{
		name:    "restore",
		args:    "TABLE --version N | --timestamp T",
		summary: "make a table's content that of an earlier version",
		help: "Restore a table to an earlier version (Spark's RESTORE TABLE): one new commit makes\n" +
			"its content, schema and properties those of --version N, or of the version that\n" +
			"was current at --timestamp (RFC 3339; a time without a zone, or a bare date, is\n" +
			"UTC). Nothing is lost: the versions in between stay in the history and time\n" +
			"travel, and the change feed shows the restore as deletes and inserts. It fails,\n" +
			"committing nothing, when VACUUM already deleted a file the version needs.\n\n" +
			"Prints the new version, the version restored and the files and bytes restored,\n" +
			"removed and live afterwards.\n\n" + tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			var version optionalInt
			fs.Var(&version, "version", "restore version `n`")
			timestamp := fs.String("timestamp", "", "restore the version current at `time`")
			return func(ctx context.Context, e *env, args []string) error {
				opts := delta.RestoreOptions{}
				switch {
				case version.set && *timestamp != "":
					return usagef("--version and --timestamp are exclusive")
				case version.set:
					if version.value < 0 {
						return usagef("--version must be 0 or more, got %d", version.value)
					}
					opts.Version = &version.value
				case *timestamp != "":
					ts, err := parseTimestamp(*timestamp)
					if err != nil {
						return usagef("--timestamp: %v", err)
					}
					opts.Timestamp = ts
				default:
					return usagef("missing --version or --timestamp: the version to restore")
				}
				t, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				target := version.value
				if !version.set { // Restore resolves the time itself and records it
					if target, err = t.table.VersionAsOf(ctx, opts.Timestamp); err != nil {
						return err
					}
				}
				v, m, err := t.table.Restore(ctx, opts)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "table %s: version %d restored as version %d\n", t.name, target, v)
				cols := []column{
					{name: "version", numeric: true}, {name: "restored_version", numeric: true},
					{name: "files_restored", numeric: true}, {name: "bytes_restored", numeric: true},
					{name: "files_removed", numeric: true}, {name: "bytes_removed", numeric: true},
					{name: "files_after", numeric: true}, {name: "bytes_after", numeric: true},
				}
				row := []cell{intCell(v), intCell(target),
					intCell(m.NumRestoredFiles), intCell(m.RestoredFilesSize),
					intCell(m.NumRemovedFiles), intCell(m.RemovedFilesSize),
					intCell(m.NumOfFilesAfterRestore), intCell(m.TableSizeAfterRestore)}
				return writeRows(e, tf.format, cols, [][]cell{row})
			}
		},
	}
}
