package jobs

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
)

// scd2_merge over its memory budget. A batch whose events would hold more than the
// budget's working set (scdEventCost each, plus their records) is set aside as it is
// read: the events so far and all that follow go to spill files by key hash range
// (keyRange), each with its sequence, delete marks, source version and order. The
// dimension is then scanned once and its rows of keys the batch may have (and, for a
// snapshot source that deletes, its current rows) set aside the same way, with their
// places. Each pass takes as many consecutive ranges as fit the working set and runs
// the in-memory machinery on them: index the events, sort the dimension rows against
// them, fold (late keys with their logged events), log the events (range after range,
// so the log file stays sorted by key hash), and hand the changes to a partedMerge.
// After the last pass the log is committed, then the dimension as ONE MERGE in parts.
//
// A key's events and stored versions are all in one range, so each key is folded as
// the in-memory path folds it; new surrogate keys are generated in the in-memory order
// (batch keys in the order they came, late keys after them, then the keys a snapshot
// lost), the order partedMerge inserts in. The result is the in-memory path's: rows,
// change feed, identity values and event log.

// scdEventCost is what an event costs in memory besides its record: the batch's index
// and event arrays, the dimension rows and versions the scan keeps for it, its changes,
// its log row and its MERGE source row.
const scdEventCost = 400

// scdSpill is a batch set aside by key hash range.
type scdSpill struct {
	l          *scdLayout
	dir        *spillDir
	limit      int64 // working set of a pass
	events     *fanout
	schema     *arrow.Schema
	changeFeed bool  // the events carry source versions (a change feed source)
	withPhys   bool  // the watermark counts the deletes of source rows
	n          int64 // events so far (the next one's order)
	top        int64 // the highest sequence (the watermark's candidate)
	hasTop     bool
	filter     keyFilter // the batch's keys
	keyBuf     []byte
	parts      []uint16
}

