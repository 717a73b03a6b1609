package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Snapshot mode, streamed: a run's files are the table's whole content, and memory holds
// a key index of the table and the rows that change, not the extract. Two passes, on
// the keyed run (jobs/internal/keyed):
//
//  1. The table is read once (the target side): per key a 128-bit hash of its other
//     data columns (lineage columns aside) and its row's place in its file (the MERGE
//     matches by position).
//  2. The files are decoded once (the batch). A row whose key the table has and whose
//     hash equals it changes nothing; one that differs updates the table's row; one
//     with a new key inserts; a key twice is an error naming both places, or with
//     sequence_by the last by sequence stands (a delete wins a tie, two different rows
//     at one sequence are an error); a row delete_when marks makes its key absent.
//     Only the rows that update or insert are kept.
//
// Table keys the files lack (or mark deleted) are deletes. One MERGE commits the
// deletes, updates and inserts with the files' txns, reading only the table files that
// change. In memory pass 2 starts decoding while pass 1 reads the table, and weighs
// each record as it comes. Over the budget (the table's keys alone too many, or what
// pass 2 holds too much) the table's keys and the rows (what pass 2 weighed: the row
// standing for each key) go to spill files by key hash range, and each pass runs both
// passes on its ranges.

// snapForm is the batch form of a snapshot ingest: live, a decoded record with its
// delete marks (the MERGE source's columns: the table's, the file columns delete_when
// reads, the line and the mark), its file in the run and each row's order; set aside,
// also each row's key (encoded), data hash and sequence.
type snapForm struct {
	s                 *Ingest
	live, spill       *arrow.Schema
	source            *arrow.Schema // the leading nsource columns
	nsource           int
	keyCols, hashCols []int
	seqCol            int // -1: no sequence_by
	lineCol, delCol   int
	fileCol, ordCol   int
	keyCol, loCol     int // spill form
	hiCol, seqOut     int
	seqText           func(int64) string
	h                 rowHashes
	// linCols are the lineage columns of the source (its file's name, the load time):
	// one value per file, so the spill form carries them as nulls of the null type and
	// a row read back takes them from its file's (lineage, as the file's first record
	// had them), instead of writing and reading a file name per row.
	linCols []int
	lineage map[int64][]arrow.Array
}

func (s *Ingest) newSnapForm(snap *delta.Snapshot, data []string) (*snapForm, error) {
	run, live, err := s.keyedForm(snap)
	if err != nil {
		return nil, err
	}
	fields := append(live.Fields(), tableFields...)
	// (without sequence_by the sequence is null: of the null type, nothing set aside)
	seqType := arrow.DataType(arrow.PrimitiveTypes.Int64)
	if run.seqCol < 0 {
		seqType = arrow.Null
	}
	fields = append(fields, arrow.Field{Name: "_orchestrator_seq", Type: seqType, Nullable: true})
	f := &snapForm{s: s, live: live, source: arrow.NewSchema(live.Fields()[:run.nsource], nil),
		nsource: run.nsource, keyCols: run.keyCols, hashCols: s.hashedColumns(live, data), seqCol: run.seqCol,
		lineCol: run.lineCol, delCol: run.delCol, fileCol: run.fileCol, ordCol: run.ordCol, lineage: map[int64][]arrow.Array{}}
	for c, fd := range fields[:run.nsource] {
		lin := strings.EqualFold(fd.Name, s.sourceFileColumn()) || strings.EqualFold(fd.Name, s.loadTimeColumn())
		if _, ok := linValue(fd.Type); lin && ok && !slices.Contains(run.keyCols, c) && c != run.seqCol {
			f.linCols = append(f.linCols, c)
			fields[c] = arrow.Field{Name: fd.Name, Type: arrow.Null, Nullable: true}
		}
	}
	f.spill = arrow.NewSchema(fields, nil)
	n := len(live.Fields())
	f.keyCol, f.loCol, f.hiCol, f.seqOut = n, n+1, n+2, n+3
	if s.cfg.SequenceBy != "" {
		f.seqText = sequenceText(snap.Schema().Field(s.cfg.SequenceBy).Type)
	}
	return f, nil
}

