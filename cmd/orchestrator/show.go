package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

func showCommand() *command {
	return &command{
		name:    "show",
		args:    "TABLE",
		summary: "print a table's rows, at any version or time",
		help: "Print the rows of a table: its latest version, or the version given with --version,\n" +
			"or the version that was current at --timestamp (RFC 3339, e.g.\n" +
			"2026-01-14T10:00:00Z; a time without a zone, or a bare date, is UTC), which is\n" +
			"named on stderr. --where\n" +
			"keeps the rows that match a condition (files that cannot match are not read);\n" +
			"--columns picks columns; --limit stops after that many rows; --row-ids adds each\n" +
			"row's stable row id and row commit version (row tracking).\n\n" +
			"Values are shown exactly: decimals with their scale, timestamps in UTC (RFC 3339),\n" +
			"dates as YYYY-MM-DD, binary as base64, structs, arrays and maps as JSON. A null is\n" +
			"NULL in text, an empty field in CSV and null in JSON.\n\n" + tableArgHelp,
		setup: func(fs *flag.FlagSet) runFunc {
			o := &showOptions{table: addTableFlags(fs)}
			fs.Var(&o.version, "version", "show the table as of version `n`")
			fs.StringVar(&o.timestamp, "timestamp", "", "show the table as of `time`")
			o.columns.split = true
			fs.Var(&o.columns, "columns", "print only these `columns`, in this order (comma-separated, repeatable)")
			fs.StringVar(&o.where, "where", "", "print only the rows for which `expr` is true, e.g.\n\"city = 'Portland' AND amount >= 10\" (comparisons, IN, BETWEEN, IS NULL,\nAND, OR; DATE '2026-01-14' and TIMESTAMP '2026-01-14 10:00:00' literals)")
			fs.Int64Var(&o.limit, "limit", 0, "print at most `n` rows (0: all)")
			fs.StringVar(&o.orderBy, "order-by", "", "print the rows sorted by `column` (ascending, NULLs first; they are\nread into memory to be sorted)")
			fs.BoolVar(&o.desc, "desc", false, "with --order-by: descending, NULLs last")
			fs.BoolVar(&o.rowIDs, "row-ids", false, "add each row's stable row id and row commit version, as the columns\n"+delta.RowIDColumn+" and "+delta.RowCommitVersionColumn+" (Spark's names; tables with\n"+delta.PropEnableRowTracking+" only; --order-by may name them)")
			return func(ctx context.Context, e *env, args []string) error { return show(ctx, e, o, args) }
		},
	}
}

// showOptions are the flags of show.
type showOptions struct {
	table     *tableFlags
	version   optionalInt
	timestamp string
	columns   listFlag
	where     string
	limit     int64
	orderBy   string
	desc      bool
	rowIDs    bool
}

// show prints the rows of the table args name, as o says.
func show(ctx context.Context, e *env, o *showOptions, args []string) error {
	if o.desc && o.orderBy == "" {
		return usagef("--desc needs --order-by")
	}
	if o.version.set && o.timestamp != "" {
		return usagef("--version and --timestamp are exclusive")
	}
	if o.version.set && o.version.value < 0 {
		return usagef("--version must be 0 or more, got %d", o.version.value)
	}
	if o.limit < 0 {
		return usagef("--limit must be 0 or more, got %d", o.limit)
	}
	var asOf time.Time
	if o.timestamp != "" {
		t, err := parseTimestamp(o.timestamp)
		if err != nil {
			return usagef("--timestamp: %v", err)
		}
		asOf = t
	}
	opts := delta.ScanOptions{Columns: o.columns.values}
	if o.where != "" {
		pred, err := expr.Parse(o.where)
		if err != nil {
			return usagef("--where: %v", err)
		}
		opts.Filter = pred
	}
	t, err := o.table.open(ctx, e, args)
	if err != nil {
		return err
	}
	opts.TableURI = t.uri
	snap, err := o.snapshot(ctx, e, t, asOf)
	if err != nil {
		return err
	}
	if err := showRows(ctx, e, o.table.format, snap, opts, o.limit, order{column: o.orderBy, desc: o.desc}, o.rowIDs); err != nil {
		return fmt.Errorf("table %s: %w", t.name, err)
	}
	return nil
}

// snapshot is the version of t show prints: --version, the one current at --timestamp
// (asOf; named on stderr), or the latest.
func (o *showOptions) snapshot(ctx context.Context, e *env, t *openedTable, asOf time.Time) (*delta.Snapshot, error) {
	switch {
	case o.version.set:
		return t.table.SnapshotAt(ctx, o.version.value)
	case o.timestamp != "":
		snap, err := t.table.SnapshotAsOf(ctx, asOf)
		if err == nil { // say which version the time chose
			fmt.Fprintf(e.stderr, "table %s as of %s: version %d, committed %s\n",
				t.name, formatTime(asOf), snap.Version(), formatTime(snap.Timestamp()))
		}
		return snap, err
	default:
		return t.table.Snapshot(ctx)
	}
}

// showRows streams a snapshot's rows to the output, or sorts them first; rowIDs adds
// each row's row id and row commit version.
func showRows(ctx context.Context, e *env, format string, snap *delta.Snapshot, opts delta.ScanOptions, limit int64, o order, rowIDs bool) error {
	hidden := false
	switch {
	case o.column == "":
	case rowIDs && (strings.EqualFold(o.column, delta.RowIDColumn) || strings.EqualFold(o.column, delta.RowCommitVersionColumn)):
	default:
		f := snap.Schema().Field(o.column)
		if f == nil {
			return fmt.Errorf("--order-by: no column %q", o.column)
		}
		o.column = f.Name
		if len(opts.Columns) > 0 && !slices.ContainsFunc(opts.Columns, func(c string) bool { return strings.EqualFold(c, f.Name) }) {
			opts.Columns, hidden = append(slices.Clone(opts.Columns), f.Name), true
		}
	}
	var rdr array.RecordReader
	var err error
	if rowIDs {
		rdr, err = snap.ScanWithRowIDs(ctx, opts)
	} else {
		rdr, err = snap.Scan(ctx, opts)
	}
	if err != nil {
		return err
	}
	defer rdr.Release()
	if o.column == "" {
		return writeRecords(e, format, rdr, limit)
	}
	return writeSorted(e, format, rdr, limit, o, hidden)
}

// writeRecords prints the records of a stream (a scan, a change feed), at most limit
// rows when limit > 0. A record is used before the next call to Next, as
// array.RecordReader requires.
func writeRecords(e *env, format string, rdr array.RecordReader, limit int64) error {
	fields := rdr.Schema().Fields()
	cols := make([]column, len(fields))
	for i, f := range fields {
		cols[i] = column{name: f.Name, numeric: numericType(f.Type)}
	}
	w := newRowWriter(e.stdout, format)
	if err := w.header(cols); err != nil {
		return err
	}
	var n int64
	row := make([]cell, len(cols))
read:
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			if limit > 0 && n >= limit {
				break read
			}
			for c := range cols {
				row[c] = arrowCell(rec.Column(c), r)
			}
			if err := w.row(row); err != nil {
				return err
			}
			n++
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return w.flush()
}

// parseTimestamp reads --timestamp: RFC 3339, or a date and time without a zone (UTC),
// or a bare date (midnight UTC).
func parseTimestamp(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-01-14T10:00:00Z), a UTC date and time (2026-01-14T10:00:00) or a date (2026-01-14)", s)
}
