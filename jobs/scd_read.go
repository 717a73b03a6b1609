package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// How a merge (scd2_merge, scd1_merge) reads its source, once: a change feed (the
// versions after the last merged) or a snapshot, each row admitted (where, key not
// NULL) and made an event (a sequence, whether it deletes, and from a change feed its
// source version and whether it deletes the source row itself). The events go to the
// run's keyed batch in its batch form: the dimension's data columns (as the source has
// them), then the event columns (scdEventFields).

// eventSource says how source rows become events: the dimension's layout, the
// sequence_by column ("" for the source commit timestamp, or for a snapshot source its
// version's time) and the delete_when predicate (nil: none), bound to the source schema.
type eventSource struct {
	l          *scdLayout
	sequenceBy string
	// timeSeq: sequences are times (sequence_by is a timestamp or a date, or commit
	// times), so a snapshot load's recorded time (snapshotAsOfID) is one.
	timeSeq    bool
	deleteWhen *expr.Matcher
	// deleteCols are the columns delete_when, where and the row checks read.
	deleteCols []string
	// where, when set, selects the source rows merged (admit); skipped counts the others.
	where   *expr.Matcher
	skipped int64
	// checks are the stage's row checks (nil without), judging the upserts admit lets
	// through before they become events; name is the source table, for their messages.
	checks *rowChecks
	name   string
	// quarantined are the events the checks set aside for the quarantine table.
	quarantined []quarantinedEvent
}

// withChecks makes es judge its upserts by the row checks rc (nil: none) of a stage
// reading the source table name, reading the columns they need.
func (es *eventSource) withChecks(rc *rowChecks, name string) {
	if rc == nil {
		return
	}
	es.checks, es.name = rc, name
	es.deleteCols = append(es.deleteCols, rc.columns()...)
}

// upserts marks the rows of rec that are upserts (nil: all are): not change feed delete
// rows, not rows delete_when marks.
func (es *eventSource) upserts(rec arrow.RecordBatch) ([]bool, error) {
	marked, err := es.deletesMarked(rec)
	if err != nil {
		return nil, err
	}
	var types *array.String
	if idx := rec.Schema().FieldIndices(delta.ChangeTypeColumn); len(idx) == 1 {
		types, _ = rec.Column(idx[0]).(*array.String)
	}
	if marked == nil && types == nil {
		return nil, nil
	}
	out := make([]bool, rec.NumRows())
	for i := range out {
		out[i] = !(marked != nil && marked[i]) && !(types != nil && types.IsValid(i) && types.Value(i) == delta.ChangeDelete)
	}
	return out, nil
}

// deletesMarked returns, per row of rec, whether delete_when marks it (nil: none do).
func (es *eventSource) deletesMarked(rec arrow.RecordBatch) ([]bool, error) {
	if es.deleteWhen == nil {
		return nil, nil
	}
	m, err := es.deleteWhen.Match(rec)
	if err != nil {
		return nil, fmt.Errorf("delete_when: %w", err)
	}
	return m, nil
}

