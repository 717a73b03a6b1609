package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// alterAttempts is how many times table alter plans again after losing its commit to a
// concurrent writer.
const alterAttempts = 3

func alterCommand() *command {
	return &command{
		name:    "alter",
		args:    "TABLE --drop-column C [--drop-column D ...] [--dry-run]",
		summary: "drop columns of a table (column mapping), in one metadata-only commit",
		help: "Drop top-level columns of a table, as Spark's ALTER TABLE DROP COLUMNS does: one\n" +
			"commit (DROP COLUMNS) that changes the schema only. No file is rewritten: the values\n" +
			"stay in the data files, unread, and older versions still show them (time travel,\n" +
			"the change feed up to the drop, table schema --version). A column added later under\n" +
			"the same name is a new, empty column.\n\n" +
			"Only a table with column mapping can drop a column (its files name columns by\n" +
			"physical name, so a later column of the name never reads the old values): turn it\n" +
			"on first by declaring the table property " + delta.PropColumnMappingMode + ": name (the next\n" +
			"run sets it) or with table properties TABLE --set " + delta.PropColumnMappingMode + "=name.\n" +
			"Refused, committing nothing: a partition column, the last data column, and, when\n" +
			"TABLE is a declared table (--pipeline), a column a stage needs (its keys,\n" +
			"sequence_by, the columns an scd2_merge maintains) or one the pipeline still\n" +
			"declares: the YAML is the truth, so drop the column from the YAML first (the run\n" +
			"then refuses the table until this command drops it), then here.\n\n" +
			"--dry-run checks all that and prints what would be done, committing nothing.\n" +
			"Prints the dropped columns; the new version is reported on stderr.\n\n" + tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			var drop listFlag
			fs.Var(&drop, "drop-column", "drop top-level column `name` (repeatable)")
			dryRun := fs.Bool("dry-run", false, "check and print what would be done; commit nothing")
			return func(ctx context.Context, e *env, args []string) error {
				if len(drop.values) == 0 {
					return usagef("nothing to alter: give --drop-column COLUMN")
				}
				seen := map[string]bool{}
				for _, c := range drop.values {
					if seen[strings.ToLower(c)] {
						return usagef("--drop-column %s is given twice", c)
					}
					seen[strings.ToLower(c)] = true
				}
				t, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				for attempt := 1; ; attempt++ {
					snap, err := t.table.Snapshot(ctx)
					if err != nil {
						return err
					}
					if _, err := delta.PlanDropColumns(snap, drop.values); err != nil {
						return fmt.Errorf("table %s: %w", t.name, err)
					}
					if err := checkDropDeclared(t, drop.values); err != nil {
						return err
					}
					dropped := droppedInfo(snap, drop.values)
					if *dryRun {
						fmt.Fprintf(e.stderr, "table %s: --dry-run: would drop %s in one metadata-only commit (DROP COLUMNS) after version %d; nothing committed\n",
							t.name, columnWord(dropped), snap.Version())
						return printDropped(e, tf.format, dropped)
					}
					v, err := t.table.DropColumns(ctx, snap, drop.values, nil)
					var ce *delta.ConflictError
					if errors.As(err, &ce) && attempt < alterAttempts {
						continue
					}
					if err != nil {
						return err
					}
					fmt.Fprintf(e.stderr, "table %s: %s dropped in version %d (no file rewritten)\n", t.name, columnWord(dropped), v)
					if t.decl == nil {
						fmt.Fprintf(e.stderr, "table %s: if a pipeline declares this table, drop the column from its YAML too, or its next run adds it back as a new, empty column\n", t.name)
					}
					return printDropped(e, tf.format, dropped)
				}
			}
		},
	}
}

// checkDropDeclared refuses, when TABLE is a declared table, a column that a stage of
// its pipeline needs or that the pipeline still declares.
func checkDropDeclared(t *openedTable, columns []string) error {
	if t.decl == nil {
		return nil
	}
	uses := t.spec.ColumnUses(t.decl.Name)
	for _, c := range columns {
		if u, ok := pipelines.FindColumnUse(uses, c); ok {
			return fmt.Errorf("table %s: column %s is used by stage %s (%s) of pipeline %s: it cannot be dropped while the stage needs it",
				t.name, u.Column, u.Stage, u.Role, t.spec.Name)
		}
	}
	for _, c := range columns {
		if f := t.decl.Schema.Field(c); f != nil {
			return fmt.Errorf("table %s: column %s is still declared in %s (under tables: %s: columns:): the declaration is the truth, "+
				"so remove the column from the YAML first (else the next run adds it back as a new, empty column), then run table alter again",
				t.name, f.Name, t.spec.File, t.decl.Name)
		}
	}
	return nil
}

// droppedInfo describes the columns to drop as the schema has them.
func droppedInfo(snap *delta.Snapshot, columns []string) []delta.ColumnInfo {
	var out []delta.ColumnInfo
	for _, c := range delta.DescribeSchema(snap.Schema(), snap.PartitionColumns()) {
		if c.Depth > 0 {
			continue
		}
		for _, d := range columns {
			if strings.EqualFold(c.Path, d) {
				out = append(out, c)
			}
		}
	}
	return out
}

func printDropped(e *env, format string, dropped []delta.ColumnInfo) error {
	cols := []column{{name: "dropped_column"}, {name: "type"}, {name: "physical_name"}, {name: "id", numeric: true}}
	rows := make([][]cell, len(dropped))
	for i, c := range dropped {
		rows[i] = []cell{rowtext.Text(c.Path), rowtext.Text(c.Type), optText(c.PhysicalName), intCell(c.ID)}
	}
	return writeRows(e, format, cols, rows)
}

// columnWord says "column a" or "columns a, b".
func columnWord(cols []delta.ColumnInfo) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Path
	}
	if len(names) == 1 {
		return "column " + names[0]
	}
	return "columns " + strings.Join(names, ", ")
}
