package jobs

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
)

// The columnar front of scd2_merge. A change batch is mostly rows that change nothing
// (the source repeats a key's current values), so the stage keeps the batch as the Arrow
// records it read, indexes its events by key, and streams the dimension once: a key
// whose only event repeats its current row at or after that row's valid_from is settled
// right there by comparing Arrow values, without building Go rows. Only the keys that
// may change (new, changed, deleted, late, several events) become scdEvent/scdVersion
// rows for the fold (scd2_core.go). Memory grows with the batch and the versions of the
// keys it changes, not with the dimension.

// scdBatch is one batch of source events, indexed by key.
type scdBatch struct {
	l    *scdLayout
	recs []arrow.RecordBatch
	cols [][]int // per record: the column of each dimension data column

	keys  *keyindex.Index // encoded key → key id (ids in first-seen order)
	block keyindex.Block  // the keys of the record being indexed or probed
	head  []int32         // per key: its last event (events chain backwards through prev)
	count []int32         // per key: number of events

	evRec, evRow, evPrev []int32
	evSeq                []int64
	evDel                []bool
	// evCommit and evPhys, for a change feed source: the source version of each event
	// and whether it deletes the source row (a delete in the change feed), and evRowSeq
	// the sequence_by value such a delete's row carries.
	evCommit, evRowSeq []int64
	evPhys             []bool
	expect             int // events expected (reserve), to size the key arena

	// dimRows are the dimension rows the scan kept for the MERGE (see dimRow), and
	// heldData their data columns.
	dimRows  []arrow.RecordBatch
	heldData []int

	// limit, when positive, is the memory the batch may hold (heldBytes counts its
	// records); over it, the records read so far and all that follow go to spill (made
	// by spillTo), see take.
	limit     int64
	heldBytes int64
	spillTo   func() (*scdSpill, error)
	spill     *scdSpill
}

func newSCDBatch(l *scdLayout) *scdBatch {
	return &scdBatch{l: l, keys: keyindex.New(1 << 10)}
}

// Release frees the retained source records.
func (b *scdBatch) Release() {
	for _, r := range b.recs {
		r.Release()
	}
	for _, r := range b.dimRows {
		r.Release()
	}
	b.recs, b.dimRows = nil, nil
}

// appendKey encodes the key columns of row i (null-safe, type-normalised as colValue
// does, so a source int32 key matches a dimension int64 key); appendRowKey encodes the
// same values of a Go row alike.
func appendKey(buf []byte, rec arrow.RecordBatch, cols []int, keys []int, i int) ([]byte, error) {
	for _, k := range keys {
		arr := rec.Column(cols[k])
		if arr.IsNull(i) {
			buf = append(buf, 0)
			continue
		}
		switch a := arr.(type) {
		case *array.String:
			v := a.Value(i)
			buf = append(buf, 1)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
			continue
		case *array.Int64:
			buf = append(buf, 2)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(a.Value(i)))
			continue
		}
		v, err := colValue(arr, i)
		if err != nil {
			return nil, err
		}
		buf = appendKeyValue(buf, v)
	}
	return buf, nil
}

// appendKeys appends to block the keys (cols) of rows from..to, as appendKey encodes
// them: a single string key without nulls straight from its offsets and bytes.
func appendKeys(block *keyindex.Block, rec arrow.RecordBatch, cols []int, from, to int) error {
	if a, ok := rec.Column(cols[0]).(*array.String); ok && len(cols) == 1 && a.NullN() == 0 {
		offs, data := a.ValueOffsets(), a.ValueBytes()
		base := offs[0]
		block.Buf = slices.Grow(block.Buf, int(offs[to]-offs[from])+(to-from)*(1+binary.MaxVarintLen64))
		for i := from; i < to; i++ {
			v := data[offs[i]-base : offs[i+1]-base]
			block.Buf = append(binary.AppendUvarint(append(block.Buf, 1), uint64(len(v))), v...)
			block.End()
		}
		return nil
	}
	all := allColumns(len(cols))
	for i := from; i < to; i++ {
		var err error
		if block.Buf, err = appendKey(block.Buf, rec, cols, all, i); err != nil {
			return err
		}
		block.End()
	}
	return nil
}

// appendRowKey encodes the values of row at cols as appendKey does.
func appendRowKey(buf []byte, row []any, cols []int) []byte {
	for _, c := range cols {
		buf = appendKeyValue(buf, row[c])
	}
	return buf
}

