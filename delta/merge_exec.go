package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// merger runs one MERGE: target files one at a time, then the inserts.
type merger struct {
	t    *Table
	snap *Snapshot
	tx   *Transaction
	plan *mergePlan
	src  *mergeSource
	res  *MergeResult
	w    *rewriter

	parallel int // target files merged at once (rewriteFiles)

	removed []*Add   // target files rewritten
	read    []string // target files read
	tview   *arrow.Schema
	matched []bool // source rows that matched a target row

	// Filled when several workers rewrote files (rewriteFiles): the other workers' files
	// and change rows.
	extraAdds []*Add
	extraCDCs []*CDC
	extraCDC  int64

	lane    *changeLane // writes the change rows of w (nil: change feed off)
	cdcSent int64       // change rows given to lane
}

func (m *merger) run(ctx context.Context) error {
	isPart := map[string]bool{}
	for _, c := range m.snap.PartitionColumns() {
		isPart[strings.ToLower(c)] = true
	}
	fields := make([]arrow.Field, len(m.w.tblSch.Fields()))
	for i, f := range m.w.tblSch.Fields() {
		f.Name = "target." + f.Name
		f.Nullable = true
		fields[i] = f
	}
	m.tview = arrow.NewSchema(fields, nil)
	if len(m.plan.matched) > 0 || len(m.plan.bySource) > 0 {
		var files []*Add
		for _, a := range m.snap.Files() {
			may, err := m.src.mayHoldKeys(m.plan, a, isPart)
			if err != nil {
				return err
			}
			if !may && len(m.plan.bySource) > 0 {
				may = m.bySourceMayMatch(a, isPart)
			}
			if !may {
				m.res.NumTargetFilesSkipped++
				continue
			}
			m.res.NumTargetFilesScanned++
			m.read = append(m.read, a.Path)
			files = append(files, a)
		}
		if err := m.rewriteFiles(ctx, files); err != nil {
			return err
		}
	} else {
		// Insert-only: a target file matters only for which source rows match it.
		for _, a := range m.snap.Files() {
			may, err := m.src.mayHoldKeys(m.plan, a, isPart)
			if err != nil {
				return err
			}
			if !may {
				m.res.NumTargetFilesSkipped++
				continue
			}
			m.res.NumTargetFilesScanned++
			m.read = append(m.read, a.Path)
			if err := m.markMatches(ctx, a); err != nil {
				return err
			}
		}
	}
	return m.insert(ctx)
}

// rewriteFiles merges the candidate files, m.parallel of them at a time: each worker is
// a copy of m with its own writers, counters and matched-source flags, combined into m
// at the end (worker 0 is m itself).
func (m *merger) rewriteFiles(ctx context.Context, files []*Add) error {
	n := min(m.parallel, len(files))
	if n <= 1 {
		for _, a := range files {
			if err := ctx.Err(); err != nil {
				return err
			}
			touched, err := m.mergeFile(ctx, a)
			if err != nil {
				return err
			}
			if touched {
				m.removed = append(m.removed, a)
			}
		}
		return nil
	}
	workers := []*merger{m}
	defer func() {
		for _, w := range workers[1:] {
			if w.w != nil {
				w.stopChanges()
				w.w.abort()
			}
		}
	}()
	for i := 1; i < n; i++ {
		w := *m
		w.res, w.removed, w.matched = &MergeResult{}, nil, make([]bool, len(m.matched))
		rw, err := newRewriter(m.snap)
		if err != nil {
			return err
		}
		w.w = rw
		w.startChanges(ctx)
		workers = append(workers, &w)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan *Add)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range next {
				touched, err := w.mergeFile(ctx, a)
				if err != nil {
					errs[i] = err
					cancel()
					for range next { // drain so the feeder finishes
					}
					return
				}
				if touched {
					w.removed = append(w.removed, a)
				}
			}
		}()
	}