// toSpill is a live-form record in the spill form.
func (f *snapForm) toSpill(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := f.h.hash(rec, f.keyCols, f.hashCols, nil); err != nil {
		return nil, err
	}
	cols := append(slices.Clone(rec.Columns()), f.h.arrays()...)
	var nulls []arrow.Array
	for _, c := range f.linCols {
		cols[c] = array.NewNull(int(rec.NumRows()))
		nulls = append(nulls, cols[c])
	}
	defer arrowx.ReleaseArrays(nulls)
	if f.seqCol < 0 {
		cols = append(cols, array.NewNull(int(rec.NumRows())))
	} else {
		seq := array.NewInt64Builder(memory.DefaultAllocator)
		seq.Reserve(int(rec.NumRows()))
		for i := range int(rec.NumRows()) {
			if v, ok := seqValue(rec.Column(f.seqCol), i); ok {
				seq.Append(v)
			} else {
				seq.AppendNull()
			}
		}
		cols = append(cols, seq.NewArray())
		seq.Release()
	}
	out := array.NewRecordBatch(f.spill, cols, rec.NumRows())
	arrowx.ReleaseArrays(cols[len(rec.Columns()):])
	return out, nil
}

// noteLineage keeps the lineage values of file fi from a live-form record of it.
func (f *snapForm) noteLineage(fi int64, rec arrow.RecordBatch) {
	if len(f.linCols) == 0 || rec.NumRows() == 0 || f.lineage[fi] != nil {
		return
	}
	for _, c := range f.linCols {
		f.lineage[fi] = append(f.lineage[fi], array.NewSlice(rec.Column(c), 0, 1))
	}
}

// linValue appends a lineage column's one value to a builder of its type (ok false: a
// type the spill form keeps as it is).
func linValue(t arrow.DataType) (func(b array.Builder, a arrow.Array), bool) {
	switch t.ID() {
	case arrow.STRING:
		return func(b array.Builder, a arrow.Array) { b.(*array.StringBuilder).Append(a.(*array.String).Value(0)) }, true
	case arrow.TIMESTAMP:
		return func(b array.Builder, a arrow.Array) {
			b.(*array.TimestampBuilder).Append(a.(*array.Timestamp).Value(0))
		}, true
	}
	return nil, false
}

// source is the MERGE source rows keep of a record of either form: a spilled one's
// lineage columns are its files' values.
func (f *snapForm) sourceRows(ctx context.Context, rec arrow.RecordBatch, keep []int32, spilled bool) (arrow.RecordBatch, error) {
	if !spilled || len(f.linCols) == 0 {
		src := array.NewRecordBatch(f.source, rec.Columns()[:f.nsource], rec.NumRows())
		defer src.Release()
		return arrowx.GatherRows(ctx, src, keep)
	}
	var idx []int
	var fields []arrow.Field
	for c := range f.nsource {
		if !slices.Contains(f.linCols, c) {
			idx, fields = append(idx, c), append(fields, f.source.Field(c))
		}
	}
	cols := make([]arrow.Array, len(idx))
	for i, c := range idx {
		cols[i] = rec.Column(c)
	}
	part := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	g, err := arrowx.GatherRows(ctx, part, keep)
	part.Release()
	if err != nil {
		return nil, err
	}
	defer g.Release()
	files := rec.Column(f.fileCol).(*array.Int64)
	out := make([]arrow.Array, f.nsource)
	defer func() { arrowx.ReleaseArrays(out) }()
	for i, c := range idx {
		out[c] = g.Column(i)
		out[c].Retain()
	}
	for j, c := range f.linCols {
		appendOne, _ := linValue(f.source.Field(c).Type)
		b := array.NewBuilder(memory.DefaultAllocator, f.source.Field(c).Type)
		b.Reserve(len(keep))
		for _, r := range keep {
			vals := f.lineage[files.Value(int(r))]
			if vals == nil || vals[j].IsNull(0) {
				b.AppendNull()
				continue
			}
			appendOne(b, vals[j])
		}
		out[c] = b.NewArray()
		b.Release()
	}
	return array.NewRecordBatch(f.source, out, int64(len(keep))), nil
}

