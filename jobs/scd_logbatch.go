package jobs

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// A pass's events written to the event log straight from the batch: what each event
// needs of its row (the hash of its data columns, its type 1 values) is read in the
// order of the records, then the events are written key after key in the log's order
// (sortLogged), into the log record's columns, a chunk at a time.

// addBatch writes the events of b, the batch of the key hash ranges [lo, hi), as add
// writes events (the merged files' events of those ranges with them).
func (a *logAppender) addBatch(ctx context.Context, b *scdBatch, lo, hi int) error {
	if len(a.merge) > 0 {
		return a.add(ctx, b.logged(), lo, hi)
	}
	return b.logRecords(a.chunkRows(), func(commit int64) bool { return a.recorded && commit <= a.last }, func(rec arrow.RecordBatch) error {
		if err := a.open(); err != nil { // (a pass with nothing new to log writes no file)
			return err
		}
		if err := a.w.Write(ctx, rec); err != nil {
			return fmt.Errorf("event log %s: %w", a.l.path, err)
		}
		return nil
	})
}

// open starts the log file.
func (a *logAppender) open() error {
	if a.w != nil {
		return nil
	}
	w, err := a.l.snap.NewDataWriter(delta.WriteOptions{RowGroupSize: 1 << 20, StreamFiles: a.stream})
	if err != nil {
		return err
	}
	a.w = w
	return nil
}

// chunkRows is the most events written at once.
func (a *logAppender) chunkRows() int {
	if a.chunk <= 0 {
		return 1 << 16
	}
	return a.chunk
}

// logRecords hands write the batch's events as log records of at most chunk rows, in
// the log's order, without those skip says (by their source version) and without
// repeats of an event of the same key.
func (b *scdBatch) logRecords(chunk int, skip func(commit int64) bool, write func(arrow.RecordBatch) error) error {
	hashes, t1, t1at := b.eventDigests()
	type hashed struct {
		h  int64
		id int32
	}
	ids := make([]hashed, len(b.head))
	for id := range b.head {
		ids[id] = hashed{keyed.Hash(b.keys.Key(int32(id))), int32(id)}
	}
	slices.SortFunc(ids, func(x, y hashed) int {
		if c := cmp.Compare(x.h, y.h); c != 0 {
			return c
		}
		return bytes.Compare(b.keys.Key(x.id), b.keys.Key(y.id))
	})
	w := &logBuilder{chunk: chunk, room: min(chunk, len(b.evSeq))}
	if n := len(b.head); n > 0 {
		sample := min(n, 1024)
		keyBytes := 0
		for id := range sample {
			keyBytes += len(b.keys.Key(int32(id)))
		}
		w.keyBytes, w.type1Bytes = keyBytes/sample+1, len(t1)/max(len(b.evSeq), 1)+1
	}
	w.reserve()
	var evs []int32
	var many []loggedEvent
	fact := func(ev int32) eventFact {
		f := eventFact{seq: b.evSeq[ev], del: b.evDel[ev]}
		if b.evCommit != nil {
			f.commit, f.phys, f.rowSeq = b.evCommit[ev], b.evPhys[ev], b.evRowSeq[ev]
		}
		if !f.del {
			f.hash = hashes[ev]
			f.type1 = string(t1[t1at[ev]:t1at[ev+1]])
		}
		return f
	}
	for _, k := range ids {
		key := b.keys.Key(k.id)
		evs = evs[:0]
		for ev := b.head[k.id]; ev >= 0; ev = b.evPrev[ev] {
			evs = append(evs, ev)
		}
		if len(evs) == 1 {
			ev := evs[0]
			if b.evCommit != nil && skip(b.evCommit[ev]) {
				continue
			}
			w.add(k.h, key, b.evSeq[ev], b.evDel[ev], b.evCommit != nil && b.evPhys[ev], hashes[ev], b.commitOf(ev), b.rowSeqOf(ev), t1[t1at[ev]:t1at[ev+1]])
		} else {
			many = many[:0]
			for _, ev := range evs {
				if f := fact(ev); b.evCommit == nil || !skip(f.commit) {
					many = append(many, loggedEvent{key: key, keyHash: k.h, eventFact: f})
				}
			}
			sortLogged(many)
			many = slices.CompactFunc(many, func(x, y loggedEvent) bool { return x.eventFact == y.eventFact })
			for _, e := range many {
				w.add(k.h, key, e.seq, e.del, e.phys, e.hash, e.commit, e.rowSeq, []byte(e.type1))
			}
		}
		if w.rows >= chunk {
			if err := w.flush(write); err != nil {
				return err
			}
		}
	}
	return w.flush(write)
}

func (b *scdBatch) commitOf(ev int32) int64 {
	if b.evCommit == nil {
		return 0
	}
	return b.evCommit[ev]
}

func (b *scdBatch) rowSeqOf(ev int32) int64 {
	if b.evCommit == nil {
		return 0
	}
	return b.evRowSeq[ev]
}

