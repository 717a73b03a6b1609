package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

func historyCommand() *command {
	return &command{
		name:    "history",
		args:    "TABLE",
		summary: "list the versions of a table, newest first",
		help: "List the versions of a table, newest first: version, commit timestamp (RFC 3339,\n" +
			"UTC), operation, user, the pipeline, stage, run and attempt that wrote it (for\n" +
			"commits made by orchestrator) and what it changed. The text form fits a terminal:\n" +
			"it sums up the operation metrics (+inserted ~updated -deleted rows, files);\n" +
			"--format csv and json carry every column: engine, operation metrics and\n" +
			"parameters in full.\n\n" + tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			tf := addTableFlags(fs)
			limit := fs.Int("limit", 0, "show only the newest `n` versions (0: all)")
			return func(ctx context.Context, e *env, args []string) error {
				if *limit < 0 {
					return usagef("--limit must be 0 or more, got %d", *limit)
				}
				t, err := tf.open(ctx, e, args)
				if err != nil {
					return err
				}
				entries, err := t.table.History(ctx, *limit)
				if err != nil {
					return err
				}
				if tf.format == formatText {
					return writeRows(e, tf.format, historyTextColumns, historyTextRows(entries))
				}
				return writeRows(e, tf.format, historyColumns, historyRows(entries))
			}
		},
	}
}

var historyColumns = []column{
	{name: "version", numeric: true},
	{name: "timestamp"},
	{name: "operation"},
	{name: "user"},
	{name: "engine"},
	{name: "pipeline"},
	{name: "stage"},
	{name: "run"},
	{name: "attempt", numeric: true},
	{name: "metrics"},
	{name: "parameters"},
}

func historyRows(entries []delta.HistoryEntry) [][]cell {
	rows := make([][]cell, len(entries))
	for i, h := range entries {
		r := []cell{
			intCell(h.Version),
			rowtext.Text(formatTime(h.Timestamp)),
			optText(h.Operation),
			optText(h.UserName),
			optText(h.EngineInfo),
			rowtext.Null, rowtext.Null, rowtext.Null, rowtext.Null,
			mapCell(h.OperationMetrics),
			mapCell(h.OperationParameters),
		}
		if l := h.Lineage; l != nil {
			r[5], r[6], r[7] = optText(l.Pipeline), optText(l.Stage), optText(l.RunID)
			if l.Attempt > 0 {
				r[8] = intCell(int64(l.Attempt))
			}
		}
		rows[i] = r
	}
	return rows
}

// historyTextColumns are the history's text form: the long columns (engine, metrics,
// parameters) give way to a summary of what the commit changed.
var historyTextColumns = []column{
	{name: "version", numeric: true},
	{name: "timestamp"},
	{name: "operation"},
	{name: "user"},
	{name: "pipeline/stage"},
	{name: "run"},
	{name: "changes"},
}

func historyTextRows(entries []delta.HistoryEntry) [][]cell {
	rows := make([][]cell, len(entries))
	for i, h := range entries {
		r := []cell{intCell(h.Version), rowtext.Text(formatTime(h.Timestamp)), optText(h.Operation), optText(h.UserName), rowtext.Null, rowtext.Null, optText(h.Summary())}
		if l := h.Lineage; l != nil {
			if l.Pipeline != "" || l.Stage != "" {
				r[4] = rowtext.Text(l.Pipeline + "/" + l.Stage)
			}
			run := l.RunID
			if l.Attempt > 1 {
				run += fmt.Sprintf(" (attempt %d)", l.Attempt)
			}
			r[5] = optText(run)
		}
		rows[i] = r
	}
	return rows
}

// optText is an empty string as null.
func optText(s string) cell {
	if s == "" {
		return rowtext.Null
	}
	return rowtext.Text(s)
}

// mapCell shows operation parameters or metrics: "k=v, k=v" (sorted keys, strings as
// they are) in text and CSV, an object in JSON. Empty is null.
func mapCell(m map[string]any) cell {
	if len(m) == 0 {
		return rowtext.Null
	}
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(scalarText(m[k]))
	}
	return cell{Text: b.String(), JSON: m}
}

func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	b, err := rowtext.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