// fileOf is the file (its index in the run) of a record's rows.
func (f *snapForm) fileOf(rec arrow.RecordBatch) int64 {
	return rec.Column(f.fileCol).(*array.Int64).Value(0)
}

// keyText is the key of row i of rec as the user wrote it.
func (f *snapForm) keyText(rec arrow.RecordBatch, i int) string {
	return keyText(rec, f.keyCols, i)
}

// snapHolder is the live pass of a snapshot ingest: pass 1 running (on the live scan of
// the table), then pass 2 weighing each record as it comes.
type snapHolder struct {
	f      *snapForm
	files  []*sourceFile
	target *keyed.Target
	run    *keyed.Run
	pass1  *tablePass
	st     *snapState
	// keptShare is the share of the rows weighed before the hand-over that changed
	// (and so were kept), when enough were weighed to tell (shareKnown).
	keptShare  float64
	shareKnown bool
}

var _ keyed.Holder = (*snapHolder)(nil)

// state is pass 2's state, once pass 1 is done.
func (h *snapHolder) state() (*snapState, error) {
	if h.st == nil {
		if h.pass1 == nil {
			return nil, errTableKeysGone
		}
		t, err := h.pass1.wait()
		if err != nil {
			return nil, err
		}
		h.st = newSnapState(h.f, h.files, t)
	}
	return h.st, nil
}

func (h *snapHolder) Add(ctx context.Context, rec arrow.RecordBatch) error {
	st, err := h.state()
	if err != nil {
		return err
	}
	return st.addLive(ctx, rec)
}

func (h *snapHolder) Held() int64 {
	if h.st == nil {
		return 0
	}
	return h.st.held()
}

// HandOver sets aside the table's keys (the target side) and what pass 2 weighed.
func (h *snapHolder) HandOver(ctx context.Context, b *keyed.Batch) error {
	if h.pass1 == nil {
		return nil // (the table's keys set aside from the start: nothing held)
	}
	st, err := h.state()
	if err != nil {
		return err
	}
	dir, err := h.run.Dir()
	if err != nil {
		return err
	}
	if err := st.table.handOver(ctx, h.target, dir); err != nil {
		return err
	}
	if st.weighed >= 1<<12 {
		h.keptShare, h.shareKnown = float64(st.keptRows)/float64(st.weighed), true
	}
	err = st.handOver(ctx, b)
	h.st = nil
	return err
}