// eventDigests reads, in the order of the records, what the log keeps of each upsert's
// row: the hash of its data columns (rowHash) and its type 1 values (recordType1), the
// latter back to back in t1 (event ev's at t1[at[ev]:at[ev+1]]).
func (b *scdBatch) eventDigests() (hashes []uint64, t1 []byte, at []int32) {
	n := len(b.evSeq)
	hashes, at = make([]uint64, n), make([]int32, n+1)
	var buf []byte
	vals := make([]any, len(b.l.spec.type1))
	for ev := range n {
		at[ev+1] = at[ev]
		if b.evDel[ev] {
			continue
		}
		r, row := b.evRec[ev], int(b.evRow[ev])
		var err error
		if buf, err = keyed.AppendKey(buf[:0], b.recs[r], b.cols[r], row); err == nil {
			hashes[ev] = xxhash.Sum64(buf)
		}
		if t1 == nil && len(b.l.spec.type1) > 0 {
			// (room for every event's, by the first event's)
			if first, _ := appendType1(nil, vals, b.l, b.recs[r], b.cols[r], row); len(first) > 0 {
				t1 = make([]byte, 0, n*(len(first)+len(first)/4+1))
			}
		}
		t1, _ = appendType1(t1, vals, b.l, b.recs[r], b.cols[r], row)
		at[ev+1] = int32(len(t1))
	}
	return hashes, t1, at
}

// logBuilder builds log records (loggedRecord's columns) row by row, into Go slices made
// afresh for each record, which the record's arrays then use as they are (an append per
// value to an Arrow builder costs a call per value).
type logBuilder struct {
	hash, seq, rowHash, commit, rowSeq []int64
	del, phys, rowHashOK, rowSeqOK     []bool
	key, type1                         []byte
	keyEnd, type1End                   []int32
	type1OK                            []bool
	rows, chunk                        int
	room                               int // rows a record is made with room for (up to a chunk and a key's events)
	keyBytes, type1Bytes               int // a row's, about (to make room for a chunk's)
}

// reserve makes the slices of the next record, with room for its rows.
func (w *logBuilder) reserve() {
	n := w.room + 16
	for _, v := range []*[]int64{&w.hash, &w.seq, &w.rowHash, &w.commit, &w.rowSeq} {
		*v = make([]int64, 0, n)
	}
	for _, v := range []*[]bool{&w.del, &w.phys, &w.rowHashOK, &w.rowSeqOK, &w.type1OK} {
		*v = make([]bool, 0, n)
	}
	w.keyEnd, w.type1End = make([]int32, 1, n+1), make([]int32, 1, n+1)
	w.key, w.type1 = make([]byte, 0, n*w.keyBytes), make([]byte, 0, n*w.type1Bytes)
}

// add appends an event (type1 empty: none).
func (w *logBuilder) add(keyHash int64, key []byte, seq int64, del, phys bool, hash uint64, commit, rowSeq int64, type1 []byte) {
	w.hash = append(w.hash, keyHash)
	w.key = append(w.key, key...)
	w.keyEnd = append(w.keyEnd, int32(len(w.key)))
	w.seq = append(w.seq, seq)
	w.del = append(w.del, del)
	w.phys = append(w.phys, phys)
	w.rowHash = append(w.rowHash, int64(hash))
	w.rowHashOK = append(w.rowHashOK, !del)
	w.commit = append(w.commit, commit)
	w.rowSeq = append(w.rowSeq, rowSeq)
	w.rowSeqOK = append(w.rowSeqOK, phys)
	t1 := !del && len(type1) > 0
	if t1 {
		w.type1 = append(w.type1, type1...)
	}
	w.type1End = append(w.type1End, int32(len(w.type1)))
	w.type1OK = append(w.type1OK, t1)
	w.rows++
}

// flush hands the rows added to write as one record.
func (w *logBuilder) flush(write func(arrow.RecordBatch) error) error {
	if w.rows == 0 {
		return nil
	}
	n := w.rows
	ints := func(v []int64, valid []bool) arrow.Array {
		bm, nulls := bitmap(valid)
		return array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, n,
			[]*memory.Buffer{bm, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(v))}, nil, nulls, 0))
	}
	bools := func(v []bool) arrow.Array {
		bm, _ := bitmap(v)
		return array.NewBooleanData(array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, bm}, nil, 0, 0))
	}
	binary := func(data []byte, ends []int32, valid []bool) arrow.Array {
		bm, nulls := bitmap(valid)
		return array.NewBinaryData(array.NewData(arrow.BinaryTypes.Binary, n,
			[]*memory.Buffer{bm, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(ends)), memory.NewBufferBytes(data)}, nil, nulls, 0))
	}
	cols := []arrow.Array{ints(w.hash, nil), binary(w.key, w.keyEnd, nil), ints(w.seq, nil), bools(w.del), bools(w.phys),
		ints(w.rowHash, w.rowHashOK), ints(w.commit, nil), ints(w.rowSeq, w.rowSeqOK), binary(w.type1, w.type1End, w.type1OK)}
	schema, _ := delta.ArrowSchema(eventLogSchema)
	rec := array.NewRecordBatch(schema, cols, int64(n))
	arrowx.ReleaseArrays(cols)
	w.rows = 0
	w.reserve()
	err := write(rec)
	rec.Release()
	return err
}

// bitmap is v as an Arrow bitmap with the number of its unset bits (nil v: none, no
// bitmap).
func bitmap(v []bool) (*memory.Buffer, int) {
	if v == nil {
		return nil, 0
	}
	bm := make([]byte, bitutil.BytesForBits(int64(len(v))))
	unset := 0
	for i, ok := range v {
		if ok {
			bitutil.SetBit(bm, i)
		} else {
			unset++
		}
	}
	return memory.NewBufferBytes(bm), unset
}
