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

// applyRecord writes a changed record's copied rows, updated rows and change rows.
func (m *merger) applyRecord(ctx context.Context, p *recordPlan) error {
	if len(p.copied) > 0 && !m.dv {
		rows := sortedRows(p.copied)
		c, err := arrowx.Gather(ctx, m.w.mem, p.rec, rows)
		if err != nil {
			return err
		}
		if p.tracked != nil {
			withIDs, err := m.w.carry.copied(ctx, m.w.mem, c, p.tracked, rows)
			c.Release()
			if err != nil {
				return err
			}
			c = withIDs
		}
		err = m.w.writeData(ctx, c)
		c.Release()
		if err != nil {
			return err
		}
		m.res.NumTargetRowsCopied += int64(len(p.copied))
	}
	if len(p.deleted) > 0 {
		d, err := arrowx.Gather(ctx, m.w.mem, p.rec, p.deleted)
		if err != nil {
			return err
		}
		err = m.writeChanges(d, ChangeDelete)
		d.Release()
		if err != nil {
			return err
		}
		n := int64(len(p.deleted))
		m.res.NumTargetRowsDeleted += n
		m.res.NumTargetRowsMatchedDeleted += p.deletedByMatched
		m.res.NumTargetRowsNotMatchedBySourceDeleted += n - p.deletedByMatched
	}
	for key, tgt := range p.updateTargets {
		if err := m.applyUpdate(ctx, p, key, tgt); err != nil {
			return err
		}
	}
	return nil
}

func (m *merger) applyUpdate(ctx context.Context, p *recordPlan, key int, tgt []int32) error {
	pre, post, err := m.updateRows(ctx, p, key, tgt)
	if err != nil {
		return err
	}
	defer pre.Release()
	defer post.Release()
	m.countUpdated(key, len(tgt))
	data := post
	if p.tracked != nil {
		ids, err := arrowx.Gather(ctx, m.w.mem, p.tracked, tgt)
		if err != nil {
			return err
		}
		data = m.w.carry.updated(m.w.mem, ids, post)
		ids.Release()
		defer data.Release()
	}
	if err := m.w.writeData(ctx, data); err != nil {
		return err
	}
	if err := m.writeChanges(pre, ChangeUpdatePreimage); err != nil {
		return err
	}
	return m.writeChanges(post, ChangeUpdatePostimage)
}

// updateRows returns the rows tgt of a record before and after the update of clause key
// (matched clause key, or not-matched-by-source clause -1-key).
func (m *merger) updateRows(ctx context.Context, p *recordPlan, key int, tgt []int32) (pre, post arrow.RecordBatch, err error) {
	pre, err = arrowx.Gather(ctx, m.w.mem, p.rec, tgt)
	if err != nil {
		return nil, nil, err
	}
	var c boundClause
	if key >= 0 {
		c = m.plan.matched[key]
	} else {
		c = m.plan.bySource[-1-key]
	}
	set := c.set
	if set == nil { // UPDATE SET *
		set = m.setAll(key >= 0)
	}
	var view arrow.RecordBatch
	if key >= 0 {
		view, err = m.joinedView(ctx, p.rec, tgt, p.updateSources[key], pre, setColumns(set))
	} else {
		view = array.NewRecordBatch(m.targetView, pre.Columns(), pre.NumRows())
	}
	if err != nil {
		pre.Release()
		return nil, nil, err
	}
	defer view.Release()
	if post, err = applySet(m.w, m.plan.schema, pre, view, set); err != nil {
		pre.Release()
		return nil, nil, err
	}
	return pre, post, nil
}

// countUpdated counts n rows updated by clause key.
func (m *merger) countUpdated(key, n int) {
	if key >= 0 {
		m.res.NumTargetRowsMatchedUpdated += int64(n)
	} else {
		m.res.NumTargetRowsNotMatchedBySourceUpdated += int64(n)
	}
	m.res.NumTargetRowsUpdated += int64(n)
}

// setAll is UPDATE SET * (every non-identity target column from the source column of the
// same name); for not-matched-by-source clauses, which see no source, it sets nothing.
func (m *merger) setAll(matched bool) map[string]any {
	set := map[string]any{}
	if !matched {
		return set
	}
	for _, f := range m.plan.schema.Fields {
		if _, isID, _ := IdentityField(f); isID {
			continue
		}
		if sf := m.src.schema.Field(f.Name); sf != nil {
			set[strings.ToLower(f.Name)] = expr.Col("source." + sf.Name)
		}
	}
	return set
}

// insert writes the source rows no target row matched, by the WHEN NOT MATCHED clauses.
func (m *merger) insert(ctx context.Context) error {
	if len(m.plan.notMatch) == 0 {
		return nil
	}
	var rows []int32
	for i, hit := range m.matched {
		if !hit {
			rows = append(rows, int32(i))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	view, err := arrowx.Gather(ctx, m.w.mem, m.src.view, rows)
	if err != nil {
		return err
	}
	defer view.Release()
	choice, err := chooseClauses(m.plan.notMatch, view)
	if err != nil {
		return err
	}
	byClause := map[int][]int32{}
	for j, ci := range choice {
		if ci >= 0 {
			byClause[ci] = append(byClause[ci], int32(j))
		}
	}
	for ci := range m.plan.notMatch {
		sel := byClause[ci]
		if len(sel) == 0 {
			continue
		}
		sub, err := arrowx.Gather(ctx, m.w.mem, view, sel)
		if err != nil {
			return err
		}
		err = m.insertRows(ctx, m.plan.notMatch[ci], sub)
		sub.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *merger) insertRows(ctx context.Context, c boundClause, view arrow.RecordBatch) error {
	n := int(view.NumRows())
	schema := m.plan.schema
	cols := make([]arrow.Array, len(schema.Fields))
	defer arrowx.ReleaseArrays(cols)
	for i, f := range schema.Fields {
		at := m.w.tblSch.Field(i).Type
		_, isID, _ := IdentityField(f)
		var v any
		has := false
		if c.set == nil {
			if sf := m.src.schema.Field(f.Name); sf != nil {
				v, has = expr.Col("source."+sf.Name), true
			}
		} else {
			v, has = c.set[strings.ToLower(f.Name)]
		}
		if !has || (isID && v == nil) {
			if !f.Nullable && !isID {
				return fmt.Errorf("insert: column %s is not nullable and gets no value", f.Name)
			}
			cols[i] = array.MakeArrayOfNull(m.w.mem, at, n)
			continue
		}
		g := f
		if isID {
			cp := *f
			cp.Nullable = true // null means: generate
			g = &cp
		}
		arr, err := expr.Assign(m.w.mem, view, g, at, v)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		cols[i] = arr
	}
	ins := array.NewRecordBatch(m.w.tblSch, cols, int64(n))
	defer ins.Release()
	withID, err := m.tx.AssignIdentity(ins)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	defer withID.Release()
	if err := m.w.writeData(ctx, withID); err != nil {
		return err
	}
	m.res.NumTargetRowsInserted += int64(n)
	if m.changeRowsSent+m.workerChangeRows > 0 { // the version is read from its change files: inserts must be there
		return m.writeChanges(withID, ChangeInsert)
	}
	return nil
}

// sortedRows returns rows in ascending order (copied rows keep their file order).
func sortedRows(rows []int32) []int32 {
	if slices.IsSorted(rows) {
		return rows
	}
	out := slices.Clone(rows)
	slices.Sort(out)
	return out
}