feed:
	for _, a := range files {
		select {
		case next <- a:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs { // the first real failure, not the cancellations it caused
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, w := range workers[1:] {
		if err := w.stopChanges(); err != nil {
			return err
		}
		adds, cdcs, err := w.w.finish(ctx)
		cdcRows := w.cdcSent
		w.w = nil // finished or aborted by finish
		if err != nil {
			return err
		}
		m.extraAdds, m.extraCDCs = append(m.extraAdds, adds...), append(m.extraCDCs, cdcs...)
		m.extraCDC += cdcRows
		m.removed = append(m.removed, w.removed...)
		for i, hit := range w.matched {
			m.matched[i] = m.matched[i] || hit
		}
		r := m.res
		r.NumTargetRowsUpdated += w.res.NumTargetRowsUpdated
		r.NumTargetRowsDeleted += w.res.NumTargetRowsDeleted
		r.NumTargetRowsCopied += w.res.NumTargetRowsCopied
		r.NumTargetRowsMatchedUpdated += w.res.NumTargetRowsMatchedUpdated
		r.NumTargetRowsMatchedDeleted += w.res.NumTargetRowsMatchedDeleted
		r.NumTargetRowsNotMatchedBySourceUpdated += w.res.NumTargetRowsNotMatchedBySourceUpdated
		r.NumTargetRowsNotMatchedBySourceDeleted += w.res.NumTargetRowsNotMatchedBySourceDeleted
	}
	return nil
}

func (m *merger) bySourceMayMatch(a *Add, isPart map[string]bool) bool {
	for _, c := range m.plan.bySource {
		if c.Cond == nil || c.tcnd == nil {
			return true // (a CondFunc alone cannot prune files)
		}
		if ok, err := c.tcnd.mayMatchFile(a, isPart); err != nil || ok {
			return true
		}
	}
	return false
}

// markMatches records which source rows match a row of file a (insert-only merges).
func (m *merger) markMatches(ctx context.Context, a *Add) error {
	return scanFile(ctx, m.snap, a, func(rec arrow.RecordBatch) error {
		pr, err := m.src.newProber(rec, m.plan.keyIdx, m.plan.nullSafe)
		if err != nil {
			return err
		}
		for lo, n := 0, int(rec.NumRows()); lo < n; lo += probeBatch {
			b := pr.probe(lo, min(probeBatch, n-lo))
			for j := 0; j < b.n; j++ {
				if b.hit[j] > 0 {
					m.matched[b.row[j]] = true
				}
			}
		}
		return nil
	})
}

// recordPlan is what happens to the rows of one target record.
type recordPlan struct {
	rec     arrow.RecordBatch
	copied  []int32
	deleted []int32 // target rows
	ndelM   int64   // of which by WHEN MATCHED
	// updates by clause (matched clause i, not-matched-by-source clause -1-i): target
	// rows, and source rows for matched clauses.
	updT    map[int][]int32
	updS    map[int][]int32
	changed bool
}

// mergeFile merges one target file and reports whether it changed (was rewritten). Its
// records are planned as they are read; from the first that changes, they are applied
// (written) in order by a second goroutine while the next ones are read and planned.
// Records before that are held, and dropped if no record changes.
func (m *merger) mergeFile(ctx context.Context, a *Add) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var held []*recordPlan // planned, not yet handed to the applier
	defer func() {
		for _, p := range held {
			p.rec.Release()
		}
	}()
	var apply chan *recordPlan // nil until a record changes
	applied := make(chan error, 1)
	startApplier := func() {
		apply = make(chan *recordPlan, 2)
		go func() { // stopped by close(apply) below, which then waits for it
			var err error
			for p := range apply {
				if err == nil {
					if err = m.applyRecord(ctx, p); err != nil {
						cancel() // stops the scan
					}
				}
				p.rec.Release()
			}
			applied <- err
		}()
	}
	err := scanFile(ctx, m.snap, a, func(rec arrow.RecordBatch) error {
		p, err := m.planRecord(ctx, rec)
		if err != nil {
			return err
		}
		rec.Retain()
		held = append(held, p)
		if apply == nil && !p.changed {
			return nil
		}
		if apply == nil {
			startApplier()
		}
		for _, h := range held {
			apply <- h // never blocks for long: the applier drains the channel even after a failure
		}
		held = held[:0]
		return nil
	})
	if apply != nil {
		close(apply)
		if aerr := <-applied; aerr != nil {
			return false, aerr
		}
	}
	if err != nil {
		return false, err
	}
	return apply != nil, nil
}

func (m *merger) planRecord(ctx context.Context, rec arrow.RecordBatch) (*recordPlan, error) {
	n := int(rec.NumRows())
	p := &recordPlan{rec: rec, updT: map[int][]int32{}, updS: map[int][]int32{}}
	pr, err := m.src.newProber(rec, m.plan.keyIdx, m.plan.nullSafe)
	if err != nil {
		return nil, err
	}
	var tgtM, srcM, tgtU []int32
	for lo := 0; lo < n; lo += probeBatch {
		b := pr.probe(lo, min(probeBatch, n-lo))
		for j := 0; j < b.n; j++ {
			i := lo + j
			if b.hit[j] == 0 {
				tgtU = append(tgtU, int32(i))
				continue
			}
			if b.hit[j] > 1 && len(m.plan.matched) > 0 && !m.plan.onlyDel {
				return nil, fmt.Errorf("%w: the target row with key %s is matched by several source rows (deduplicate the source)",
					ErrMultipleSourceRowsMatched, pr.enc.keyString(m.plan.keys, i))
			}
			s := b.row[j]
			m.matched[s] = true
			tgtM, srcM = append(tgtM, int32(i)), append(srcM, s)
		}
	}
	// WHEN MATCHED
	if len(tgtM) > 0 && len(m.plan.matched) > 0 {
		var choice []int
		if c := m.plan.matched[0]; c.cond == nil && c.CondFunc == nil {
			choice = make([]int, len(tgtM)) // every pair takes the first clause
		} else {
			view, err := m.joinedView(ctx, rec, tgtM, srcM, nil, condColumns(m.plan.matched))
			if err != nil {
				return nil, err
			}
			choice, err = chooseClauses(m.plan.matched, view)
			view.Release()
			if err != nil {
				return nil, err
			}
		}
		for j, ci := range choice {
			switch {
			case ci < 0:
				p.copied = append(p.copied, tgtM[j])
			case m.plan.matched[ci].Action == MergeDelete:
				p.deleted = append(p.deleted, tgtM[j])
				p.ndelM++
			default:
				p.updT[ci] = append(p.updT[ci], tgtM[j])
				p.updS[ci] = append(p.updS[ci], srcM[j])
			}
		}
	} else {
		p.copied = append(p.copied, tgtM...)
	}
	// WHEN NOT MATCHED BY SOURCE
	if len(tgtU) > 0 && len(m.plan.bySource) > 0 {
		sub, err := gatherRows(ctx, m.w.mem, rec, tgtU)
		if err != nil {
			return nil, err
		}
		view := array.NewRecordBatch(m.tview, sub.Columns(), sub.NumRows())
		sub.Release()
		choice, err := chooseClauses(m.plan.bySource, view)
		view.Release()
		if err != nil {
			return nil, err
		}
		for j, ci := range choice {
			switch {
			case ci < 0:
				p.copied = append(p.copied, tgtU[j])
			case m.plan.bySource[ci].Action == MergeDelete:
				p.deleted = append(p.deleted, tgtU[j])
			default:
				p.updT[-1-ci] = append(p.updT[-1-ci], tgtU[j])
			}
		}
	} else {
		p.copied = append(p.copied, tgtU...)
	}
	p.changed = len(p.deleted) > 0 || len(p.updT) > 0
	return p, nil
}

// joinedView builds the "target.*" + "source.*" record of matched pairs: target rows
// tgt of rec, source rows src. pre, when not nil, is those target rows already gathered
// (table schema), whose columns are used instead of gathering them again. need lists
// the view columns to fill (nil: all; the others are left out of the record).
func (m *merger) joinedView(ctx context.Context, rec arrow.RecordBatch, tgt, src []int32, pre arrow.RecordBatch, need []string) (arrow.RecordBatch, error) {
	var fields []arrow.Field
	var cols []arrow.Array
	defer func() { releaseAll(cols) }()
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
		g, err := gatherRows(ctx, m.w.mem, sub, rows)
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
	if err := side(m.tview, rec, tgt, pre); err != nil {
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
			need = append(need, c.cond.columns()...)
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
		case ColumnRef:
			need = append(need, x.Name)
		case ExprFunc, func(arrow.RecordBatch) (arrow.Array, error):
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
		var tri []int8
		if c.cond != nil {
			var err error
			if tri, err = c.cond.evalTri(view, n); err != nil {
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
			if out[i] < 0 && (tri == nil || tri[i] == tTrue) && (ok == nil || ok[i]) {
				out[i] = ci
				left--
			}
		}
	}
	return out, nil
}

// applyRecord writes a changed record's copied rows, updated rows and change rows.
func (m *merger) applyRecord(ctx context.Context, p *recordPlan) error {
	if len(p.copied) > 0 {
		c, err := gatherRows(ctx, m.w.mem, p.rec, sortedRows(p.copied))
		if err != nil {
			return err
		}
		err = m.w.writeData(ctx, c)
		c.Release()
		if err != nil {
			return err
		}
		m.res.NumTargetRowsCopied += int64(len(p.copied))
	}
	if len(p.deleted) > 0 {
		d, err := gatherRows(ctx, m.w.mem, p.rec, p.deleted)
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
		m.res.NumTargetRowsMatchedDeleted += p.ndelM
		m.res.NumTargetRowsNotMatchedBySourceDeleted += n - p.ndelM
	}
	for key, tgt := range p.updT {
		if err := m.applyUpdate(ctx, p, key, tgt); err != nil {
			return err
		}
	}
	return nil
}

func (m *merger) applyUpdate(ctx context.Context, p *recordPlan, key int, tgt []int32) error {
	pre, err := gatherRows(ctx, m.w.mem, p.rec, tgt)
	if err != nil {
		return err
	}
	defer pre.Release()
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
		if view, err = m.joinedView(ctx, p.rec, tgt, p.updS[key], pre, setColumns(set)); err != nil {
			return err
		}
		m.res.NumTargetRowsMatchedUpdated += int64(len(tgt))
	} else {
		view = array.NewRecordBatch(m.tview, pre.Columns(), pre.NumRows())
		m.res.NumTargetRowsNotMatchedBySourceUpdated += int64(len(tgt))
	}
	defer view.Release()
	post, err := applySet(m.w, m.plan.schema, pre, view, set)
	if err != nil {
		return err
	}
	defer post.Release()
	m.res.NumTargetRowsUpdated += int64(len(tgt))
	if err := m.w.writeData(ctx, post); err != nil {
		return err
	}
	if err := m.writeChanges(pre, ChangeUpdatePreimage); err != nil {
		return err
	}
	return m.writeChanges(post, ChangeUpdatePostimage)
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
			set[strings.ToLower(f.Name)] = Col("source." + sf.Name)
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
	view, err := gatherRows(ctx, m.w.mem, m.src.view, rows)
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
		sub, err := gatherRows(ctx, m.w.mem, view, sel)
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
	defer releaseAll(cols)
	for i, f := range schema.Fields {
		at := m.w.tblSch.Field(i).Type
		_, isID, _ := IdentityField(f)
		var v any
		has := false
		if c.set == nil {
			if sf := m.src.schema.Field(f.Name); sf != nil {
				v, has = Col("source."+sf.Name), true
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
		arr, err := evalAssignment(m.w.mem, view, g, at, v)
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
	if m.cdcSent+m.extraCDC > 0 { // the version is read from its change files: inserts must be there
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