// loadSnapshot runs a snapshot ingest of files.
func (s *Ingest) loadSnapshot(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, files []*sourceFile, loadTime time.Time, res *Result) error {
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	kr, end := env.keyedRun(s.cfg.MemoryBudget)
	defer end()
	if len(snap.Files()) == 0 && s.cfg.SequenceBy == "" {
		return s.loadFirstSnapshot(ctx, env, kr, decl, tbl, snap, files, loadTime, res)
	}
	data := s.dataColumns(snap.Schema())
	form, err := s.newSnapForm(snap, data)
	if err != nil {
		return err
	}
	target := s.snapshotTarget(snap, data)
	live := &snapHolder{f: form, files: files, target: target, run: kr}
	batch := kr.NewBatch(live, keyed.BatchOptions{Keys: []int{form.keyCol}, EncodedKey: true, Form: form.toSpill, NoFilter: true, Join: true, TwoAtOnce: true})
	readCtx := ctx                            // the decode's: stopped when setting the table aside fails
	waitTarget := func() error { return nil } // the table set aside
	if n, ok := snap.NumRecords(); ok && n*snapKeyCost > kr.Limit {
		// The table's keys alone do not fit: they are set aside, and the files' rows too,
		// the table on a goroutine of its own while the files are decoded (the passes
		// wait for it).
		dir, err := kr.Dir()
		if err != nil {
			return err
		}
		if err := batch.HandOver(ctx); err != nil {
			return err
		}
		sctx, cancel := context.WithCancel(ctx)
		g, gctx := errgroup.WithContext(sctx)
		g.Go(func() error { return target.Spill(gctx, dir, kr.Limit, nil) })
		readCtx, waitTarget = gctx, g.Wait
		defer g.Wait() // (before the run's spill files are removed)
		defer cancel() // (a run that fails stops the table's scan)
	} else {
		// Pass 2 starts decoding the files while pass 1 still scans the table; its first
		// record waits for pass 1's index.
		live.pass1 = s.startTable(ctx, target, data)
		defer live.pass1.cancel()
	}
	bad, err := s.readSnapshot(readCtx, env, snap, form, files, batch, live.pass1, loadTime, res)
	if err == nil {
		err = batch.Finish()
	}
	if err != nil && (readCtx.Err() == nil || ctx.Err() != nil) {
		return err // (its own error: the table's scan is stopped on the way out)
	}
	if terr := waitTarget(); terr != nil {
		return terr // (the decode stopped because the table could not be set aside: that is the error)
	}
	if err != nil {
		return err
	}
	noteHeld("snapshot", batch)
	names := fileNames(files)
	lineage := env.lineage()
	lineage.SourceFiles = names
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	mp, err := tbl.NewMergeInParts(delta.MergeOptions{
		On:       s.cfg.Keys,
		NullSafe: true,
		WhenMatched: []delta.MergeClause{
			{Cond: expr.Eq("source."+deleteColumn, true), Action: delta.MergeDelete},
			{Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
		Tx:             tx,
		Lineage:        lineage,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	sink, err := batch.Sink(keyed.SinkOptions{Merge: mp, Snap: snap, Source: form.source})
	if err != nil {
		return err
	}
	defer sink.Release()
	var problem error // the earliest row's problem of all passes
	var problemOrd, absent, tableKeys, top int64
	hasTop := false
	var mu sync.Mutex // (two passes at once)
	// A pass holds the table's keys of its ranges (their index, hashes and places), and
	// of the files' rows only those that change, with their new keys' state; the rest
	// it reads and lets go. The share that changes is twice what the rows weighed
	// before the hand-over say (at least an eighth), else a quarter (a daily extract
	// changes about a tenth). A pass is planned at half the working set: what it reads
	// back comes in as garbage the collector must keep within the soft memory limit
	// (keyed.HoldBudget), and a pass near the limit makes it run back to back (the
	// 4 M-row bench case: a tenth of its CPU); passes reading only their own ranges,
	// more of them cost little.
	share := 0.25
	if live.shareKnown {
		share = min(max(2*live.keptShare, 0.125), 1)
	}
	passes, err := batch.Passes(ctx, 0, target, func(bb, br, tb, tr int64) int64 {
		return 2 * (tr*snapKeyCost + tb/3 + int64(float64(bb)*share) + br*16)
	},
		func(ctx context.Context, p *keyed.Pass) error {
			st, err := s.snapshotPass(ctx, p, form, files, sink)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if st.firstErr != nil && (problem == nil || st.firstOrd < problemOrd) {
				problem, problemOrd = st.firstErr, st.firstOrd
			}
			absent, tableKeys = absent+st.absent, tableKeys+st.tableKeys
			if st.hasTop && (!hasTop || st.top > top) {
				top, hasTop = st.top, true
			}
			return nil
		})
	if err != nil {
		return err
	}
	if problem != nil {
		return problem
	}
	asOf, err := s.snapshotTime(snap, files, top, hasTop)
	if err != nil {
		return err
	}
	if err := s.checkDeleteShare(decl, files, absent, tableKeys); err != nil {
		return err
	}
	if err := s.checkDated(snap, files, absent, hasTop); err != nil {
		return err
	}
	if err := s.quarantine(ctx, env, files, bad, loadTime, res); err != nil {
		return err
	}
	setSnapshotTxns(tx, files, asOf)
	mr, err := sink.Commit(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	countMerge(res, decl, names, mr)
	if batch.Spilled() {
		res.Notes = append(res.Notes, fmt.Sprintf("%d rows of %d keys over the memory budget (%s): worked in %d passes over spill files",
			batch.Rows(), tableKeys, ByteSize(env.budget(s.cfg.MemoryBudget)), passes))
	}
	return nil
}

// readSnapshot decodes the files once into the batch (pass 2 in memory weighs each
// record as it comes), each row with its delete mark, its file and its order.
func (s *Ingest) readSnapshot(ctx context.Context, env *Env, snap *delta.Snapshot, f *snapForm, files []*sourceFile, batch *keyed.Batch, pass1 *tablePass, loadTime time.Time, res *Result) ([]*badRecord, error) {
	var pred expr.Predicate
	if s.cfg.DeleteWhen != "" {
		p, err := expr.Parse(s.cfg.DeleteWhen)
		if err != nil {
			return nil, fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		pred = p
	}
	if pass1 != nil {
		// The files are opened when pass 1 has read the table: their first records are
		// decoded on the core its last keys leave idle.
		select {
		case <-pass1.scanned:
		case <-pass1.done:
		}
	}
	var matcher *expr.Matcher
	var bad []*badRecord
	var ord int64
	for fi, file := range files {
		b, err := s.decodeFileWith(ctx, env, snap, file, loadTime, res, decodeExtras{columns: s.deleteColumns(), lines: true}, func(rec arrow.RecordBatch) error {
			if matcher == nil && pred != nil {
				var err error
				if matcher, err = expr.NewMatcher(pred, schemaOfRecord(rec)); err != nil {
					return fmt.Errorf("delete_when %q (a predicate over the source row): %w", s.cfg.DeleteWhen, err)
				}
			}
			marked, err := withDeleteMarks(rec, matcher)
			if err != nil {
				return fmt.Errorf("%s: %w", file.Name, err)
			}
			defer marked.Release()
			form := withRunColumns(marked, f.live, fi, ord)
			defer form.Release()
			f.noteLineage(int64(fi), form)
			ord += form.NumRows()
			return batch.Add(ctx, form)
		})
		bad = append(bad, b...)
		if err != nil {
			return nil, err
		}
	}
	return bad, nil
}

// snapshotPass runs passes 1 and 2 on the key ranges of a pass (in memory: weighed as
// the files were read) and gives their changes to the sink; the state it returns has
// the pass's earliest problem, if any (then nothing is given to the sink).
func (s *Ingest) snapshotPass(ctx context.Context, p *keyed.Pass, f *snapForm, files []*sourceFile, sink *keyed.Sink) (*snapState, error) {
	var st *snapState
	if h, ok := p.Live.(*snapHolder); ok {
		var err error
		if st, err = h.state(); err != nil {
			return nil, err
		}
		h.st, h.pass1 = nil, nil // (the table's keys go with this pass)
	} else {
		t, err := readTableKeys(ctx, p, f.seqCol >= 0)
		if err != nil {
			return nil, err
		}
		st = newSnapState(f, files, t)
		if err := p.EachBatch(ctx, st.addSpilled); err != nil {
			arrowx.ReleaseRecords(st.kept)
			return nil, err
		}
	}
	defer func() {
		arrowx.ReleaseRecords(st.kept)
		st.kept = nil
	}()
	if st.firstErr != nil {
		return st, nil
	}
	st.absent, st.tableKeys = st.table.absent(), int64(len(st.table.row))
	if err := st.giveMatched(ctx, sink); err != nil {
		return nil, err
	}
	return st, st.giveInserts(ctx, sink)
}

// absent is the number of the table's keys that pass 2 did not see in the files (those
// that delete_when marked are not counted).
func (t *snapTable) absent() int64 {
	var n int64
	for id := range t.row {
		if !t.side.keys[id].seen {
			n++
		}
	}
	return n
}

// giveMatched gives the sink a pass's updates (kept rows of table keys) and deletes
// (rows that only mark them: of the table's keys the files lack or delete, and of the
// rows of keys the table holds twice), matched by place.
func (st *snapState) giveMatched(ctx context.Context, sink *keyed.Sink) error {
	t := st.table
	var keep []int32
	var at, deletes []keyed.Place
	for id := range t.row {
		switch k := &t.side.keys[id]; {
		case !k.seen || k.del:
			deletes = append(deletes, t.place(id))
		case k.kept >= 0:
			keep, at = append(keep, k.kept), append(at, t.place(id))
		}
	}
	deletes = append(deletes, t.extra...)
	if len(keep)+len(deletes) == 0 {
		return nil
	}
	if len(keep) > 0 {
		src, err := keyed.GatherOne(ctx, st.kept, st.refs(keep))
		if err != nil {
			return err
		}
		err = sink.Matched(ctx, src, keyed.Rows{}, at)
		src.Release()
		if err != nil {
			return err
		}
	}
	if len(deletes) == 0 {
		return nil
	}
	del := deleteRows(sink.Source(), len(deletes))
	defer del.Release()
	return sink.Matched(ctx, del, keyed.Rows{}, deletes)
}

// giveInserts gives the sink a pass's new keys' kept rows, to insert in the order
// their keys came.
func (st *snapState) giveInserts(ctx context.Context, sink *keyed.Sink) error {
	var ins []int32
	var ords []int64
	for id, k := range st.fresh.keys {
		if !k.del && k.kept >= 0 {
			ins, ords = append(ins, k.kept), append(ords, st.freshOrd[id])
		}
	}
	if len(ins) == 0 {
		return nil
	}
	src, err := keyed.GatherOne(ctx, st.kept, st.refs(ins))
	if err != nil {
		return err
	}
	defer src.Release()
	return sink.Inserts(ctx, src, ords, nil)
}

// refs are where the kept rows idx (by their index among all kept rows) are.
func (st *snapState) refs(idx []int32) []keyed.Ref {
	starts := make([]int32, len(st.kept)+1)
	for i, r := range st.kept {
		starts[i+1] = starts[i] + int32(r.NumRows())
	}
	out := make([]keyed.Ref, len(idx))
	r := 0
	for i, k := range idx {
		if k < starts[r] || k >= starts[r+1] {
			r, _ = slices.BinarySearch(starts, k+1) // the first start past k
			r--
		}
		out[i] = keyed.Ref{Rec: int32(r), Row: k - starts[r]}
	}
	return out
}

func keyText(rec arrow.RecordBatch, keyCols []int, i int) string {
	parts := make([]string, len(keyCols))
	for j, c := range keyCols {
		if rec.Column(c).IsNull(i) {
			parts[j] = "NULL"
		} else {
			parts[j] = rec.Column(c).ValueStr(i)
		}
	}
	return strings.Join(parts, "|")
}

// deleteColumns are the file columns delete_when reads (the batch form carries them as
// strings when the table lacks them).
func (s *Ingest) deleteColumns() []string {
	if s.cfg.DeleteWhen == "" {
		return nil
	}
	p, err := expr.Parse(s.cfg.DeleteWhen)
	if err != nil {
		return nil
	}
	return expr.Columns(p)
}

// deleteRows is n source rows that only mark deletes: nulls, the delete mark true.
func deleteRows(sch *arrow.Schema, n int) arrow.RecordBatch {
	cols := make([]arrow.Array, sch.NumFields())
	for i, f := range sch.Fields() {
		if f.Name == deleteColumn {
			b := array.NewBooleanBuilder(memory.DefaultAllocator)
			for range n {
				b.Append(true)
			}
			cols[i] = b.NewArray()
			b.Release()
			continue
		}
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
	}
	rec := array.NewRecordBatch(sch, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}
