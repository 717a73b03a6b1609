package jobs

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
	w := newLogBuilder(chunk)
	defer w.release()
	if n := len(b.head); n > 0 {
		sample := min(n, 1024)
		keyBytes := 0
		for id := range sample {
			keyBytes += len(b.keys.Key(int32(id)))
		}
		w.keyBytes, w.type1Bytes = keyBytes/sample+1, len(t1)/max(len(b.evSeq), 1)+1
		w.reserve()
	}
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
		if s, err := recordType1(b.l, b.recs[r], b.cols[r], row); err == nil {
			t1 = append(t1, s...)
		}
		at[ev+1] = int32(len(t1))
	}
	return hashes, t1, at
}

// logBuilder builds log records (loggedRecord's columns) row by row.
type logBuilder struct {
	hash, seq, rowHash, commit, rowSeq *array.Int64Builder
	key, type1                         *array.BinaryBuilder
	del, phys                          *array.BooleanBuilder
	rows, chunk                        int
	keyBytes, type1Bytes               int // a row's, about (to make room for a chunk's)
}

func newLogBuilder(chunk int) *logBuilder {
	mem := memory.DefaultAllocator
	w := &logBuilder{hash: array.NewInt64Builder(mem), seq: array.NewInt64Builder(mem), rowHash: array.NewInt64Builder(mem),
		commit: array.NewInt64Builder(mem), rowSeq: array.NewInt64Builder(mem),
		key: array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), type1: array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary),
		del: array.NewBooleanBuilder(mem), phys: array.NewBooleanBuilder(mem), chunk: chunk}
	w.reserve()
	return w
}

func (w *logBuilder) reserve() {
	for _, b := range []array.Builder{w.hash, w.seq, w.rowHash, w.commit, w.rowSeq, w.key, w.type1, w.del, w.phys} {
		b.Reserve(w.chunk + 16)
	}
	w.key.ReserveData((w.chunk + 16) * w.keyBytes)
	w.type1.ReserveData((w.chunk + 16) * w.type1Bytes)
}

// add appends an event (type1 empty: none).
func (w *logBuilder) add(keyHash int64, key []byte, seq int64, del, phys bool, hash uint64, commit, rowSeq int64, type1 []byte) {
	w.hash.Append(keyHash)
	w.key.Append(key)
	w.seq.Append(seq)
	w.del.Append(del)
	w.phys.Append(phys)
	if del {
		w.rowHash.AppendNull()
	} else {
		w.rowHash.Append(int64(hash))
	}
	w.commit.Append(commit)
	if phys {
		w.rowSeq.Append(rowSeq)
	} else {
		w.rowSeq.AppendNull()
	}
	if del || len(type1) == 0 {
		w.type1.AppendNull()
	} else {
		w.type1.Append(type1)
	}
	w.rows++
}

// flush hands the rows added to write as one record.
func (w *logBuilder) flush(write func(arrow.RecordBatch) error) error {
	if w.rows == 0 {
		return nil
	}
	cols := []arrow.Array{w.hash.NewArray(), w.key.NewArray(), w.seq.NewArray(), w.del.NewArray(), w.phys.NewArray(),
		w.rowHash.NewArray(), w.commit.NewArray(), w.rowSeq.NewArray(), w.type1.NewArray()}
	schema, _ := delta.ArrowSchema(eventLogSchema)
	rec := array.NewRecordBatch(schema, cols, int64(w.rows))
	arrowx.ReleaseArrays(cols)
	w.rows = 0
	w.reserve()
	err := write(rec)
	rec.Release()
	return err
}

func (w *logBuilder) release() {
	for _, b := range []array.Builder{w.hash, w.seq, w.rowHash, w.commit, w.rowSeq, w.key, w.type1, w.del, w.phys} {
		b.Release()
	}
}
