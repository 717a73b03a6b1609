package main

import (
	"cmp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// order is a --order-by column and direction.
type order struct {
	column string
	desc   bool
}

// sortKey is one row's value of the order column: null, a number (integers, dates and
// timestamps as their integers, decimals as their unscaled value at one scale), or text.
type sortKey struct {
	null bool
	num  float64
	i    int64
	text string
	kind int // 0 integer, 1 float, 2 text
}

func compareKeys(a, b sortKey) int {
	switch {
	case a.null || b.null:
		return cmp.Compare(boolRank(!a.null), boolRank(!b.null))
	case a.kind == 0 && b.kind == 0:
		return cmp.Compare(a.i, b.i)
	case a.kind == 2 || b.kind == 2:
		return strings.Compare(a.text, b.text)
	}
	return cmp.Compare(a.num, b.num)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sortKeyAt(arr arrow.Array, i int) sortKey {
	if arr.IsNull(i) {
		return sortKey{null: true}
	}
	switch a := arr.(type) {
	case *array.Int8:
		return sortKey{i: int64(a.Value(i))}
	case *array.Int16:
		return sortKey{i: int64(a.Value(i))}
	case *array.Int32:
		return sortKey{i: int64(a.Value(i))}
	case *array.Int64:
		return sortKey{i: a.Value(i)}
	case *array.Date32:
		return sortKey{i: int64(a.Value(i))}
	case *array.Timestamp:
		return sortKey{i: int64(a.Value(i))}
	case *array.Boolean:
		return sortKey{i: int64(boolRank(a.Value(i)))}
	case *array.Float32:
		return sortKey{num: float64(a.Value(i)), kind: 1}
	case *array.Float64:
		return sortKey{num: a.Value(i), kind: 1}
	case *array.Decimal128:
		return sortKey{num: a.Value(i).ToFloat64(a.DataType().(*arrow.Decimal128Type).Scale), kind: 1}
	}
	return sortKey{text: arr.ValueStr(i), kind: 2}
}

// writeSorted prints a stream's rows sorted by the order column (stable: rows with
// equal values keep their order), at most limit when limit > 0; hidden drops the
// order column (the last) from the output.
func writeSorted(e *env, format string, rdr array.RecordReader, limit int64, o order, hidden bool) error {
	fields := rdr.Schema().Fields()
	orderCol := slices.IndexFunc(fields, func(f arrow.Field) bool { return strings.EqualFold(f.Name, o.column) })
	shown := len(fields)
	if hidden {
		shown--
	}
	cols := make([]column, shown)
	for i := range cols {
		cols[i] = column{name: fields[i].Name, numeric: numericType(fields[i].Type)}
	}
	type row struct {
		key   sortKey
		cells []cell
	}
	var rows []row
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := range int(rec.NumRows()) {
			cells := make([]cell, shown)
			for c := range cells {
				cells[c] = arrowCell(rec.Column(c), r)
			}
			rows = append(rows, row{key: sortKeyAt(rec.Column(orderCol), r), cells: cells})
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		c := compareKeys(a.key, b.key)
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
