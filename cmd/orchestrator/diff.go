package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

func diffCommand() *command {
	return &command{
		name:    "diff",
		args:    "TABLE [--from V] [--to V]",
		summary: "compare two versions of a table by key: added, removed and changed rows",
		help: "Compare version --from (default: the one before --to) with version --to (default: the\n" +
			"latest) by key: a row whose key only --to has is added, one only --from has is\n" +
			"removed, and a key both have with other values is changed; the changed column lists\n" +
			"each changed column as old → new. The key is --key, else (with --pipeline) the\n" +
			"table's identity column or the keys of the stage that writes it, else the whole row.\n" +
			"Only the data files live in one version and not the other are read.\n\n" + tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			var from, to optionalInt
			fs.Var(&from, "from", "the older `version`")
			fs.Var(&to, "to", "the newer `version`")
			var keys listFlag
			keys.split = true
			fs.Var(&keys, "key", "the key `columns` (comma-separated, repeatable)")
			where := fs.String("where", "", "compare only the rows for which `expr` is true")
			return func(ctx context.Context, e *env, args []string) error {
				opts := delta.DiffOptions{Keys: keys.values}
				if *where != "" {
					pred, err := expr.Parse(*where)
					if err != nil {
						return usagef("--where: %v", err)
					}
					opts.Filter = pred
				}
				t, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				opts.TableURI = t.uri
				if len(opts.Keys) == 0 && t.spec != nil {
					opts.Keys = t.spec.TableKeys(t.decl.Name)
				}
				snap, err := t.table.Snapshot(ctx)
				if err != nil {
					return err
				}
				v2 := snap.Version()
				if to.set {
					v2 = to.value
				}
				v1 := max(v2-1, 0)
				if from.set {
					v1 = from.value
				}
				d, err := t.table.DiffVersions(ctx, v1, v2, opts)
				if err != nil {
					return err
				}
				defer d.Release()
				fmt.Fprintf(e.stderr, "table %s v%d → v%d by %s: %d added, %d removed, %d changed\n", t.name, v1, v2, keyText(d.Keys), d.Added, d.Removed, d.Changed)
				for _, r := range d.RenamedColumns {
					fmt.Fprintf(e.stderr, "column %s of v%d is %s in v%d (renamed): compared as one column\n", r[0], v1, r[1], v2)
				}
				return writeDiff(e, tf.format, d)
			}
		},
	}
}

func keyText(keys []string) string {
	if len(keys) == 0 {
		return "the whole row"
	}
	return strings.Join(keys, ", ")
}

// writeDiff prints one row per difference: its kind, its row (the newer one for a
// changed key), and the changed columns as old → new.
func writeDiff(e *env, format string, d *delta.Diff) error {
	var schema *arrow.Schema
	switch {
	case d.After != nil && d.After.NumCols() > 0:
		schema = d.After.Schema()
	case d.Before != nil:
		schema = d.Before.Schema()
	default:
		return writeRows(e, format, []column{{name: "change"}}, nil)
	}
	cols := []column{{name: "change"}}
	for _, f := range schema.Fields() {
		cols = append(cols, column{name: f.Name, numeric: numericType(f.Type)})
	}
	cols = append(cols, column{name: "changed"})
	field := func(rec arrow.RecordBatch, name string) int {
		for i, f := range rec.Schema().Fields() {
			if strings.EqualFold(f.Name, name) {
				return i
			}
		}
		return -1
	}
	var rows [][]cell
	for _, rd := range d.Rows {
		rec, at := d.After, rd.After
		if rd.Kind == delta.DiffRemoved {
			rec, at = d.Before, rd.Before
		}
		row := []cell{rowtext.Text(rd.Kind)}
		for _, f := range schema.Fields() {
			if i := field(rec, f.Name); i >= 0 {
				row = append(row, arrowCell(rec.Column(i), at))
			} else {
				row = append(row, rowtext.Null)
			}
		}
		var changed []string
		for _, c := range rd.Changed {
			old, nw := rowtext.Null, rowtext.Null
			if i := field(d.Before, c); i >= 0 {
				old = arrowCell(d.Before.Column(i), rd.Before)
			}
			if i := field(d.After, c); i >= 0 {
				nw = arrowCell(d.After.Column(i), rd.After)
			}
			changed = append(changed, fmt.Sprintf("%s: %s → %s", c, shown(old), shown(nw)))
		}
		rows = append(rows, append(row, optText(strings.Join(changed, "; "))))
	}
	return writeRows(e, format, cols, rows)
}

func shown(c cell) string {
	if c.Null {
		return "NULL"
	}
	return c.Text
}
