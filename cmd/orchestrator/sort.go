package main

import (
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

// order is a --order-by column and direction.
type order struct {
	column string
	desc   bool
}

// writeSorted prints a stream's rows sorted by the order column (stable: rows with
// equal values keep their order), at most limit when limit > 0; hidden drops the
// order column from the output.
func writeSorted(e *env, format string, rdr array.RecordReader, limit int64, o order, hidden bool) error {
	fields := rdr.Schema().Fields()
	orderCol := slices.IndexFunc(fields, func(f arrow.Field) bool { return strings.EqualFold(f.Name, o.column) })
	var shownCols []int // the indexes of the columns shown
	for i := range fields {
		if !hidden || i != orderCol {
			shownCols = append(shownCols, i)
		}
	}
	shown := len(shownCols)
	cols := make([]column, shown)
	for i, c := range shownCols {
		cols[i] = column{name: fields[c].Name, numeric: numericType(fields[c].Type)}
	}
	type row struct {
		key   rowtext.Key
		cells []cell
	}
	var rows []row
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := range int(rec.NumRows()) {
			cells := make([]cell, shown)
			for c, i := range shownCols {
				cells[c] = arrowCell(rec.Column(i), r)
			}
			rows = append(rows, row{key: rowtext.KeyAt(rec.Column(orderCol), r), cells: cells})
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		c := rowtext.Compare(a.key, b.key)
		if o.desc {
			return -c
		}
		return c
	})
	w := newRowWriter(e.stdout, format)
	if err := w.header(cols); err != nil {
		return err
	}
	for n, r := range rows {
		if limit > 0 && int64(n) >= limit {
			break
		}
		if err := w.row(r.cells); err != nil {
			return err
		}
	}
	return w.flush()
}
