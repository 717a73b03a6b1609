package delta

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// joinedView builds the "target.*" + "source.*" record of matched pairs: target rows
// tgt of rec, source rows src. pre, when not nil, is those target rows already gathered
// (table schema), whose columns are used instead of gathering them again. need lists
// the view columns to fill (nil: all; the others are left out of the record).
func (m *merger) joinedView(ctx context.Context, rec arrow.RecordBatch, tgt, src []int32, pre arrow.RecordBatch, need []string) (arrow.RecordBatch, error) {
	var fields []arrow.Field
	var cols []arrow.Array
	defer func() { arrowx.ReleaseArrays(cols) }()
	side := func(view *arrow.Schema, from arrow.RecordBatch, rows []int32, pre arrow.RecordBatch) error {
		var idx []int
		for i, f := range view.Fields() {
			if need == nil || slices.ContainsFunc(need, func(c string) bool { return strings.EqualFold(c, f.Name) }) {
				idx = append(idx, i)
				fields = append(fields, f)
			}
		}
		if len(idx) == 0 {
			return nil
		}
		if pre != nil {
			for _, i := range idx {
				c := pre.Column(i)
				c.Retain()
				cols = append(cols, c)
			}
			return nil
		}
		sub := projectColumns(from, idx)
		defer sub.Release()
		g, err := arrowx.Gather(ctx, m.w.mem, sub, rows)
		if err != nil {
			return err
		}
		defer g.Release()
		for _, c := range g.Columns() {
			c.Retain()
			cols = append(cols, c)
		}
		return nil
	}
	if err := side(m.targetView, rec, tgt, pre); err != nil {
		return nil, err
	}
	if err := side(m.src.view.Schema(), m.src.view, src, nil); err != nil {
		return nil, err
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(tgt))), nil
}

// projectColumns is the record of rec's columns idx.
func projectColumns(rec arrow.RecordBatch, idx []int) arrow.RecordBatch {
	fields := make([]arrow.Field, len(idx))
	cols := make([]arrow.Array, len(idx))
	for j, i := range idx {
		fields[j], cols[j] = rec.Schema().Field(i), rec.Column(i)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// condColumns lists the view columns the clauses' conditions read (nil: possibly all,
// when one has a CondFunc).
func condColumns(cs []boundClause) []string {
	need := []string{}
	for _, c := range cs {
		if c.CondFunc != nil {
			return nil
		}
		if c.cond != nil {
			need = append(need, c.cond.Columns()...)
		}
	}
	return need
}

// setColumns lists the view columns assignments read (nil: possibly all, when one is
// an ExprFunc).
func setColumns(set map[string]any) []string {
	need := []string{}
	for _, v := range set {
		switch x := v.(type) {
		case expr.ColumnRef:
			need = append(need, x.Name)
		case expr.ExprFunc, func(arrow.RecordBatch) (arrow.Array, error):
			return nil
		}
	}
	return need
}

// chooseClauses gives, per row of view, the index of the first clause whose condition
// is true, or -1.
func chooseClauses(cs []boundClause, view arrow.RecordBatch) ([]int, error) {
	n := int(view.NumRows())
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	left := n
	for ci, c := range cs {
		if left == 0 {
			break
		}
		if c.cond == nil && c.CondFunc == nil {
			for i := range out {
				if out[i] < 0 {
					out[i] = ci
				}
			}
			break
		}
		var tri []expr.Truth
		if c.cond != nil {
			var err error
			if tri, err = c.cond.Eval(view, n); err != nil {
				return nil, err
			}
		}
		var ok []bool
		if c.CondFunc != nil {
			var err error
			if ok, err = c.CondFunc(view); err != nil {
				return nil, fmt.Errorf("clause condition: %w", err)
			}
			if len(ok) != n {
				return nil, fmt.Errorf("clause condition returned %d values for %d rows", len(ok), n)
			}
		}
		for i := range out {
			if out[i] < 0 && (tri == nil || tri[i] == expr.True) && (ok == nil || ok[i]) {
				out[i] = ci
				left--
			}
		}
	}
	return out, nil
}