func appendKeyValue(buf []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		buf = append(buf, 0)
	case string:
		buf = append(buf, 1)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	case int64:
		buf = append(buf, 2)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	case float64:
		buf = append(buf, 3)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
	case bool:
		buf = append(buf, 4, byte(boolInt(v)))
	default:
		s := fmt.Sprint(v)
		buf = append(buf, 5)
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	return buf
}

// rowHash is the hash of a Go row's data columns the event log records (the same as of
// the Arrow row it was read from).
func rowHash(row []any) uint64 {
	return xxhash.Sum64(appendRowKey(nil, row, allColumns(len(row))))
}

// addRows indexes the rows of the batch's last record as events at seqs (deletes where
// dels is true; with their source versions and physical deletes, from a change feed).
func (b *scdBatch) addRows(seqs []int64, dels []bool, cr *changeEvents) error {
	r := len(b.recs) - 1
	kb := &b.block
	kb.Reset()
	var err error
	for i := range seqs {
		if kb.Buf, err = appendKey(kb.Buf, b.recs[r], b.cols[r], b.l.spec.keys, i); err != nil {
			return err
		}
		kb.End()
	}
	if len(seqs) > 0 && b.expect > len(seqs) && len(b.evSeq) == 0 {
		// The first block tells the keys' length: make room for all of them at once.
		b.keys.Grow(len(kb.Buf) / len(seqs) * (b.expect + b.expect/8))
	}
	b.keys.AddBlock(kb)
	for i, id := range kb.IDs {
		if int(id) == len(b.head) {
			b.head = append(b.head, -1)
			b.count = append(b.count, 0)
		}
		ev := int32(len(b.evSeq))
		b.evRec = append(b.evRec, int32(r))
		b.evRow = append(b.evRow, int32(i))
		b.evSeq = append(b.evSeq, seqs[i])
		b.evDel = append(b.evDel, dels[i])
		if cr != nil {
			b.evCommit = append(b.evCommit, cr.commits[i])
			b.evRowSeq = append(b.evRowSeq, cr.rowSeqs[i])
			b.evPhys = append(b.evPhys, cr.phys[i])
		}
		b.evPrev = append(b.evPrev, b.head[id])
		b.head[id] = ev
		b.count[id]++
	}
	return nil
}

// dropIndex frees the key index and the events, keeping the records and where each
// event is in them (quick inserts read their rows from there).
func (b *scdBatch) dropIndex() {
	b.keys, b.block = nil, keyindex.Block{}
	b.head, b.count = nil, nil
	b.evPrev, b.evSeq, b.evDel, b.evCommit, b.evRowSeq, b.evPhys = nil, nil, nil, nil, nil, nil
}

// reserve makes room for n more events (and keys).
func (b *scdBatch) reserve(n int) {
	if b.keys.Len() == 0 {
		b.keys = keyindex.New(n)
		b.expect = n
	}
	b.head = slices.Grow(b.head, n)
	b.count = slices.Grow(b.count, n)
	b.evRec = slices.Grow(b.evRec, n)
	b.evRow = slices.Grow(b.evRow, n)
	b.evPrev = slices.Grow(b.evPrev, n)
	b.evSeq = slices.Grow(b.evSeq, n)
	b.evDel = slices.Grow(b.evDel, n)
}

// keep retains rec as the batch's newest record.
func (b *scdBatch) keep(rec arrow.RecordBatch) error {
	cols, err := sourceColumns(rec.Schema(), b.l)
	if err != nil {
		return err
	}
	rec.Retain()
	b.recs = append(b.recs, rec)
	b.cols = append(b.cols, cols)
	return nil
}

// row returns event ev's data row.
func (b *scdBatch) row(ev int32) ([]any, error) {
	r := b.evRec[ev]
	return sourceRow(b.recs[r], b.l, int(b.evRow[ev]), b.cols[r])
}

