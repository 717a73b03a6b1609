package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

func schemaCommand() *command {
	return &command{
		name:    "schema",
		args:    "TABLE [--version N | --timestamp T | --history]",
		summary: "print a table's schema at any version, or the history of its schema changes",
		help: "Print a table's schema: its latest version's, that of --version N, or of the version\n" +
			"current at --timestamp (RFC 3339; a time without a zone, or a bare date, is UTC).\n" +
			"One row per column, nested fields after their parent (address.city): type,\n" +
			"nullability, comment, identity, partition column, the widenings the column went\n" +
			"through (type_changes) and, for a table with column mapping, each column's\n" +
			"physical name (its name in the data files) and id. The text form leaves out the\n" +
			"columns no column has; csv and json carry them all.\n\n" +
			"--history lists every schema change instead, oldest first: one row per change with\n" +
			"its version, commit time, operation (ADD COLUMNS, CHANGE COLUMN, RENAME COLUMN,\n" +
			"DROP COLUMNS, ...), what changed (a column added, renamed, widened, dropped, made\n" +
			"nullable; column mapping turned on) and the pipeline, stage and run that made it,\n" +
			"or the user for a command such as table alter. Columns are followed by their\n" +
			"column mapping id, so a renamed column is a rename, never a drop and an add.\n\n" +
			tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			var version optionalInt
			fs.Var(&version, "version", "the schema of version `n`")
			timestamp := fs.String("timestamp", "", "the schema of the version current at `time`")
			history := fs.Bool("history", false, "list every schema change, oldest first")
			return func(ctx context.Context, e *env, args []string) error {
				switch {
				case version.set && *timestamp != "":
					return usagef("--version and --timestamp are exclusive")
				case *history && (version.set || *timestamp != ""):
					return usagef("--history lists every version's changes: it takes no --version or --timestamp")
				case version.set && version.value < 0:
					return usagef("--version must be 0 or more, got %d", version.value)
				}
				var asOf time.Time
				if *timestamp != "" {
					ts, err := parseTimestamp(*timestamp)
					if err != nil {
						return usagef("--timestamp: %v", err)
					}
					asOf = ts
				}
				t, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				if *history {
					hist, err := t.table.SchemaHistory(ctx)
					if err != nil {
						return err
					}
					rows := schemaHistoryRows(hist)
					if tf.format == formatText {
						return writeRows(e, tf.format, schemaHistoryTextColumns, schemaHistoryText(rows))
					}
					return writeRows(e, tf.format, schemaHistoryColumns, rows)
				}
				o := showOptions{version: version, timestamp: *timestamp}
				snap, err := o.snapshot(ctx, e, t, asOf)
				if err != nil {
					return err
				}
				cols, rows := schemaRows(delta.DescribeSchema(snap.Schema(), snap.PartitionColumns()), tf.format == formatText)
				return writeRows(e, tf.format, cols, rows)
			}
		},
	}
}

// schemaRows renders the columns of a schema; compact leaves out the output columns no
// column has a value in (text), else every column is kept (csv and json keep one shape).
func schemaRows(info []delta.ColumnInfo, compact bool) ([]column, [][]cell) {
	cols := []column{{name: "column"}, {name: "type"}, {name: "nullable"}, {name: "comment"}, {name: "identity"},
		{name: "partition"}, {name: "type_changes"}, {name: "physical_name"}, {name: "id", numeric: true}}
	rows := make([][]cell, len(info))
	for i, c := range info {
		r := []cell{rowtext.Text(strings.Repeat("  ", c.Depth) + c.Path), rowtext.Text(c.Type), boolCell(c.Nullable, "yes", "no"),
			emptyCell, emptyCell, emptyCell, emptyCell, emptyCell, emptyCell}
		r[0].JSON = c.Path
		if c.Comment != "" {
			r[3] = rowtext.Text(c.Comment)
		}
		if id := c.Identity; id != nil {
			text := fmt.Sprintf("start %d, step %d", id.Start, id.Step)
			obj := rowtext.Object{{Key: "start", Value: id.Start}, {Key: "step", Value: id.Step}, {Key: "high_water_mark", Value: id.HighWaterMark}}
			if id.HighWaterMark != nil {
				text += fmt.Sprintf(", last %d", *id.HighWaterMark)
			}
			r[4] = cell{Text: text, JSON: obj}
		}
		if c.Partition {
			r[5] = boolCell(true, "yes", "")
		}
		if len(c.TypeChanges) > 0 {
			var parts []string
			var list []rowtext.Object
			for _, tc := range c.TypeChanges {
				parts = append(parts, tc.From+" to "+tc.To)
				list = append(list, rowtext.Object{{Key: "from", Value: tc.From}, {Key: "to", Value: tc.To}})
			}
			r[6] = cell{Text: strings.Join(parts, ", "), JSON: list}
		}
		if c.PhysicalName != "" {
			r[7] = rowtext.Text(c.PhysicalName)
		}
		if c.ID != 0 {
			r[8] = intCell(c.ID)
		}
		rows[i] = r
	}
	if !compact {
		return cols, rows
	}
	keep := []int{0, 1, 2}
	for j := 3; j < len(cols); j++ {
		for _, r := range rows {
			if r[j].Text != "" {
				keep = append(keep, j)
				break
			}
		}
	}
	out := make([][]cell, len(rows))
	for i, r := range rows {
		for _, j := range keep {
			out[i] = append(out[i], r[j])
		}
	}
	var kept []column
	for _, j := range keep {
		kept = append(kept, cols[j])
	}
	return kept, out
}

