package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Pass 2 of snapshot mode (ingest_snapshot.go): the decoded rows weighed against the
// table's keys, in memory as they are read (the live pass), or, over the budget, range
// by range from spill files.

// snapSide is pass 2's state for a set of keys (the table's, or the new ones): per key
// (keys) whether the files have it, the standing row (its place, whether it is a
// delete, and with sequence_by its sequence and hash), and which kept row carries it
// (-1: none, the table's row stands). A key's state is one struct, so that weighing a
// row touches one cache line: 16 bytes a key without sequence_by.
type snapSide struct {
	withSeq bool
	keys    []snapKey
	seq     []int64
	hash    []dataHash
}

// snapKey is one key's state in a snapSide.
type snapKey struct {
	file      int32
	line      uint32 // saturates at 2^32-1 (shown as such in messages)
	kept      int32
	seen, del bool
}

// dataHash is the 128-bit hash of a row's data columns.
type dataHash struct{ lo, hi uint64 }

func (sd *snapSide) grow(n int) {
	k := n - len(sd.keys)
	if k <= 0 {
		return
	}
	sd.keys = slices.Grow(sd.keys, k)
	for range k {
		sd.keys = append(sd.keys, snapKey{kept: -1})
	}
	if sd.withSeq {
		sd.seq = append(sd.seq, make([]int64, k)...)
		sd.hash = append(sd.hash, make([]dataHash, k)...)
	}
}

// rowHashes is, per row of a record, its key (in Block, for a key index) and the 128-bit
// hash of its data columns (lo, hi); reused from record to record.
type rowHashes struct {
	keyindex.Block
	other  keyindex.Block // the second half's keys, before they join Block
	halves [2]rowHasher
	lo, hi []uint64
}

// hash fills h for rec, the two halves of a large record at once. With in set, it also
// looks the keys up there (Block.IDs).
func (h *rowHashes) hash(rec arrow.RecordBatch, keyCols, dataCols []int, in *keyindex.Index) error {
	n := int(rec.NumRows())
	h.lo, h.hi = slices.Grow(h.lo[:0], n)[:n], slices.Grow(h.hi[:0], n)[:n]
	half := n / 2
	if n < 4096 {
		half = n
	}
	var errOther error
	var wg sync.WaitGroup
	if half < n {
		arrowx.SettleNullCounts(rec.Columns()) // (both halves ask the columns for them)
		wg.Go(func() { errOther = h.part(&h.other, &h.halves[1], rec, keyCols, dataCols, half, n, in) })
	}
	err := h.part(&h.Block, &h.halves[0], rec, keyCols, dataCols, 0, half, in)
	wg.Wait()
	if err = errors.Join(err, errOther); err != nil {
		return err
	}
	if half < n {
		h.Append(&h.other)
	}
	return nil
}

func (h *rowHashes) part(block *keyindex.Block, rh *rowHasher, rec arrow.RecordBatch, keyCols, dataCols []int, from, to int, in *keyindex.Index) error {
	block.Reset()
	if err := keyed.AppendKeys(block, rec, keyCols, from, to); err != nil {
		return err
	}
	rh.reset(rec, dataCols)
	rh.hash(rec, from, to, h.lo, h.hi)
	if in != nil {
		in.LookupBlock(block)
	}
	return nil
}

// snapKeyCost is what a key costs pass 1 and pass 2 in memory (index, hashes, place,
// side), besides its bytes: a snapshot of 4 M rows into 4 M in memory peaks at about
// 170 bytes of RSS a key (bench/results), half of it the collector's room.
const snapKeyCost = 90

// snapState is pass 2 at work: the table's side, the new keys' side and index, and the
// rows kept so far.
type snapState struct {
	f          *snapForm
	files      []*sourceFile
	table      *snapTable
	fresh      *snapSide
	freshIndex *keyindex.Index
	freshOrd   []int64 // per new key: the order of its first row
	kept       []arrow.RecordBatch
	keptRows   int32
	keptBytes  int64
	weighed    int64     // rows weighed
	rows       rowHashes // the record at hand's, looked up in the table's index
	miss       keyindex.Block
	// In passes over spill files, a row's problem (a key twice, a null sequence) does
	// not stop the pass: the one of the earliest row is kept (firstOrd), so that the
	// run fails naming what a run in memory names, the first problem in file order.
	firstErr error
	firstOrd int64
	// top is the newest sequence_by value of the rows weighed (hasTop: one was).
	top    int64
	hasTop bool
	// absent and tableKeys count, once a pass is weighed, the table's keys its files
	// lack and all the table's keys, in its key ranges.
	absent, tableKeys int64
}