// The event columns of a spilled event record, after the data columns.
var scdEventFields = []arrow.Field{
	{Name: "_orchestrator_seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_orchestrator_del", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "_orchestrator_phys", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "_orchestrator_rowseq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_orchestrator_commit", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_orchestrator_ord", Type: arrow.PrimitiveTypes.Int64},
}

func newSCDSpill(env *Env, l *scdLayout, withPhys bool, limit int64) (*scdSpill, error) {
	dir, err := newSpillDir(env, limit)
	if err != nil {
		return nil, err
	}
	return &scdSpill{l: l, dir: dir, limit: limit, withPhys: withPhys, filter: newKeyFilter(limit)}, nil
}

// remove deletes the spill files (nil: nothing).
func (sp *scdSpill) remove() {
	if sp != nil {
		sp.dir.remove()
	}
}

// add sets aside rec's rows as events at seqs (deletes where dels; with their source
// versions and physical deletes when cr is set).
func (sp *scdSpill) add(ctx context.Context, rec arrow.RecordBatch, seqs []int64, dels []bool, cr *changeEvents) error {
	l := sp.l
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	cols, err := sourceColumns(rec.Schema(), l)
	if err != nil {
		return err
	}
	fields := make([]arrow.Field, 0, len(cols)+len(scdEventFields))
	arrs := make([]arrow.Array, 0, cap(fields))
	for j, c := range cols {
		f := rec.Schema().Field(c)
		f.Name, f.Nullable = l.data[j].Name, true
		fields = append(fields, f)
		arrs = append(arrs, rec.Column(c))
	}
	fields = append(fields, scdEventFields...)
	schema := arrow.NewSchema(fields, nil)
	if sp.events == nil {
		sp.schema, sp.changeFeed = schema, cr != nil
		sp.events = newFanout(sp.dir, schema, hashParts)
	} else if !sp.schema.Equal(schema) {
		return fmt.Errorf("the source's columns changed within the batch (%s, then %s); merge it in smaller batches or raise memory_budget", sp.schema, schema)
	}
	mem := memory.DefaultAllocator
	seqB, delB, physB, rowSeqB, commitB, ordB := array.NewInt64Builder(mem), array.NewBooleanBuilder(mem), array.NewBooleanBuilder(mem),
		array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	defer func() {
		for _, b := range []array.Builder{seqB, delB, physB, rowSeqB, commitB, ordB} {
			b.Release()
		}
	}()
	seqB.AppendValues(seqs, nil)
	delB.AppendValues(dels, nil)
	sp.parts = slices.Grow(sp.parts[:0], n)[:n]
	for i := range n {
		phys := cr != nil && cr.phys[i]
		physB.Append(phys)
		if cr != nil {
			rowSeqB.Append(cr.rowSeqs[i])
			commitB.Append(cr.commits[i])
		} else {
			rowSeqB.Append(0)
			commitB.Append(0)
		}
		ordB.Append(sp.n + int64(i))
		if (sp.withPhys || !phys) && (!sp.hasTop || seqs[i] > sp.top) {
			sp.top, sp.hasTop = seqs[i], true
		}
		if sp.keyBuf, err = appendKey(sp.keyBuf[:0], rec, cols, l.spec.keys, i); err != nil {
			return err
		}
		sp.parts[i] = keyRange(sp.keyBuf)
		sp.filter.add(sp.keyBuf)
	}
	for _, b := range []array.Builder{seqB, delB, physB, rowSeqB, commitB, ordB} {
		a := b.NewArray()
		defer a.Release()
		arrs = append(arrs, a)
	}
	out := array.NewRecordBatch(schema, arrs, int64(n))
	defer out.Release()
	sp.n += int64(n)
	return sp.events.write(ctx, out, sp.parts)
}

// take keeps rec and indexes its rows as events (keep, addRows); when the batch then
// holds more than its limit, it goes to spill (spillTo) with what it holds, and so does
// every record after.
func (b *scdBatch) take(ctx context.Context, rec arrow.RecordBatch, seqs []int64, dels []bool, cr *changeEvents) error {
	if b.spill != nil {
		return b.spill.add(ctx, rec, seqs, dels, cr)
	}
	if err := b.keep(rec); err != nil {
		return err
	}
	if err := b.addRows(seqs, dels, cr); err != nil {
		return err
	}
	b.heldBytes += recordBytes(rec)
	if b.limit > 0 && b.spillTo != nil && b.heldBytes+int64(len(b.evSeq))*scdEventCost > b.limit {
		return b.overflow(ctx)
	}
	return nil
}

// expectRows makes room for n events, or, when they would not fit the limit, sends the
// batch to spill at once.
func (b *scdBatch) expectRows(ctx context.Context, n int64) error {
	if b.spill != nil {
		return nil
	}
	if b.limit > 0 && b.spillTo != nil && n*scdEventCost > b.limit {
		return b.overflow(ctx)
	}
	b.reserve(int(n))
	return nil
}

// overflow sends the batch to spill: the events it holds, in the order they came.
func (b *scdBatch) overflow(ctx context.Context) error {
	sp, err := b.spillTo()
	if err != nil {
		return err
	}
	b.spill = sp
	off := 0
	for _, rec := range b.recs {
		n := int(rec.NumRows())
		var cr *changeEvents
		if b.evCommit != nil {
			cr = &changeEvents{phys: b.evPhys[off : off+n], rowSeqs: b.evRowSeq[off : off+n], commits: b.evCommit[off : off+n]}
		}
		if err := sp.add(ctx, rec, b.evSeq[off:off+n], b.evDel[off:off+n], cr); err != nil {
			return err
		}
		off += n
	}
	releaseRecords(b.recs)
	b.recs, b.cols, b.heldBytes = nil, nil, 0
	b.dropIndex()
	b.keys = keyindex.New(0)
	b.evRec, b.evRow = nil, nil
	return nil
}

// spillTarget scans the target once and sets aside, by key hash range, the rows a pass
// may need: those of keys the batch may have, and those keepAll says a pass needs
// whatever the batch (a snapshot source that deletes needs current rows); each with its
// place (file index, row). data maps the layout's data columns to a record's.
func (sp *scdSpill) spillTarget(ctx context.Context, snap *delta.Snapshot, data func(rec arrow.RecordBatch) ([]int, error), keepAll func(rec arrow.RecordBatch, i int) bool) (*fanout, error) {
	l := sp.l
	sc, err := snap.Scan(ctx, scanOptions(sp.limit, delta.ScanOptions{FilesOnly: true}))
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	fields := append(slices.Clone(sc.Schema().Fields()),
		arrow.Field{Name: "_orchestrator_file", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "_orchestrator_row", Type: arrow.PrimitiveTypes.Int64})
	schema := arrow.NewSchema(fields, nil)
	out := newFanout(sp.dir, schema, hashParts)
	fileIdx := map[string]int64{}
	for i, a := range snap.Files() {
		fileIdx[a.Path] = int64(i)
	}
	var keep []int32
	var parts []uint16
	for sc.Next() {
		rec := sc.RecordBatch()
		file, first, ok := sc.Position()
		if !ok {
			return nil, fmt.Errorf("the scan of the target lost the positions of its rows")
		}
		cols, err := data(rec)
		if err != nil {
			return nil, err
		}
		keep, parts = keep[:0], parts[:0]
		for i := range int(rec.NumRows()) {
			if sp.keyBuf, err = appendKey(sp.keyBuf[:0], rec, cols, l.spec.keys, i); err != nil {
				return nil, err
			}
			if !sp.filter.mayHave(sp.keyBuf) && !keepAll(rec, i) {
				continue
			}
			keep = append(keep, int32(i))
			parts = append(parts, keyRange(sp.keyBuf))
		}
		if len(keep) == 0 {
			continue
		}
		fb, rb := array.NewInt64Builder(memory.DefaultAllocator), array.NewInt64Builder(memory.DefaultAllocator)
		for _, i := range keep {
			fb.Append(fileIdx[file.Path])
			rb.Append(first + int64(i))
		}
		fa, ra := fb.NewArray(), rb.NewArray()
		fb.Release()
		rb.Release()
		kept, err := delta.GatherRows(ctx, rec, keep)
		if err != nil {
			fa.Release()
			ra.Release()
			return nil, err
		}
		with := array.NewRecordBatch(schema, append(slices.Clone(kept.Columns()), fa, ra), int64(len(keep)))
		kept.Release()
		fa.Release()
		ra.Release()
		err = out.write(ctx, with, parts)
		with.Release()
		if err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sp.filter = nil // not needed any more
	return out, out.finish()
}

// spillDimension sets aside the dimension rows of an scd2_merge pass (spillTarget): with
// deleteAt (a snapshot source that deletes) every current row too.
func (sp *scdSpill) spillDimension(ctx context.Context, snap *delta.Snapshot, deleteAt *snapshotDeletes) (*fanout, error) {
	var d *dimColumns
	return sp.spillTarget(ctx, snap, func(rec arrow.RecordBatch) ([]int, error) {
		var err error
		if d, err = sp.l.dimColumns(rec); err != nil {
			return nil, err
		}
		return d.data, nil
	}, func(_ arrow.RecordBatch, i int) bool {
		return deleteAt != nil && !d.curr.IsNull(i) && d.curr.Value(i)
	})
}

// targetPlace returns the table columns of a record set aside by spillTarget, and a
// func telling each row's place.
func targetPlace(rec arrow.RecordBatch, table *arrow.Schema, files []*delta.Add) (arrow.RecordBatch, func(i int) (string, int64)) {
	n := int(rec.NumCols())
	file, row := rec.Column(n-2).(*array.Int64), rec.Column(n-1).(*array.Int64)
	tbl := array.NewRecordBatch(table, rec.Columns()[:n-2], rec.NumRows())
	return tbl, func(i int) (string, int64) { return files[file.Value(i)].Path, row.Value(i) }
}

// runSpilled finishes a run whose batch went to spill (see the top of this file).
func (s *SCD2Merge) runSpilled(ctx context.Context, env *Env, f *flow, l *scdLayout, log *eventLog, sp *scdSpill, deleteAt *snapshotDeletes, res Result) (Result, error) {
	srcDecl, dstDecl, dst, dstSnap := f.srcDecl, f.dstDecl, f.dst, f.dstSnap
	latest := f.srcSnap.Version()
	if sp.events == nil { // an empty batch
		sp.events = newFanout(sp.dir, nil, hashParts)
	}
	if err := sp.events.finish(); err != nil {
		return res, err
	}
	dims, err := sp.spillDimension(ctx, dstSnap, deleteAt)
	if err != nil {
		return res, fmt.Errorf("dimension %s: %w", dstDecl.Name, err)
	}
	srcSchema, err := mergeSourceSchema(dstSnap, l)
	if err != nil {
		return res, err
	}
	pm, err := newPartedMerge(sp.dir, dstSnap, srcSchema, true, sp.limit/4)
	if err != nil {
		return res, err
	}
	var app *logAppender
	if log != nil {
		if app, err = log.startAppend(latest); err != nil {
			return res, err
		}
		if app != nil {
			app.stream, app.chunk = true, int(min(max(sp.limit/2048, 4096), 1<<16))
			defer app.abort()
		}
	}
	runs := passes(func(p int) int64 {
		return sp.events.partBytes(p) + sp.events.partRows(p)*scdEventCost + dims.partBytes(p)
	}, sp.limit)
	for i, r := range runs {
		reportPass(env, i+1, len(runs))
		if err := s.pass(ctx, sp, dims, r[0], r[1], l, log, dstSnap, deleteAt, app, pm, &res); err != nil {
			return res, err
		}
	}
	if app != nil {
		if err := app.commit(ctx, env, nil); err != nil {
			return res, err
		}
	}
	opts := s.mergeOptions(env, dst, dstSnap, l, latest, s.newWatermark(dstSnap, log, sp.top, sp.hasTop))
	mp, err := dst.NewMergeInParts(opts)
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	if err := pm.run(ctx, mp); err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	mr, err := mp.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d events of %s over the memory budget (%s): worked in %d passes over spill files",
		sp.n, srcDecl.Name, ByteSize(sp.limit*2), len(runs)))
	s.count(&res, dstDecl, mr)
	return res, nil
}