// emptyCell is nothing to say: blank in text and CSV, null in JSON.
var emptyCell = cell{}

func boolCell(b bool, yes, no string) cell {
	if b {
		return cell{Text: yes, JSON: true}
	}
	return cell{Text: no, JSON: false}
}

var schemaHistoryColumns = []column{
	{name: "version", numeric: true},
	{name: "timestamp"},
	{name: "operation"},
	{name: "change"},
	{name: "kind"},
	{name: "column"},
	{name: "from"},
	{name: "to"},
	{name: "pipeline"},
	{name: "stage"},
	{name: "run"},
	{name: "user"},
}

// schemaHistoryTextColumns are the text form of the schema history: the change in
// words, and who made it in three columns.
var schemaHistoryTextColumns = []column{
	{name: "version", numeric: true},
	{name: "timestamp"},
	{name: "operation"},
	{name: "change"},
	{name: "pipeline/stage"},
	{name: "run"},
	{name: "user"},
}

func schemaHistoryText(rows [][]cell) [][]cell {
	out := make([][]cell, len(rows))
	for i, r := range rows {
		ps := rowtext.Null
		if !r[8].Null || !r[9].Null {
			ps = rowtext.Text(r[8].Text + "/" + r[9].Text)
		}
		out[i] = []cell{r[0], r[1], r[2], r[3], ps, r[10], r[11]}
	}
	return out
}

// schemaHistoryRows are one row per change (the first version: one row saying what the
// table started with).
func schemaHistoryRows(hist []delta.SchemaVersion) [][]cell {
	var rows [][]cell
	for _, h := range hist {
		who := []cell{rowtext.Null, rowtext.Null, rowtext.Null, optText(h.UserName)}
		if l := h.Lineage; l != nil {
			run := l.RunID
			if l.Attempt > 1 {
				run += fmt.Sprintf(" (attempt %d)", l.Attempt)
			}
			who = []cell{optText(l.Pipeline), optText(l.Stage), optText(run), optText(h.UserName)}
		}
		head := []cell{intCell(h.Version), rowtext.Text(formatTime(h.Timestamp)), optText(h.Operation)}
		if h.First {
			kind, text := "created", fmt.Sprintf("created with %s", columnList(h.Schema))
			if h.Version > 0 {
				kind, text = "earliest", fmt.Sprintf("the earliest version in the log has %s", columnList(h.Schema))
			}
			rows = append(rows, append(append(head, rowtext.Text(text), rowtext.Text(kind), rowtext.Null, rowtext.Null, rowtext.Null), who...))
			continue
		}
		for _, c := range h.Changes {
			rows = append(rows, append(append(head, rowtext.Text(c.String()), rowtext.Text(c.Kind), optText(c.Column), optText(c.From), optText(c.To)), who...))
		}
	}
	return rows
}

// columnList says a schema's top-level columns: "3 columns: id, name, channel"; past
// ten, the first eight and how many more.
func columnList(st *delta.StructType) string {
	names := make([]string, len(st.Fields))
	for i, f := range st.Fields {
		names[i] = f.Name
	}
	n := "1 column"
	if len(names) != 1 {
		n = fmt.Sprintf("%d columns", len(names))
	}
	if len(names) > 10 {
		names = append(names[:8], fmt.Sprintf("and %d more", len(names)-8))
	}
	return n + ": " + strings.Join(names, ", ")
}
