package jobs

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"

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
	// In memory, the log records are gathered ahead; over the budget one at a time.
	gatherAhead := logGatherAhead
	if a.stream {
		gatherAhead = 0
	}
	return b.logRecords(a.chunkRows(), gatherAhead, func(commit int64) bool { return a.recorded && commit <= a.last }, func(rec arrow.RecordBatch) error {
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
// repeats of an event of the same key. The keys are put in the log's order (keysByHash)
// with the only event of each key that has one; a chunk's columns are then gathered
// column by column from the event arrays (each loop's loads independent of one
// another, so the processor waits on many cache misses at once).
func (b *scdBatch) logRecords(chunk, gatherAhead int, skip func(commit int64) bool, write func(arrow.RecordBatch) error) error {
	hashes, t1, t1at := b.eventDigests()
	order := b.keysByHash(skip)
	var rows []logRow
	var extra []loggedEvent // the events of keys with several, in the log's order
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
	g := logGather{b: b, hashes: hashes, t1: t1, t1at: t1at}
	ahead := &logChunks{g: &g, write: write, ahead: gatherAhead}
	defer ahead.flush(0) // (after an error: the records still gathered released)
	rows = make([]logRow, 0, min(chunk, len(order)))
	for _, k := range order {
		if k.ev >= 0 {
			rows = append(rows, logRow{h: k.h, id: k.id, ev: k.ev})
		} else {
			evs = evs[:0]
			for ev := b.head[k.id]; ev >= 0; ev = b.evPrev[ev] {
				evs = append(evs, ev)
			}
			key := b.keys.Key(k.id)
			many = many[:0]
			for _, ev := range evs {
				if f := fact(ev); b.evCommit == nil || !skip(f.commit) {
					many = append(many, loggedEvent{key: key, keyHash: k.h, eventFact: f})
				}
			}
			sortLogged(many)
			many = slices.CompactFunc(many, func(x, y loggedEvent) bool { return x.eventFact == y.eventFact })
			for _, e := range many {
				extra = append(extra, e)
				rows = append(rows, logRow{h: k.h, id: k.id, ev: int32(-len(extra))})
			}
		}
		if len(rows) >= chunk {
			if err := ahead.add(rows, extra); err != nil {
				return err
			}
			rows, extra = make([]logRow, 0, chunk), nil
		}
	}
	if len(rows) > 0 {
		if err := ahead.add(rows, extra); err != nil {
			return err
		}
	}
	return ahead.flush(0)
}

// logChunks gathers a batch's log records on goroutines of their own (ahead at once,
// besides the one written) while the records before them are written, in order: the
// gather, which waits on memory, is most of the log's work.
type logChunks struct {
	g       *logGather
	write   func(arrow.RecordBatch) error
	ahead   int
	pending []chan arrow.RecordBatch
	err     error
}

// logGatherAhead is how many log records a batch in memory gathers at once.
const logGatherAhead = 2

// add starts gathering the record of rows (and extra, which it keeps: the caller makes
// new ones), and writes the records before the last c.ahead.
func (c *logChunks) add(rows []logRow, extra []loggedEvent) error {
	ch := make(chan arrow.RecordBatch, 1)
	go func() { ch <- c.g.record(rows, extra) }()
	c.pending = append(c.pending, ch)
	return c.flush(c.ahead)
}

// flush writes the records gathered, in order, until keep are left (after an error,
// it only releases them).
func (c *logChunks) flush(keep int) error {
	for len(c.pending) > keep {
		rec := <-c.pending[0]
		c.pending = c.pending[1:]
		if c.err == nil {
			c.err = c.write(rec)
		}
		rec.Release()
	}
	return c.err
}

// keyHashed is a key of the batch with its keyed.Hash and its only event (-1: it has
// several, or none to log).
type keyHashed struct {
	h      int64
	id, ev int32
}

// keysByHash is the batch's keys in the log's order (keyed.Hash, then the key's bytes),
// without the keys whose only event skip says (by its source version). The keys are
// read in id order; a radix pass on the hash's upper bits places them in small buckets
// that are sorted by the full order.
func (b *scdBatch) keysByHash(skip func(commit int64) bool) []keyHashed {
	n := len(b.head)
	in := make([]keyHashed, 0, n)
	for id := range n {
		ev := int32(-1)
		if b.count[id] == 1 {
			ev = b.head[id]
			if b.evCommit != nil && skip(b.evCommit[ev]) {
				continue
			}
		}
		in = append(in, keyHashed{keyed.Hash(b.keys.Key(int32(id))), int32(id), ev})
	}
	compare := func(x, y keyHashed) int {
		if c := cmp.Compare(x.h, y.h); c != 0 {
			return c
		}
		return bytes.Compare(b.keys.Key(x.id), b.keys.Key(y.id))
	}
	if len(in) < radixMinKeys {
		slices.SortFunc(in, compare)
		return in
	}
	bits := min(bitsFor(len(in))-2, 16) // about four keys a bucket
	shift := 64 - bits
	bucket := func(h int64) uint64 { return (uint64(h) ^ 1<<63) >> shift }
	ends := make([]int32, 1<<bits+1)
	for _, k := range in {
		ends[bucket(k.h)+1]++
	}
	for i := 1; i < len(ends); i++ {
		ends[i] += ends[i-1]
	}
	out := make([]keyHashed, len(in))
	next := slices.Clone(ends[:len(ends)-1])
	for _, k := range in {
		d := bucket(k.h)
		out[next[d]] = k
		next[d]++
	}
	for d := range len(ends) - 1 {
		if lo, hi := ends[d], ends[d+1]; hi-lo > 1 {
			slices.SortFunc(out[lo:hi], compare)
		}
	}
	return out
}

// radixMinKeys is the fewest keys keysByHash places by radix (a test lowers it).
var radixMinKeys = 1 << 12

// bitsFor is the number of bits of n.
func bitsFor(n int) int { return bits.Len(uint(n)) }

// logRow is a row of a log record: a key (its hash and id) and its event ev, or, when
// ev < 0, the event extra[-1-ev] (of a key with several).
type logRow struct {
	h      int64
	id, ev int32
}

// logGather builds log records from logRows.
type logGather struct {
	b      *scdBatch
	hashes []uint64
	t1     []byte
	t1at   []int32
}

// record is the rows as one log record (loggedRecord's columns), gathered column by
// column into Go slices that the record's arrays use as they are.
func (g *logGather) record(rows []logRow, extra []loggedEvent) arrow.RecordBatch {
	b := g.b
	n := len(rows)
	hash, seq, rowHash, commit, rowSeq := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	del, phys, rowHashOK, type1OK := make([]bool, n), make([]bool, n), make([]bool, n), make([]bool, n)
	keyEnd, type1End := make([]int32, n+1), make([]int32, n+1)
	ex := func(r logRow) *loggedEvent { return &extra[-1-r.ev] }
	for i, r := range rows {
		hash[i] = r.h
		if r.ev >= 0 {
			seq[i] = b.evSeq[r.ev]
		} else {
			seq[i] = ex(r).seq
		}
	}
	for i, r := range rows {
		if r.ev >= 0 {
			del[i] = b.evDel[r.ev]
		} else {
			del[i] = ex(r).del
		}
		rowHashOK[i] = !del[i]
	}
	for i, r := range rows {
		if r.ev >= 0 {
			rowHash[i] = int64(g.hashes[r.ev])
		} else {
			rowHash[i] = int64(ex(r).hash)
		}
	}
	if b.evCommit != nil {
		for i, r := range rows {
			if r.ev >= 0 {
				commit[i], phys[i], rowSeq[i] = b.evCommit[r.ev], b.evPhys[r.ev], b.evRowSeq[r.ev]
			} else {
				e := ex(r)
				commit[i], phys[i], rowSeq[i] = e.commit, e.phys, e.rowSeq
			}
		}
	} else {
		for i, r := range rows {
			if r.ev < 0 {
				e := ex(r)
				commit[i], phys[i], rowSeq[i] = e.commit, e.phys, e.rowSeq
			}
		}
	}
	// Key bytes: their lengths first, then the bytes.
	for i, r := range rows {
		keyEnd[i+1] = keyEnd[i] + int32(len(b.keys.Key(r.id)))
	}
	key := make([]byte, 0, keyEnd[n])
	for _, r := range rows {
		key = append(key, b.keys.Key(r.id)...)
	}
	// Type 1 values (of upserts only).
	for i, r := range rows {
		l := int32(0)
		if !del[i] {
			if r.ev >= 0 {
				l = g.t1at[r.ev+1] - g.t1at[r.ev]
			} else {
				l = int32(len(ex(r).type1))
			}
		}
		type1OK[i] = l > 0
		type1End[i+1] = type1End[i] + l
	}
	type1 := make([]byte, 0, type1End[n])
	for i, r := range rows {
		if !type1OK[i] {
			continue
		}
		if r.ev >= 0 {
			type1 = append(type1, g.t1[g.t1at[r.ev]:g.t1at[r.ev+1]]...)
		} else {
			type1 = append(type1, ex(r).type1...)
		}
	}
	return logRecord(n, hash, key, keyEnd, seq, del, phys, rowHash, rowHashOK, commit, rowSeq, phys, type1, type1End, type1OK)
}

// eventDigests reads, in the order of the records, what the log keeps of each upsert's
// row: the hash of its data columns (rowHash) and its type 1 values (recordType1), the
// latter back to back in t1 (event ev's at t1[at[ev]:at[ev+1]]). A large batch is read
// in parts, one per core.
func (b *scdBatch) eventDigests() (hashes []uint64, t1 []byte, at []int32) {
	n := len(b.evSeq)
	hashes, at = make([]uint64, n), make([]int32, n+1)
	parts := min(runtime.GOMAXPROCS(0), max(1, n/digestPartEvents))
	t1s := make([][]byte, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { t1s[p] = b.digestEvents(p*n/parts, (p+1)*n/parts, hashes, at) })
	}
	wg.Wait()
	if parts == 1 {
		return hashes, t1s[0], at
	}
	// Each part's type 1 values start at 0 in its own buffer: put them back to back.
	size := 0
	for _, t := range t1s {
		size += len(t)
	}
	t1 = make([]byte, 0, size)
	for p, t := range t1s {
		lo, hi := p*n/parts, (p+1)*n/parts
		if base := int32(len(t1)); base > 0 {
			for ev := lo + 1; ev <= hi; ev++ {
				at[ev] += base
			}
		}
		t1 = append(t1, t...)
	}
	return hashes, t1, at
}

// digestPartEvents is the fewest events of each part of eventDigests (a test lowers it).
var digestPartEvents = 64 << 10

// digestEvents is eventDigests' work on the events [lo, hi): their hashes, and their
// type 1 values in a buffer of the part's own (at[ev+1] relative to its start).
func (b *scdBatch) digestEvents(lo, hi int, hashes []uint64, at []int32) (t1 []byte) {
	var buf []byte
	vals := make([]any, len(b.l.spec.type1))
	for ev := lo; ev < hi; ev++ {
		at[ev+1] = int32(len(t1))
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
				t1 = make([]byte, 0, (hi-lo)*(len(first)+len(first)/4+1))
			}
		}
		t1, _ = appendType1(t1, vals, b.l, b.recs[r], b.cols[r], row)
		at[ev+1] = int32(len(t1))
	}
	return t1
}

// logRecord is a log record (loggedRecord's columns) of n rows made of the slices as
// they are.
func logRecord(n int, hash []int64, key []byte, keyEnd []int32, seq []int64, del, phys []bool, rowHash []int64, rowHashOK []bool,
	commit, rowSeq []int64, rowSeqOK []bool, type1 []byte, type1End []int32, type1OK []bool) arrow.RecordBatch {
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
	cols := []arrow.Array{ints(hash, nil), binary(key, keyEnd, nil), ints(seq, nil), bools(del), bools(phys),
		ints(rowHash, rowHashOK), ints(commit, nil), ints(rowSeq, rowSeqOK), binary(type1, type1End, type1OK)}
	schema, _ := delta.ArrowSchema(eventLogSchema)
	rec := array.NewRecordBatch(schema, cols, int64(n))
	arrowx.ReleaseArrays(cols)
	return rec
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