// The event columns of a batch-form record, after the data columns: the sequence,
// whether it deletes, whether it deletes the source row itself (a change feed delete),
// that row's sequence_by value, the source version (0 for a snapshot source), and the
// event's order in the batch.
var scdEventFields = []arrow.Field{
	{Name: "_orchestrator_seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_orchestrator_del", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "_orchestrator_phys", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "_orchestrator_rowseq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_orchestrator_commit", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_orchestrator_ord", Type: arrow.PrimitiveTypes.Int64},
}

// eventCols are the event columns of a batch-form record with ndata data columns.
type eventCols struct {
	seq, rowSeq, commit, ord *array.Int64
	del, phys                *array.Boolean
}

func eventColumns(rec arrow.RecordBatch, ndata int) eventCols {
	return eventCols{
		seq: rec.Column(ndata).(*array.Int64), del: rec.Column(ndata + 1).(*array.Boolean),
		phys: rec.Column(ndata + 2).(*array.Boolean), rowSeq: rec.Column(ndata + 3).(*array.Int64),
		commit: rec.Column(ndata + 4).(*array.Int64), ord: rec.Column(ndata + 5).(*array.Int64),
	}
}

// eventReader makes batch-form records of source records and hands them to add; it
// numbers the events (their order) and keeps the batch's highest sequence (the
// deletes of source rows counted when withPhys: without sequence_by they carry their
// commit time like the others).
type eventReader struct {
	l        *scdLayout
	add      func(ctx context.Context, rec arrow.RecordBatch) error
	withPhys bool
	n        int64
	top      int64
	hasTop   bool
	keys     []int // the key columns of a batch-form record
}

func newEventReader(l *scdLayout, withPhys bool, add func(ctx context.Context, rec arrow.RecordBatch) error) *eventReader {
	return &eventReader{l: l, add: add, withPhys: withPhys, keys: l.spec.keys}
}

// take hands rec's rows (cols: the column of each dimension data column) as events at
// seqs (deletes where dels; with their source versions and physical deletes when cr is
// set) to the batch.
func (r *eventReader) take(ctx context.Context, rec arrow.RecordBatch, cols []int, seqs []int64, dels []bool, cr *changeEvents) error {
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	l := r.l
	fields := make([]arrow.Field, 0, len(cols)+len(scdEventFields))
	arrs := make([]arrow.Array, 0, cap(fields))
	for j, c := range cols {
		f := rec.Schema().Field(c)
		f.Name, f.Nullable = l.data[j].Name, true
		fields = append(fields, f)
		arrs = append(arrs, rec.Column(c))
	}
	fields = append(fields, scdEventFields...)
	mem := memory.DefaultAllocator
	seqB, delB, physB, rowSeqB, commitB, ordB := array.NewInt64Builder(mem), array.NewBooleanBuilder(mem), array.NewBooleanBuilder(mem),
		array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	builders := []array.Builder{seqB, delB, physB, rowSeqB, commitB, ordB}
	defer func() {
		for _, b := range builders {
			b.Release()
		}
	}()
	seqB.AppendValues(seqs, nil)
	delB.AppendValues(dels, nil)
	ordB.Reserve(n)
	for i := range n {
		ordB.UnsafeAppend(r.n + int64(i))
	}
	if cr != nil {
		physB.AppendValues(cr.phys, nil)
		rowSeqB.AppendValues(cr.rowSeqs, nil)
		commitB.AppendValues(cr.commits, nil)
	} else {
		physB.AppendValues(make([]bool, n), nil)
		zeros := make([]int64, n)
		rowSeqB.AppendValues(zeros, nil)
		commitB.AppendValues(zeros, nil)
	}
	for i, seq := range seqs {
		phys := cr != nil && cr.phys[i]
		if !phys && !dels[i] && l.spec.intervals {
			if err := l.spec.checkSequence(seq); err != nil {
				return fmt.Errorf("key %s: %w", keyText(rec, l.keyColumns(cols), i), err)
			}
		}
		if (r.withPhys || !phys) && (!r.hasTop || seq > r.top) {
			r.top, r.hasTop = seq, true
		}
	}
	for _, b := range builders {
		a := b.NewArray()
		defer a.Release()
		arrs = append(arrs, a)
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(n))
	defer out.Release()
	r.n += int64(n)
	return r.add(ctx, out)
}

// mergeOf names a merge stage for readMergeBatch.
type mergeOf struct {
	kind                  Kind
	target, source, appID string
	sourceChanges         bool
	// rows, when set, is told about how many events the batch will have, when the
	// source says, before they are read.
	rows func(n int64)
}

// readMergeBatch reads a merge's source events into batch (live, its pass while it
// holds them) through rd: the change feed after the last version merged (last, when
// merged) with the event log, or the snapshot. It returns the event log (nil for a
// snapshot source).
func readMergeBatch(ctx context.Context, env *Env, m mergeOf, f *flow, batch *keyed.Batch, live *scdBatch, rd *eventReader, es *eventSource, merged bool, last int64, res *Result) (*eventLog, error) {
	latest := f.srcSnap.Version()
	var log *eventLog
	var err error
	if m.sourceChanges {
		from := last + 1
		if !merged {
			if from, err = f.src.ChangeDataFeedStart(ctx); err != nil {
				return nil, fmt.Errorf("source %s: %w", f.srcDecl.Name, err)
			}
		}
		res.ChangesRead = []ChangeRange{{Table: f.srcDecl.Name, After: from - 1, Through: latest}}
		if log, err = openMergeLog(ctx, env, m.kind, m.target, m.source, m.appID, f.src, es, merged, last, res); err != nil {
			return nil, err
		}
		// The change feed's files say about how many rows it has: room is made for
		// them at once (for as many as the budget holds).
		err = rd.readChanges(ctx, f.src, from, latest, es, func(n int64) {
			if batch.Live() != nil {
				live.reserve(int(min(n, batch.Limit()/live.cost)))
			}
			if m.rows != nil {
				m.rows(n)
			}
		}, res)
	} else {
		// A snapshot says how many rows it has: room is made for them at once, or, when
		// they would not fit, the batch goes to spill files from the start.
		err = rd.readSnapshot(ctx, f.srcSnap, es, func(ctx context.Context, n int64) error {
			if n*live.cost > batch.Limit() {
				return batch.HandOver(ctx)
			}
			live.reserve(int(n))
			if m.rows != nil {
				m.rows(n)
			}
			return nil
		}, res)
	}
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", f.srcDecl.Name, err)
	}
	if err := batch.Finish(); err != nil {
		return nil, err
	}
	es.noteSkipped(res)
	return log, nil
}