func newSnapState(f *snapForm, files []*sourceFile, table *snapTable) *snapState {
	return &snapState{f: f, files: files, table: table, fresh: &snapSide{withSeq: f.seqCol >= 0}, freshIndex: keyindex.New(1 << 10)}
}

// held is what the state holds (with the table's keys).
func (st *snapState) held() int64 {
	return int64(len(st.table.row))*snapKeyCost + st.table.keyBytes + st.keptBytes + int64(len(st.fresh.keys))*snapKeyCost
}

// problem records a row's problem: in the live pass (spilled false) it ends the run at
// once; in a pass over spill files it is kept when it is the earliest so far, and the
// row is skipped.
func (st *snapState) problem(spilled bool, ord int64, err error) error {
	if !spilled {
		return err
	}
	if st.firstErr == nil || ord < st.firstOrd {
		st.firstErr, st.firstOrd = err, ord
	}
	return nil
}

// weighedRows is what weigh needs of a record's rows besides the record: their keys in
// a block (looked up in the table's index: IDs), hashes and sequences.
type weighedRows struct {
	block  *keyindex.Block
	lo, hi []uint64
	seq    func(i int) (int64, bool)
}

// addLive weighs a record of the live form (as it was read).
func (st *snapState) addLive(ctx context.Context, rec arrow.RecordBatch) error {
	f := st.f
	if err := st.rows.hash(rec, f.keyCols, f.hashCols, st.table.index); err != nil {
		return fmt.Errorf("%s: %w", st.files[f.fileOf(rec)].Name, err)
	}
	w := weighedRows{block: &st.rows.Block, lo: st.rows.lo, hi: st.rows.hi}
	if f.seqCol >= 0 {
		seqs := rec.Column(f.seqCol)
		w.seq = func(i int) (int64, bool) { return seqValue(seqs, i) }
	}
	return st.weigh(ctx, rec, w, false)
}

// addSpilled weighs a record of the spill form (a pass over spill files).
func (st *snapState) addSpilled(ctx context.Context, rec arrow.RecordBatch) error {
	f := st.f
	keys := rec.Column(f.keyCol).(*array.Binary)
	block := &st.rows.Block
	block.Reset()
	for i := range keys.Len() {
		block.Buf = append(block.Buf, keys.Value(i)...)
		block.End()
	}
	st.table.index.LookupBlock(block)
	w := weighedRows{block: block}
	w.lo, w.hi = asUint64(rec.Column(f.loCol), st.rows.lo), asUint64(rec.Column(f.hiCol), st.rows.hi)
	st.rows.lo, st.rows.hi = w.lo, w.hi
	if f.seqCol >= 0 {
		seqs := rec.Column(f.seqOut).(*array.Int64)
		w.seq = func(i int) (int64, bool) { return seqs.Value(i), seqs.IsValid(i) }
	}
	return st.weigh(ctx, rec, w, true)
}