// events returns key id's events as fold input.
func (b *scdBatch) events(id int32) ([]scdEvent, error) {
	out := make([]scdEvent, 0, b.count[id])
	for ev := b.head[id]; ev >= 0; ev = b.evPrev[ev] {
		row, err := b.row(ev)
		if err != nil {
			return nil, err
		}
		e := scdEvent{seq: b.evSeq[ev], delete: b.evDel[ev], row: row}
		if b.evCommit != nil {
			e.commit, e.phys, e.rowSeq = b.evCommit[ev], b.evPhys[ev], b.evRowSeq[ev]
		}
		out = append(out, e)
	}
	// The chain runs newest first; the fold sorts stably by sequence, so restore the
	// order the events were read in.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// eventSource says how source rows become events: the dimension's layout, the
// sequence_by column ("" for the source commit timestamp, or for a snapshot source its
// version's time) and the delete_when predicate (nil: none), bound to the source schema.
type eventSource struct {
	l          *scdLayout
	sequenceBy string
	// timeSeq: sequences are times (sequence_by is a timestamp or a date, or commit
	// times), so a snapshot load's recorded time (snapshotAsOfID) is one.
	timeSeq    bool
	deleteWhen *delta.Matcher
	// deleteCols are the columns delete_when and where read.
	deleteCols []string
	// where, when set, selects the source rows merged (admit); skipped counts the others.
	where   *delta.Matcher
	skipped int64
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

// readSnapshot makes every source row an upsert at its sequence_by value (default: the
// source's snapshot time, snapshotSourceTime), or a delete where delete_when holds.
func (b *scdBatch) readSnapshot(ctx context.Context, snap *delta.Snapshot, es *eventSource, res *Result) error {
	schema := snap.Schema()
	cols := make([]string, 0, len(b.l.data)+1)
	for _, f := range b.l.data {
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
	if n, ok := snap.NumRecords(); ok && n > int64(b.keys.Len()) {
		if err := b.expectRows(ctx, n); err != nil {
			return err
		}
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: cols, ReadAhead: true})
	if err != nil {
		return err
	}
	defer sc.Release()
	at := snapshotSourceTime(snap)
	var buf eventBufs
	version := snap.Version()
	for sc.Next() {
		cols, err := sourceColumns(sc.RecordBatch().Schema(), b.l)
		if err != nil {
			return err
		}
		rec, err := es.admit(ctx, sc.RecordBatch(), cols, func(int) int64 { return version })
		if err != nil {
			return err
		}
		err = b.takeSnapshotRecord(ctx, rec, at, sequenceBy, es, res, &buf)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return sc.Err()
}

// eventBufs hold a record's sequences and delete marks, reused from record to record
// (addRows copies them).
type eventBufs struct {
	seqs []int64
	dels []bool
}

// takeSnapshotRecord is readSnapshot's work on one record of the source (the rows admit
// let through); seqs and dels are reused from record to record.
func (b *scdBatch) takeSnapshotRecord(ctx context.Context, rec arrow.RecordBatch, at int64, sequenceBy string, es *eventSource, res *Result, buf *eventBufs) error {
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
				return nullSequence(rec, b.l, i, sequenceBy)
			}
		}
	}
	if err := b.take(ctx, rec, seqs, dels, nil); err != nil {
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
func (b *scdBatch) readChanges(ctx context.Context, src *delta.Table, from, to int64, es *eventSource, res *Result) error {
	return eachChange(ctx, src, from, to, es, func(rec arrow.RecordBatch, _ []int, ev *changeEvents) error {
		return b.take(ctx, rec, ev.seqs, ev.dels, ev)
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
// placePhysicalDeletes places it by commit order); pre-images are skipped.
func eachChange(ctx context.Context, src *delta.Table, from, to int64, es *eventSource,
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

// maxSeq is the highest sequence in the batch; withPhys counts the deletes of source
// rows too (without sequence_by their sequence is their commit time, like the others').
func (b *scdBatch) maxSeq(withPhys bool) (int64, bool) {
	top, found := int64(0), false
	for ev, seq := range b.evSeq {
		if (withPhys || b.evPhys == nil || !b.evPhys[ev]) && (!found || seq > top) {
			top, found = seq, true
		}
	}
	return top, found
}

// dataIndex is the position of the data column name, or -1.
func (l *scdLayout) dataIndex(name string) int {
	for i, f := range l.data {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}

// snapshotSourceTime is the time a snapshot source's rows are as of, without a
// sequence_by: the time its last snapshot load recorded, else its version's commit time.
func snapshotSourceTime(snap *delta.Snapshot) int64 {
	if t, ok := snap.TxnVersion(snapshotAsOfID); ok {
		return t
	}
	return snap.Timestamp().UnixMicro()
}