// pass runs the key hash ranges [lo, hi) of a spilled batch: the in-memory machinery on
// their events and dimension rows; the changes go to pm, the events to app.
func (s *SCD2Merge) pass(ctx context.Context, sp *scdSpill, dims *fanout, lo, hi int, l *scdLayout, log *eventLog, dstSnap *delta.Snapshot,
	deleteAt *snapshotDeletes, app *logAppender, pm *partedMerge, res *Result) error {
	b := newSCDBatch(l)
	defer b.Release()
	var keyOrd []int64 // per key id: the order of its first event in the whole batch
	ncol := len(l.data)
	err := each(ctx, sp.events.files[lo:hi], func(rec arrow.RecordBatch) error {
		if err := b.keep(rec); err != nil {
			return err
		}
		seqs := rec.Column(ncol).(*array.Int64).Int64Values()
		dels := boolValues(rec.Column(ncol + 1).(*array.Boolean))
		var cr *changeEvents
		if sp.changeFeed {
			cr = &changeEvents{phys: boolValues(rec.Column(ncol + 2).(*array.Boolean)),
				rowSeqs: rec.Column(ncol + 3).(*array.Int64).Int64Values(), commits: rec.Column(ncol + 4).(*array.Int64).Int64Values()}
		}
		if err := b.addRows(seqs, dels, cr); err != nil {
			return err
		}
		ord := rec.Column(ncol + 5).(*array.Int64)
		for i, id := range b.block.IDs {
			if int(id) == len(keyOrd) {
				keyOrd = append(keyOrd, ord.Value(i))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	work := newSCDWork(len(b.head))
	p := &dimPlacer{b: b, work: work, deleteAt: deleteAt, rows: &sortedRows{}}
	files := dstSnap.Files()
	tableSchema, err := delta.ArrowSchema(dstSnap.Schema())
	if err != nil {
		return err
	}
	err = each(ctx, dims.files[lo:hi], func(rec arrow.RecordBatch) error {
		tbl, at := targetPlace(rec, tableSchema, files)
		defer tbl.Release()
		return p.place(ctx, tbl, at)
	})
	if err != nil {
		return err
	}
	changes, late, err := s.foldChanges(ctx, b, work, p.missing, l, log, dstSnap, deleteAt, res)
	if err != nil {
		return err
	}
	if app != nil {
		if err := app.add(ctx, b.logged(), lo, hi); err != nil {
			return err
		}
	}
	return s.emit(ctx, pm, b, l, changes, late, keyOrd)
}

// Insert orders: batch keys (by their first event), then late keys, then keys a
// snapshot source lost (by key hash), as the in-memory path orders its changes.
const (
	ordLate    = 1 << 61
	ordMissing = 2 << 61
)

// emit hands a pass's changes to pm: the matched ones with the dimension rows they
// change, the inserts with their order in the whole batch.
func (s *SCD2Merge) emit(ctx context.Context, pm *partedMerge, b *scdBatch, l *scdLayout, changes []scdChange, late []bool, keyOrd []int64) error {
	var matched, inserts []scdChange
	var ords, ords2 []int64
	var key []byte
	for _, c := range changes {
		if c.Old != nil {
			matched = append(matched, c)
			continue
		}
		var err error
		if c.quick {
			r := b.evRec[c.ev]
			key, err = appendKey(key[:0], b.recs[r], b.cols[r], l.spec.keys, int(b.evRow[c.ev]))
		} else {
			key = appendRowKey(key[:0], c.New.Row, l.spec.keys)
		}
		if err != nil {
			return err
		}
		ord, ord2 := int64(ordMissing), keyHash(key) // a key a snapshot source lost (sortByKeyHash)
		if id, ok := b.keys.Lookup(key); ok {
			ord, ord2 = keyOrd[id], 0
			if late[id] {
				ord |= ordLate
			}
		}
		inserts = append(inserts, c)
		ords, ords2 = append(ords, ord), append(ords2, ord2)
	}
	if len(matched) > 0 {
		src, err := scdSourceRecord(pm.source, l, b, matched)
		if err != nil {
			return err
		}
		defer src.Release()
		at := make([]dimRow, len(matched))
		files, rows := make([]string, len(matched)), make([]int64, len(matched))
		for i, c := range matched {
			at[i], files[i], rows[i] = c.Old.at, c.Old.at.file, c.Old.at.row
		}
		held, err := b.keptRows(ctx, at)
		if err != nil {
			return err
		}
		defer held.Release()
		if err := pm.addMatched(ctx, src, held, files, rows); err != nil {
			return err
		}
	}
	if len(inserts) > 0 {
		src, err := scdSourceRecord(pm.source, l, b, inserts)
		if err != nil {
			return err
		}
		defer src.Release()
		if err := pm.addInserts(ctx, src, ords, ords2); err != nil {
			return err
		}
	}
	return nil
}

// keptRows gathers the dimension rows the scan kept at the given places, in that order,
// as one record.
func (b *scdBatch) keptRows(ctx context.Context, at []dimRow) (arrow.RecordBatch, error) {
	var parts []arrow.RecordBatch
	defer func() { releaseRecords(parts) }()
	for lo := 0; lo < len(at); {
		hi := lo
		var rows []int32
		for hi < len(at) && at[hi].held == at[lo].held {
			if at[hi].held == 0 {
				return nil, fmt.Errorf("internal error: a changed row of %s was not kept", at[hi].file)
			}
			rows = append(rows, at[hi].hrow)
			hi++
		}
		g, err := delta.GatherRows(ctx, b.dimRows[at[lo].held-1], rows)
		if err != nil {
			return nil, err
		}
		parts = append(parts, g)
		lo = hi
	}
	return concatRecords(parts)
}

func boolValues(a *array.Boolean) []bool {
	out := make([]bool, a.Len())
	for i := range out {
		out[i] = a.Value(i)
	}
	return out
}