// weigh weighs the rows of a record (of either form): a row of a table key stands
// unless a row before it does (a key twice, or with sequence_by a later one); a row
// that stands and differs from the table's row, or of a new key, is kept.
func (st *snapState) weigh(ctx context.Context, rec arrow.RecordBatch, w weighedRows, spilled bool) error {
	f, table, fresh := st.f, st.table, st.fresh
	st.weighed += rec.NumRows()
	lines := rec.Column(f.lineCol).(*array.Int64)
	dels := rec.Column(f.delCol).(*array.Boolean)
	files := rec.Column(f.fileCol).(*array.Int64)
	ords := rec.Column(f.ordCol).(*array.Int64)
	// Rows of new keys: indexed among themselves.
	miss := &st.miss
	miss.Reset()
	w.block.Each(func(i int, key []byte) {
		if w.block.IDs[i] >= 0 {
			miss.Skip()
			return
		}
		miss.Buf = append(miss.Buf, key...)
		miss.End()
	})
	st.freshIndex.AddBlock(miss)
	fresh.grow(st.freshIndex.Len())
	var keep []int32
	for i, id := range w.block.IDs {
		sd, target := &table.side, true
		if id < 0 {
			sd, id, target = fresh, miss.IDs[i], false
			if int(id) == len(st.freshOrd) {
				st.freshOrd = append(st.freshOrd, ords.Value(i))
			}
		}
		fi := int32(files.Value(i))
		r := snapRow{file: fi, line: lines.Value(i), del: dels.Value(i), lo: w.lo[i], hi: w.hi[i]}
		if w.seq != nil {
			var ok bool
			if r.seq, ok = w.seq(i); !ok {
				err := fmt.Errorf("%s:%d: key %s: sequence_by column %s is null", st.files[fi].Name, r.line, st.f.keyText(rec, i), st.f.s.cfg.SequenceBy)
				if err := st.problem(spilled, ords.Value(i), err); err != nil {
					return err
				}
				continue
			}
			if !st.hasTop || r.seq > st.top {
				st.top, st.hasTop = r.seq, true
			}
		}
		stands, clash := sd.offer(id, r)
		if clash {
			err := sd.clash(id, r, st.files, st.f.keyText(rec, i), st.f.seqText)
			if err := st.problem(spilled, ords.Value(i), err); err != nil {
				return err
			}
			continue
		}
		if !stands {
			continue
		}
		k := &sd.keys[id]
		k.kept = -1
		if r.del || target && r.lo == table.hash[id].lo && r.hi == table.hash[id].hi {
			continue // the table's row stands (or goes): nothing to keep
		}
		k.kept = st.keptRows + int32(len(keep))
		keep = append(keep, int32(i))
	}
	if len(keep) > 0 {
		g, err := f.sourceRows(ctx, rec, keep, spilled)
		if err != nil {
			return err
		}
		if spilled {
			// A run of rows is a slice of the record read back, which would keep all of
			// it (every column and row of that part of a spill file) alive: copied.
			c, err := keyed.Own(g)
			g.Release()
			if err != nil {
				return err
			}
			g = c
		}
		st.kept = append(st.kept, g)
		st.keptRows += int32(len(keep))
		st.keptBytes += keyed.RecordBytes(g)
	}
	return nil
}

// snapRow is a decoded row as pass 2 weighs it.
type snapRow struct {
	file   int32
	line   int64
	seq    int64
	lo, hi uint64
	del    bool
}

// offer records row r for key id and reports whether it stands (see snapshot mode); a
// row that clashes with the one standing (a key twice; with sequence_by, two different
// rows at one sequence) changes nothing, and clash tells what it is.
func (sd *snapSide) offer(id int32, r snapRow) (stands, clash bool) {
	k := &sd.keys[id]
	if !k.seen {
		sd.set(id, r)
		return true, false
	}
	if !sd.withSeq {
		return false, true
	}
	switch {
	case r.seq > sd.seq[id]:
	case r.seq < sd.seq[id] || k.del:
		return false, false
	case r.del:
	case r.lo != sd.hash[id].lo || r.hi != sd.hash[id].hi:
		return false, true
	default:
		return false, false // an exact duplicate
	}
	sd.set(id, r)
	return true, false
}

// clash is the error of row r of key (as the user wrote it) that offer found clashing
// with the row standing for id.
func (sd *snapSide) clash(id int32, r snapRow, files []*sourceFile, key string, seqText func(int64) string) error {
	k := &sd.keys[id]
	here := fmt.Sprintf("%s:%d", files[r.file].Name, r.line)
	there := fmt.Sprintf("%s:%d", files[k.file].Name, k.line)
	if sd.withSeq {
		return fmt.Errorf("key %s has two different rows at the same sequence value %s (%s and %s); make sequence_by unique per key", key, seqText(r.seq), there, here)
	}
	if k.file == r.file {
		return fmt.Errorf("%s: key %s is on lines %d and %d; set sequence_by on the stage to keep the last of a key's rows, or remove the duplicate", files[r.file].Name, key, k.line, r.line)
	}
	return fmt.Errorf("key %s is in %s and %s; a snapshot holds each key once (set sequence_by to keep the last)", key, there, here)
}

func (sd *snapSide) set(id int32, r snapRow) {
	k := &sd.keys[id]
	k.seen, k.file, k.line, k.del = true, r.file, uint32(min(r.line, math.MaxUint32)), r.del
	if sd.withSeq {
		sd.seq[id], sd.hash[id] = r.seq, dataHash{r.lo, r.hi}
	}
}