// readSnapshot makes every source row an upsert at its sequence_by value (default: the
// source's snapshot time, snapshotSourceTime), or a delete where delete_when holds.
// expect is told the number of rows first, when the snapshot knows it.
func (r *eventReader) readSnapshot(ctx context.Context, snap *delta.Snapshot, es *eventSource, expect func(ctx context.Context, n int64) error, res *Result) error {
	schema := snap.Schema()
	cols := make([]string, 0, len(r.l.data)+1)
	for _, f := range r.l.data {
		if schema.Field(f.Name) == nil {
			return fmt.Errorf("source has no column %s, which the dimension needs", f.Name)
		}
		cols = append(cols, f.Name)
	}
	sequenceBy := es.sequenceBy
	if sequenceBy != "" {
		if schema.Field(sequenceBy) == nil {
			return fmt.Errorf("source has no sequence_by column %s", sequenceBy)
		}
	}
	for _, c := range append([]string{sequenceBy}, es.deleteCols...) {
		if c != "" && !slices.ContainsFunc(cols, func(x string) bool { return strings.EqualFold(x, c) }) {
			cols = append(cols, c)
		}
	}
	if n, ok := snap.NumRecords(); ok && expect != nil {
		if err := expect(ctx, n); err != nil {
			return err
		}
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: cols, ReadAhead: true})
	if err != nil {
		return err
	}
	defer sc.Release()
	openedSource(snap.Table().Root())
	at := snapshotSourceTime(snap)
	var buf eventBufs
	version := snap.Version()
	for sc.Next() {
		cols, err := sourceColumns(sc.RecordBatch().Schema(), r.l)
		if err != nil {
			return err
		}
		rec, err := es.admit(ctx, sc.RecordBatch(), cols, func(int) int64 { return version })
		if err != nil {
			return err
		}
		err = r.takeSnapshotRecord(ctx, rec, cols, at, sequenceBy, es, res, &buf)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return sc.Err()
}

// eventBufs hold a record's sequences and delete marks, reused from record to record.
type eventBufs struct {
	seqs []int64
	dels []bool
}

// takeSnapshotRecord is readSnapshot's work on one record of the source (the rows admit
// let through).
func (r *eventReader) takeSnapshotRecord(ctx context.Context, rec arrow.RecordBatch, cols []int, at int64, sequenceBy string, es *eventSource, res *Result, buf *eventBufs) error {
	var seqCol arrow.Array
	if sequenceBy != "" {
		idx, err := seqColumn(rec.Schema(), sequenceBy)
		if err != nil {
			return err
		}
		seqCol = rec.Column(idx)
	}
	marked, err := es.deletesMarked(rec)
	if err != nil {
		return err
	}
	n := int(rec.NumRows())
	buf.seqs, buf.dels = slices.Grow(buf.seqs[:0], n)[:n], slices.Grow(buf.dels[:0], n)[:n]
	seqs, dels := buf.seqs, buf.dels
	clear(dels)
	if marked != nil {
		copy(dels, marked)
	}
	for i := range seqs {
		seqs[i] = at
		if seqCol != nil {
			var ok bool
			if seqs[i], ok = seqValue(seqCol, i); !ok {
				return nullSequence(rec, r.l, i, sequenceBy)
			}
		}
	}
	if err := r.take(ctx, rec, cols, seqs, dels, nil); err != nil {
		return err
	}
	res.RowsRead += rec.NumRows()
	return nil
}

func nullSequence(rec arrow.RecordBatch, l *scdLayout, i int, name string) error {
	cols, err := sourceColumns(rec.Schema(), l)
	if err != nil {
		return err
	}
	row, err := sourceRow(rec, l, i, cols)
	if err != nil {
		return err
	}
	return fmt.Errorf("key %s: sequence_by column %s is null", keyString(row, l.spec.keys), name)
}

// readChanges turns the source's change feed over [from, to] into events (eachChange).
func (r *eventReader) readChanges(ctx context.Context, src *delta.Table, from, to int64, es *eventSource, expect func(n int64), res *Result) error {
	openedSource(src.Root())
	return eachChange(ctx, src, from, to, es, expect, func(rec arrow.RecordBatch, cols []int, ev *changeEvents) error {
		return r.take(ctx, rec, cols, ev.seqs, ev.dels, ev)
	}, res)
}

// changeEvents are the events of one change feed record: per row its sequence, whether
// it is a delete, whether that deletes the source row itself (and the sequence_by value
// of the row deleted), and its source version.
type changeEvents struct {
	seqs    []int64
	dels    []bool
	phys    []bool
	rowSeqs []int64
	commits []int64
}

