package jobs

import (
	"context"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// The columnar front of scd2_merge (and scd1_merge's batch). A change batch is mostly
// rows that change nothing (the source repeats a key's current values), so the stage
// keeps the batch as the Arrow records it read, indexes its events by key, and streams
// the dimension once: a key whose only event repeats its current row at or after that
// row's valid_from is settled right there by comparing Arrow values, without building
// Go rows. Only the keys that may change (new, changed, deleted, late, several events)
// become scdEvent/scdVersion rows for the fold (scd2_core.go). Memory grows with the
// batch and the versions of the keys it changes, not with the dimension.

// scdBatch is the events of a pass (the live pass: the batch as it is read), indexed by
// key: the run's keyed.Holder while the batch fits its budget.
type scdBatch struct {
	l          *scdLayout
	changeFeed bool // the events carry source versions and physical deletes
	// lateUpTo is the highest sequence at which an event may be late (the watermark of
	// what was merged before: see foldChanges); set before the dimension is scanned.
	lateUpTo int64
	// cost is what an event costs besides its record, whose bytes count byteFactor
	// times (what a pass builds of it).
	cost, byteFactor int64
	recs             []arrow.RecordBatch // the events' data columns
	cols             [][]int             // per record: the column of each dimension data column

	keys   *keyindex.Index // encoded key → key id (ids in first-seen order)
	block  keyindex.Block  // the keys of the record being indexed or probed
	head   []int32         // per key: its last event (events chain backwards through prev)
	count  []int32         // per key: number of events
	keyOrd []int64         // per key: the order of its first event in the batch

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

	heldBytes int64 // the records' bytes
}

// scdEventCost is what an event costs in memory at a merge's peak besides its data
// columns: the batch's index and event arrays, the dimension rows and versions the scan
// keeps for it, its changes, its log row and its MERGE source row; an event of a
// snapshot source (no source version, no log) costs scdSnapshotEventCost. Measured
// (BenchmarkHeldRowCost: the heap a merge in memory takes per event, 100 k to 400 k
// events of a full daily extract): about 470 and 175 bytes with the data columns.
const (
	scdEventCost         = 430
	scdSnapshotEventCost = 150
)

func newSCDBatch(l *scdLayout, changeFeed bool) *scdBatch {
	cost := int64(scdEventCost)
	if !changeFeed {
		cost = scdSnapshotEventCost
	}
	return &scdBatch{l: l, changeFeed: changeFeed, cost: cost, byteFactor: 1, keys: keyindex.New(1 << 10)}
}

var _ keyed.Holder = (*scdBatch)(nil)

// Add indexes the events of a batch-form record (scd_read.go).
func (b *scdBatch) Add(_ context.Context, rec arrow.RecordBatch) error {
	n := len(b.l.data)
	data := array.NewRecordBatch(arrow.NewSchema(rec.Schema().Fields()[:n], nil), rec.Columns()[:n], rec.NumRows())
	b.recs = append(b.recs, data)
	b.cols = append(b.cols, allColumns(n))
	b.heldBytes += keyed.RecordBytes(data)
	return b.addRows(eventColumns(rec, n))
}

// Held is what the batch holds: its records and, per event, its cost.
func (b *scdBatch) Held() int64 { return b.heldBytes*b.byteFactor + int64(len(b.evSeq))*b.cost }

// HandOver sets aside the events held, in the order they came (a live batch: event ev
// is the batch's ev-th), and lets go of them.
func (b *scdBatch) HandOver(ctx context.Context, to *keyed.Batch) error {
	defer b.Release()
	off := 0
	for _, rec := range b.recs {
		n := int(rec.NumRows())
		ords := make([]int64, n)
		for i := range ords {
			ords[i] = int64(off + i)
		}
		phys, rowSeq, commit := make([]bool, n), make([]int64, n), make([]int64, n)
		if b.changeFeed {
			phys, rowSeq, commit = b.evPhys[off:off+n], b.evRowSeq[off:off+n], b.evCommit[off:off+n]
		}
		mem := memory.DefaultAllocator
		sb, db, pb := array.NewInt64Builder(mem), array.NewBooleanBuilder(mem), array.NewBooleanBuilder(mem)
		rb, cb := array.NewInt64Builder(mem), array.NewInt64Builder(mem)
		sb.AppendValues(b.evSeq[off:off+n], nil)
		db.AppendValues(b.evDel[off:off+n], nil)
		pb.AppendValues(phys, nil)
		rb.AppendValues(rowSeq, nil)
		cb.AppendValues(commit, nil)
		cols := slices.Clone(rec.Columns())
		for _, bl := range []array.Builder{sb, db, pb, rb, cb} {
			cols = append(cols, bl.NewArray())
			bl.Release()
		}
		cols = append(cols, keyed.Int64s(ords))
		out := array.NewRecordBatch(arrow.NewSchema(append(slices.Clone(rec.Schema().Fields()), scdEventFields...), nil), cols, int64(n))
		for _, c := range cols[len(rec.Columns()):] {
			c.Release()
		}
		err := to.Spill(ctx, out)
		out.Release()
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Release frees the records the batch holds.
func (b *scdBatch) Release() {
	arrowx.ReleaseRecords(b.recs)
	arrowx.ReleaseRecords(b.dimRows)
	b.recs, b.dimRows, b.cols = nil, nil, nil
	b.dropIndex()
	b.evRec, b.evRow, b.keyOrd = nil, nil, nil
}

// rowHash is the hash of a Go row's data columns the event log records (the same as of
// the Arrow row it was read from).
func rowHash(row []any) uint64 {
	return xxhash.Sum64(keyed.AppendRowKey(nil, row, allColumns(len(row))))
}

// keyColumns are the key columns of a record whose dimension data columns are cols.
func (l *scdLayout) keyColumns(cols []int) []int {
	out := make([]int, len(l.spec.keys))
	for j, k := range l.spec.keys {
		out[j] = cols[k]
	}
	return out
}

// addRows indexes the rows of the batch's last record as events (ec: its event columns).
func (b *scdBatch) addRows(ec eventCols) error {
	r := len(b.recs) - 1
	n := int(b.recs[r].NumRows())
	kb := &b.block
	kb.Reset()
	if err := keyed.AppendKeys(kb, b.recs[r], b.l.keyColumns(b.cols[r]), 0, n); err != nil {
		return err
	}
	if n > 0 && b.expect > n && len(b.evSeq) == 0 {
		// The first block tells the keys' length: make room for all of them at once.
		b.keys.Grow(len(kb.Buf) / n * (b.expect + b.expect/8))
	}
	b.keys.AddBlock(kb)
	seqs, ords := ec.seq.Int64Values(), ec.ord.Int64Values()
	for i, id := range kb.IDs {
		if int(id) == len(b.head) {
			b.head = append(b.head, -1)
			b.count = append(b.count, 0)
			b.keyOrd = append(b.keyOrd, ords[i])
		}
		ev := int32(len(b.evSeq))
		b.evRec = append(b.evRec, int32(r))
		b.evRow = append(b.evRow, int32(i))
		b.evSeq = append(b.evSeq, seqs[i])
		b.evDel = append(b.evDel, ec.del.Value(i))
		if b.changeFeed {
			b.evCommit = append(b.evCommit, ec.commit.Value(i))
			b.evRowSeq = append(b.evRowSeq, ec.rowSeq.Value(i))
			b.evPhys = append(b.evPhys, ec.phys.Value(i))
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
	b.keyOrd = slices.Grow(b.keyOrd, n)
	b.evRec = slices.Grow(b.evRec, n)
	b.evRow = slices.Grow(b.evRow, n)
	b.evPrev = slices.Grow(b.evPrev, n)
	b.evSeq = slices.Grow(b.evSeq, n)
	b.evDel = slices.Grow(b.evDel, n)
	if b.changeFeed {
		b.evCommit = slices.Grow(b.evCommit, n)
		b.evRowSeq = slices.Grow(b.evRowSeq, n)
		b.evPhys = slices.Grow(b.evPhys, n)
	}
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
		if b.changeFeed {
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

// dataIndex is the position of the data column name, or -1.
func (l *scdLayout) dataIndex(name string) int {
	for i, f := range l.data {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}