// handOver sets aside what pass 2 holds, in the spill form: per key it weighed, the row
// that stands (kept, with its values; else a row of its key, place, sequence and hash
// only, which a pass weighs as it was weighed: its table row stands, or it deletes).
func (st *snapState) handOver(ctx context.Context, b *keyed.Batch) error {
	defer func() {
		arrowx.ReleaseRecords(st.kept)
		st.kept = nil
	}()
	for _, side := range []struct {
		sd    *snapSide
		index *keyindex.Index
		table bool
	}{{&st.table.side, st.table.index, true}, {st.fresh, st.freshIndex, false}} {
		var ids []int32
		for id, k := range side.sd.keys {
			if k.seen {
				ids = append(ids, int32(id))
			}
		}
		for lo := 0; lo < len(ids); lo += 1 << 14 {
			rec, err := st.standing(ctx, side.sd, side.index, side.table, ids[lo:min(lo+1<<14, len(ids))])
			if err != nil {
				return err
			}
			err = b.Spill(ctx, rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// standing is the spill form of the rows standing for the keys ids of a side.
func (st *snapState) standing(ctx context.Context, sd *snapSide, index *keyindex.Index, table bool, ids []int32) (arrow.RecordBatch, error) {
	f := st.f
	n := len(ids)
	// The kept rows' values; the others' are null.
	var refs []keyed.Ref
	var at []int32 // row i's kept row, among refs (-1: none)
	starts := make([]int32, len(st.kept)+1)
	for i, r := range st.kept {
		starts[i+1] = starts[i] + int32(r.NumRows())
	}
	for _, id := range ids {
		k := sd.keys[id]
		if k.kept < 0 {
			at = append(at, -1)
			continue
		}
		r, _ := slices.BinarySearchFunc(starts[1:], k.kept+1, func(a, b int32) int { return int(a - b) })
		at = append(at, int32(len(refs)))
		refs = append(refs, keyed.Ref{Rec: int32(r), Row: k.kept - starts[r]})
	}
	mem := memory.DefaultAllocator
	cols := make([]arrow.Array, 0, len(f.spill.Fields()))
	defer func() { arrowx.ReleaseArrays(cols) }()
	var kept arrow.RecordBatch
	if len(refs) > 0 {
		var err error
		if kept, err = keyed.GatherOne(ctx, st.kept, refs); err != nil {
			return nil, err
		}
		defer kept.Release()
	}
	var keptHash rowHashes
	if kept != nil && !sd.withSeq {
		if err := keptHash.hash(kept, f.keyCols, f.hashCols, nil); err != nil {
			return nil, err
		}
	}
	for c := range f.nsource {
		if slices.Contains(f.linCols, c) { // (the spill form's: its file's, see snapForm)
			cols = append(cols, array.NewNull(n))
			continue
		}
		b := array.NewBuilder(mem, f.source.Field(c).Type)
		for i := range n {
			switch {
			case at[i] >= 0:
				if err := appendFrom(b, kept.Column(c), int(at[i])); err != nil {
					b.Release()
					return nil, err
				}
			case c == f.lineCol:
				b.(*array.Int64Builder).Append(int64(sd.keys[ids[i]].line))
			case c == f.delCol:
				b.(*array.BooleanBuilder).Append(sd.keys[ids[i]].del)
			default:
				b.AppendNull()
			}
		}
		cols = append(cols, b.NewArray())
		b.Release()
	}
	files, ords, lo, hi, seq := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), array.NewInt64Builder(mem)
	defer seq.Release()
	kb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer kb.Release()
	for i, id := range ids {
		k := sd.keys[id]
		files[i] = int64(k.file)
		if !table {
			ords[i] = st.freshOrd[id]
		}
		kb.Append(index.Key(id))
		switch {
		case sd.withSeq:
			lo[i], hi[i] = int64(sd.hash[id].lo), int64(sd.hash[id].hi)
			seq.Append(sd.seq[id])
		case at[i] >= 0:
			lo[i], hi[i] = int64(keptHash.lo[at[i]]), int64(keptHash.hi[at[i]])
		case table: // the table's row stands: its hash
			lo[i], hi[i] = int64(st.table.hash[id].lo), int64(st.table.hash[id].hi)
		}
		if !sd.withSeq {
			seq.AppendNull()
		}
	}
	seqs := arrow.Array(array.NewNull(n))
	if sd.withSeq {
		seqs = seq.NewArray()
	}
	cols = append(cols, keyed.Int64s(files), keyed.Int64s(ords), kb.NewArray(), keyed.Int64s(lo), keyed.Int64s(hi), seqs)
	rec := array.NewRecordBatch(f.spill, cols, int64(n))
	return rec, nil
}