// eachChange reads the source's change feed over [from, to] and calls change for each
// record with the column of each dimension data column and its rows' events: inserts
// and update post-images are upserts at their sequence_by value (default the commit
// time), or deletes where delete_when holds; a delete row (the source row deleted) is a
// delete at its commit time, or at its sequence_by value when later (with sequence_by,
// placePhysicalDeletes places it by commit order); pre-images are skipped. expect, when
// set, is told first about how many rows the feed has at most, when its files say.
func eachChange(ctx context.Context, src *delta.Table, from, to int64, es *eventSource, expect func(n int64),
	change func(rec arrow.RecordBatch, cols []int, ev *changeEvents) error, res *Result) error {
	if from > to {
		return nil
	}
	l := es.l
	rd, err := src.Changes(ctx, delta.ChangesOptions{
		StartVersion: &from, EndVersion: &to,
		Types: []string{delta.ChangeInsert, delta.ChangeUpdatePostimage, delta.ChangeDelete},
	})
	if err != nil {
		return err
	}
	defer rd.Release()
	if n, ok := rd.RowsHint(); ok && expect != nil && n > 0 {
		expect(n)
	}
	seqName := or(es.sequenceBy, delta.CommitTimestampColumn)
	for rd.Next() {
		cols, err := sourceColumns(rd.RecordBatch().Schema(), l)
		if err != nil {
			return err
		}
		raw := rd.RecordBatch()
		versions := raw.Column(raw.Schema().FieldIndices(delta.CommitVersionColumn)[0]).(*array.Int64)
		rec, err := es.admit(ctx, raw, cols, func(i int) int64 { return versions.Value(i) })
		if err != nil {
			return err
		}
		err = eachChangeRecord(rd, rec, cols, seqName, es, change, res)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return rd.Err()
}

// eachChangeRecord is eachChange's work on one record of the change feed (rd's, with
// the rows admit let through).
func eachChangeRecord(rd *delta.ChangesReader, rec arrow.RecordBatch, cols []int, seqName string, es *eventSource,
	change func(rec arrow.RecordBatch, cols []int, ev *changeEvents) error, res *Result) error {
	l := es.l
	seqIdx, err := seqColumn(rec.Schema(), seqName)
	if err != nil {
		return err
	}
	commitIdx, err := seqColumn(rec.Schema(), delta.CommitTimestampColumn)
	if err != nil {
		return err
	}
	marked, err := es.deletesMarked(rec)
	if err != nil {
		return err
	}
	field := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	types := field(delta.ChangeTypeColumn).(*array.String)
	versions, _ := field(delta.CommitVersionColumn).(*array.Int64)
	seqCol, commitCol := rec.Column(seqIdx), rec.Column(commitIdx)
	n := int(rec.NumRows())
	ev := &changeEvents{seqs: make([]int64, n), dels: make([]bool, n), phys: make([]bool, n), rowSeqs: make([]int64, n), commits: make([]int64, n)}
	for i := range n {
		seq, ok := seqValue(seqCol, i)
		if !ok {
			row, err := sourceRow(rec, l, i, cols)
			if err != nil {
				return err
			}
			return fmt.Errorf("key %s: sequence_by column %s is null", keyString(row, l.spec.keys), seqName)
		}
		phys := types.Value(i) == delta.ChangeDelete
		ev.rowSeqs[i] = seq
		asOf, snapshot := int64(0), false
		if es.timeSeq && versions != nil {
			asOf, snapshot = rd.CommitTxn(versions.Value(i), snapshotAsOfID)
		}
		switch at, ok := seqValue(commitCol, i); {
		case snapshot && (phys || es.sequenceBy == ""):
			// A snapshot load's deletes (keys its extract lacked), and without a
			// sequence_by its rows, are as of the snapshot's time.
			seq, phys = asOf, false
		case phys && ok && at > seq:
			// A deleted row carries its last values; the delete happened at its commit.
			seq = at
		}
		ev.seqs[i], ev.phys[i] = seq, phys
		ev.dels[i] = types.Value(i) == delta.ChangeDelete || marked != nil && marked[i]
		if versions != nil {
			ev.commits[i] = versions.Value(i)
		}
	}
	if err := change(rec, cols, ev); err != nil {
		return err
	}
	res.RowsRead += rec.NumRows()
	return nil
}

// snapshotSourceTime is the time a snapshot source's rows are as of, without a
// sequence_by: the time its last snapshot load recorded, else its version's commit time.
func snapshotSourceTime(snap *delta.Snapshot) int64 {
	if t, ok := snap.TxnVersion(snapshotAsOfID); ok {
		return t
	}
	return snap.Timestamp().UnixMicro()
}

// openedSource is told of each opening of a stage's input (a source file decoded, a
// source table's change feed or snapshot read): a test counts them.
var openedSource = func(name string) {}
