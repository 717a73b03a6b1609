package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"golang.org/x/sync/errgroup"
)

// merger runs one MERGE: target files one at a time, then the inserts.
type merger struct {
	t    *Table
	snap *Snapshot
	tx   *Transaction
	plan *mergePlan
	src  *mergeSource
	pos  *MergePositions // nil: join on the keys
	res  *MergeResult
	w    *rewriter

	parallel int // target files merged at once (rewriteFiles)

	removed    []*Add        // target files rewritten
	dv         bool          // mark removed rows in deletion vectors instead of rewriting files
	dvAdds     []*Add        // with dv: the target files again, with their new deletion vectors
	splices    *spliceGroup  // without dv: files being spliced (spliceGivenRows), shared by the workers
	read       []string      // target files read
	targetView *arrow.Schema // the table's columns named target.<name>, all nullable
	matched    []bool        // source rows that matched a target row

	// Filled when several workers rewrote files (rewriteFiles): the data files and the
	// change files the other workers wrote, and how many change rows those hold.
	workerAdds        []*Add
	workerChangeFiles []*CDC
	workerChangeRows  int64

	lane           *changeLane // writes the change rows of w (nil: change feed off)
	changeRowsSent int64       // change rows given to lane
}

// scanTargets is the pass over the target files: each file that may hold a match is
// read and its rows planned, the files that change rewritten (or marked, or spliced),
// and the source rows that matched noted for the inserts.
func (m *merger) scanTargets(ctx context.Context) error {
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
	m.targetView = arrow.NewSchema(fields, nil)
	if m.pos != nil {
		var files []*Add
		for _, a := range m.snap.Files() {
			if m.pos.Files[a.Path] == nil {
				m.res.NumTargetFilesSkipped++
				continue
			}
			m.res.NumTargetFilesScanned++
			m.read = append(m.read, a.Path)
			files = append(files, a)
		}
		if len(files) != len(m.pos.Files) {
			return errors.New("MergePositions names a file that is not in the target snapshot")
		}
		return m.rewriteFiles(ctx, files)
	}
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
		return m.rewriteFiles(ctx, files)
	}
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
	return nil
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
		w.res, w.removed, w.dvAdds, w.matched = &MergeResult{}, nil, nil, make([]bool, len(m.matched))
		rw, err := newCarryingRewriter(m.snap, m.w.carry)
		if err != nil {
			return err
		}
		w.w = rw
		w.startChanges(ctx)
		workers = append(workers, &w)
	}
	// A file goes to a free worker; the first error stops the rest.
	free := make(chan *merger, n)
	for _, w := range workers {
		free <- w
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, a := range files {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			w := <-free
			defer func() { free <- w }()
			touched, err := w.mergeFile(gctx, a)
			if err != nil {
				return err
			}
			if touched {
				w.removed = append(w.removed, a)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, w := range workers[1:] {
		if err := m.combine(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// combine finishes worker w's files and change rows and adds what it did to m: files
// written and removed, change files, matched source rows, counts.
func (m *merger) combine(ctx context.Context, w *merger) error {
	if err := w.stopChanges(); err != nil {
		return err
	}
	adds, cdcs, err := w.w.finish(ctx)
	w.w = nil // finished or aborted by finish
	if err != nil {
		return err
	}
	m.workerAdds, m.workerChangeFiles = append(m.workerAdds, adds...), append(m.workerChangeFiles, cdcs...)
	m.workerChangeRows += w.changeRowsSent
	m.removed = append(m.removed, w.removed...)
	m.dvAdds = append(m.dvAdds, w.dvAdds...)
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
	return nil
}

func (m *merger) bySourceMayMatch(a *Add, isPart map[string]bool) bool {
	for _, c := range m.plan.bySource {
		if c.Cond == nil || c.tcnd == nil {
			return true // (a CondFunc alone cannot prune files)
		}
		if ok, err := c.tcnd.MayMatchFile(fileFacts(a, isPart)); err != nil || ok {
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
	rec              arrow.RecordBatch
	copied           []int32 // target rows kept as they are
	deleted          []int32 // target rows deleted
	deletedByMatched int64   // of deleted, those a WHEN MATCHED clause deleted
	// Updates by clause (matched clause i, not-matched-by-source clause -1-i): the target
	// rows, and for matched clauses the source rows that update them (same order).
	updateTargets map[int][]int32
	updateSources map[int][]int32
	changed       bool // some row is deleted or updated
	// tracked, when the rewrite carries row ids, has the record's rows' row ids and
	// commit versions (rowCarry.trackColumns); nil otherwise.
	tracked arrow.RecordBatch
}

// retain keeps the plan's records past the scan's call.
func (p *recordPlan) retain() {
	p.rec.Retain()
	if p.tracked != nil {
		p.tracked.Retain()
	}
}

// release releases what retain kept.
func (p *recordPlan) release() {
	p.rec.Release()
	if p.tracked != nil {
		p.tracked.Release()
	}
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
			p.release()
		}
	}()
	var ap *recordApplier // nil until a record changes
	var fm *FileMatches
	var first int64 // index in the file of rec's first row
	if m.pos != nil {
		fm = m.pos.Files[a.Path]
		if err := checkFileMatches(a.Path, fm); err != nil {
			return false, err
		}
	}
	var gone []int64 // with m.dv: the file's rows (logical indexes) deleted or updated
	// The rows given carry no row ids: a row-tracking table's rewrite reads the file,
	// and with deletion vectors its matched rows' ids alone.
	if fm != nil && fm.Rows != nil {
		if live, ok := fileNumRecords(a); ok && m.dv {
			return m.mergeGivenRows(ctx, a, fm, live)
		} else if ok && m.w.carry == nil {
			if handled, touched, err := m.spliceGivenRows(ctx, a, fm, live); err != nil || handled {
				return touched, err
			}
		}
	}
	err := scanFileCarry(ctx, m.snap, m.w.carry, a, func(rec arrow.RecordBatch) error {
		var tracked arrow.RecordBatch // the rows' row ids and commit versions, when carried
		if m.w.carry != nil {
			data := m.w.carry.dataColumns(rec)
			defer data.Release()
			tracked = m.w.carry.trackColumns(rec)
			defer tracked.Release()
			rec = data
		}
		p, err := m.planRecord(ctx, rec, fm, first)
		at := first
		first += rec.NumRows()
		if err != nil {
			return err
		}
		p.tracked = tracked
		if m.dv {
			// Only the changed rows are written; the others stay where they are.
			if !p.changed {
				return nil
			}
			gone = p.appendChanged(gone, at)
		}
		p.retain()
		held = append(held, p)
		if ap == nil && !p.changed {
			return nil
		}
		if ap == nil {
			ap = m.startApplier(ctx, cancel)
		}
		for _, h := range held {
			ap.apply <- h // never blocks for long: the applier drains the channel even after a failure
		}
		held = held[:0]
		return nil
	})
	if ap != nil {
		if aerr := ap.wait(); aerr != nil {
			return false, aerr
		}
	}
	if err != nil {
		return false, err
	}
	if m.dv && ap != nil {
		if err := m.markDeleted(ctx, a, gone, first); err != nil {
			return false, err
		}
	}
	return ap != nil, nil
}

// checkFileMatches checks a file's given matches: a source row per target row, target
// rows in increasing order (a row twice would be matched by two source rows).
func checkFileMatches(path string, fm *FileMatches) error {
	if len(fm.Source) != len(fm.Target) {
		return fmt.Errorf("MergePositions for %s: %d target rows, %d source rows", path, len(fm.Target), len(fm.Source))
	}
	for i := 1; i < len(fm.Target); i++ {
		if fm.Target[i] <= fm.Target[i-1] {
			return fmt.Errorf("%w: MergePositions for %s lists target row %d twice or out of order", ErrMultipleSourceRowsMatched, path, fm.Target[i])
		}
	}
	return nil
}

// recordApplier applies a file's planned records, in the order sent on apply, on a
// goroutine of its own; wait stops it and waits for it. After a failure it cancels the
// file's scan and releases the records it is still sent without applying them.
type recordApplier struct {
	apply   chan *recordPlan
	applied chan error
}

// startApplier starts a file's applier; cancel stops the file's scan.
func (m *merger) startApplier(ctx context.Context, cancel context.CancelFunc) *recordApplier {
	ap := &recordApplier{apply: make(chan *recordPlan, 2), applied: make(chan error, 1)}
	go func() { // stopped by ap.wait, which closes apply and waits for it
		var err error
		for p := range ap.apply {
			if err == nil {
				if err = m.applyRecord(ctx, p); err != nil {
					cancel() // stops the scan
				}
			}
			p.release()
		}
		ap.applied <- err
	}()
	return ap
}

// wait closes the applier's input and returns the first error of its records.
func (ap *recordApplier) wait() error {
	close(ap.apply)
	return <-ap.applied
}

// markDeleted marks a file's deleted or updated rows in its vector (markDeleted) and
// keeps the file with the new vector, unless no row is left.
func (m *merger) markDeleted(ctx context.Context, a *Add, gone []int64, live int64) error {
	na, err := markDeleted(ctx, m.snap, a, gone, live)
	if na != nil {
		m.dvAdds = append(m.dvAdds, na)
	}
	return err
}

// mergeGivenRows merges a file of a table with deletion vectors from the matched rows
// the caller gave (fm.Rows) without reading it: the rows the clauses delete or update
// are marked in the file's vector, the updated ones written anew. live is the file's
// row count.
func (m *merger) mergeGivenRows(ctx context.Context, a *Add, fm *FileMatches, live int64) (bool, error) {
	plans, err := m.planGivenRows(ctx, a, fm, live)
	if err != nil {
		return false, err
	}
	if m.w.carry != nil {
		tracked, err := m.w.carry.givenTracked(ctx, m.snap, m.w.mem, a, fm.Target)
		if err != nil {
			return false, err
		}
		k := int64(0)
		for _, p := range plans {
			n := p.rec.NumRows()
			p.tracked = tracked.NewSlice(k, k+n)
			defer p.tracked.Release()
			k += n
		}
		tracked.Release()
	}
	var gone []int64
	k := 0 // index in Target of the record's first row
	for _, p := range plans {
		if p.changed {
			if err := m.applyRecord(ctx, p); err != nil {
				return false, err
			}
			for _, r := range p.appendChanged(nil, 0) {
				gone = append(gone, fm.Target[k+int(r)])
			}
		}
		k += int(p.rec.NumRows())
	}
	if len(gone) == 0 {
		return false, nil
	}
	return true, m.markDeleted(ctx, a, gone, live)
}

// planGivenRows checks the matched rows the caller gave for file a (fm.Rows; live is
// the file's row count), marks their source rows matched and chooses each one's clause.
func (m *merger) planGivenRows(ctx context.Context, a *Add, fm *FileMatches, live int64) ([]*recordPlan, error) {
	n := 0
	for _, r := range fm.Rows {
		if !r.Schema().Equal(m.w.tblSch) {
			return nil, fmt.Errorf("MergePositions for %s: the rows given have schema %s, want the table's %s", a.Path, r.Schema(), m.w.tblSch)
		}
		n += int(r.NumRows())
	}
	if n != len(fm.Target) {
		return nil, fmt.Errorf("MergePositions for %s: %d rows given for %d target rows", a.Path, n, len(fm.Target))
	}
	if n > 0 && (fm.Target[0] < 0 || fm.Target[n-1] >= live) {
		return nil, fmt.Errorf("MergePositions for %s: target rows %d..%d, but the file has %d rows", a.Path, fm.Target[0], fm.Target[n-1], live)
	}
	for _, s := range fm.Source {
		if s < 0 || int64(s) >= m.src.n {
			return nil, fmt.Errorf("MergePositions: source row %d is out of range", s)
		}
		m.matched[s] = true
	}
	plans := make([]*recordPlan, 0, len(fm.Rows))
	k := 0 // index in Target and Source of the record's first row
	for _, rec := range fm.Rows {
		rn := int(rec.NumRows())
		p := &recordPlan{rec: rec, updateTargets: map[int][]int32{}, updateSources: map[int][]int32{}}
		p, err := m.choose(ctx, p, rec, indexRange(rn), fm.Source[k:k+rn], nil)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
		k += rn
	}
	return plans, nil
}

// appendChanged appends the file positions (first is the record's) of the rows the plan
// deletes or updates.
func (p *recordPlan) appendChanged(dst []int64, first int64) []int64 {
	for _, r := range p.deleted {
		dst = append(dst, first+int64(r))
	}
	for _, rows := range p.updateTargets {
		for _, r := range rows {
			dst = append(dst, first+int64(r))
		}
	}
	return dst
}

// planRecord decides what happens to each row of a target record: by the key join, or,
// with positions, by fm (the matches of the record's file; first is the index in the
// file of the record's first row).
func (m *merger) planRecord(ctx context.Context, rec arrow.RecordBatch, fm *FileMatches, first int64) (*recordPlan, error) {
	n := int(rec.NumRows())
	p := &recordPlan{rec: rec, updateTargets: map[int][]int32{}, updateSources: map[int][]int32{}}
	var matchedTargets, matchedSources, unmatchedTargets []int32
	if m.pos != nil {
		if fm == nil {
			fm = &FileMatches{}
		}
		lo, _ := slices.BinarySearch(fm.Target, first)
		hi, _ := slices.BinarySearch(fm.Target, first+int64(n))
		next := int32(0)
		for k := lo; k < hi; k++ {
			t, s := int32(fm.Target[k]-first), fm.Source[k]
			if s < 0 || int64(s) >= m.src.n {
				return nil, fmt.Errorf("MergePositions: source row %d is out of range", s)
			}
			for ; next < t; next++ {
				unmatchedTargets = append(unmatchedTargets, next)
			}
			next = t + 1
			m.matched[s] = true
			matchedTargets, matchedSources = append(matchedTargets, t), append(matchedSources, s)
		}
		for ; next < int32(n); next++ {
			unmatchedTargets = append(unmatchedTargets, next)
		}
		return m.choose(ctx, p, rec, matchedTargets, matchedSources, unmatchedTargets)
	}
	pr, err := m.src.newProber(rec, m.plan.keyIdx, m.plan.nullSafe)
	if err != nil {
		return nil, err
	}
	for lo := 0; lo < n; lo += probeBatch {
		b := pr.probe(lo, min(probeBatch, n-lo))
		for j := 0; j < b.n; j++ {
			i := lo + j
			if b.hit[j] == 0 {
				unmatchedTargets = append(unmatchedTargets, int32(i))
				continue
			}
			if b.hit[j] > 1 && len(m.plan.matched) > 0 && !m.plan.onlyDel {
				return nil, fmt.Errorf("%w: the target row with key %s is matched by several source rows (deduplicate the source)",
					ErrMultipleSourceRowsMatched, pr.enc.keyString(m.plan.keys, i))
			}
			s := b.row[j]
			m.matched[s] = true
			matchedTargets, matchedSources = append(matchedTargets, int32(i)), append(matchedSources, s)
		}
	}
	return m.choose(ctx, p, rec, matchedTargets, matchedSources, unmatchedTargets)
}

// choose applies the clauses to a record's target rows that matched (matchedTargets,
// with the source rows they matched, matchedSources) and those that did not
// (unmatchedTargets), filling in p.
func (m *merger) choose(ctx context.Context, p *recordPlan, rec arrow.RecordBatch, matchedTargets, matchedSources, unmatchedTargets []int32) (*recordPlan, error) {
	// WHEN MATCHED
	if len(matchedTargets) > 0 && len(m.plan.matched) > 0 {
		var choice []int
		if c := m.plan.matched[0]; c.cond == nil && c.CondFunc == nil {
			choice = make([]int, len(matchedTargets)) // every pair takes the first clause
		} else {
			view, err := m.joinedView(ctx, rec, matchedTargets, matchedSources, nil, condColumns(m.plan.matched))
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
				p.copied = append(p.copied, matchedTargets[j])
			case m.plan.matched[ci].Action == MergeDelete:
				p.deleted = append(p.deleted, matchedTargets[j])
				p.deletedByMatched++
			default:
				p.updateTargets[ci] = append(p.updateTargets[ci], matchedTargets[j])
				p.updateSources[ci] = append(p.updateSources[ci], matchedSources[j])
			}
		}
	} else {
		p.copied = append(p.copied, matchedTargets...)
	}
	// WHEN NOT MATCHED BY SOURCE
	if len(unmatchedTargets) > 0 && len(m.plan.bySource) > 0 {
		sub, err := arrowx.Gather(ctx, m.w.mem, rec, unmatchedTargets)
		if err != nil {
			return nil, err
		}
		view := array.NewRecordBatch(m.targetView, sub.Columns(), sub.NumRows())
		sub.Release()
		choice, err := chooseClauses(m.plan.bySource, view)
		view.Release()
		if err != nil {
			return nil, err
		}
		for j, ci := range choice {
			switch {
			case ci < 0:
				p.copied = append(p.copied, unmatchedTargets[j])
			case m.plan.bySource[ci].Action == MergeDelete:
				p.deleted = append(p.deleted, unmatchedTargets[j])
			default:
				p.updateTargets[-1-ci] = append(p.updateTargets[-1-ci], unmatchedTargets[j])
			}
		}
	} else {
		p.copied = append(p.copied, unmatchedTargets...)
	}
	p.changed = len(p.deleted) > 0 || len(p.updateTargets) > 0
	return p, nil
}
