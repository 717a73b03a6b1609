package jobs

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Keying a snapshot's facts a batch at a time: the batch's fact keys go into the run's
// index of fact keys (a key met twice is an error), each lookup's business keys are found
// in its dimension's key index as one block, and the output batch is the source's columns
// as they are with the key columns added. A batch where a lookup with missing: fail or
// quarantine misses is keyed row by row instead, as the change feed's facts are, so
// that the miss is reported or quarantined as there.

// factBatch holds the buffers addBatch reuses batch after batch.
type factBatch struct {
	block  keyindex.Block
	sks    [][]int64 // per lookup, per row: its key
	found  [][]bool  // per lookup, per row: whether a version was found
	times  []int64
	tok    []bool
	hashes []uint64
}

// addBatch keys and emits every fact of a snapshot batch (what names it in errors).
func (fr *factRun) addBatch(rec arrow.RecordBatch, srcName, what string, res *Result) error {
	cols, err := fr.columnsIn(rec.Schema(), what)
	if err != nil {
		return err
	}
	n := int(rec.NumRows())
	res.RowsRead += int64(n)
	if n == 0 {
		return nil
	}
	if err := fr.addFactKeys(rec, cols, srcName, what); err != nil {
		return err
	}
	fb := &fr.batch
	if len(fb.sks) != len(fr.dims) {
		fb.sks, fb.found = make([][]int64, len(fr.dims)), make([][]bool, len(fr.dims))
	}
	lc := fr.lookupColsOf(rec.Schema())
	for i, d := range fr.dims {
		if err := fr.lookupBatch(d, rec, lc.key[i], lc.at[i], n, &fb.sks[i], &fb.found[i]); err != nil {
			return fmt.Errorf("%s: lookups[%d].at %s: %w", what, i, d.lookup.At, err)
		}
		if d.lookup.Missing == MissingFail || d.lookup.Missing == MissingQuarantine {
			for _, ok := range fb.found[i] {
				if !ok {
					return fr.addRows(rec, cols, what)
				}
			}
		}
	}
	for i, d := range fr.dims {
		unknown := d.lookup.unknownKey()
		placeholders := len(d.placeholders) > 0
		for r, ok := range fb.found[i] {
			switch {
			case ok && placeholders && d.isPlaceholder(fb.sks[i][r]):
				fr.counts[i][3]++
			case ok:
				fr.counts[i][0]++
			default:
				fr.counts[i][1]++
				fb.sks[i][r] = unknown
			}
		}
	}
	out := make([]arrow.Array, 0, len(fr.keyOf)+1)
	defer func() {
		for _, a := range out {
			a.Release()
		}
	}()
	for j, l := range fr.keyOf {
		switch {
		case l >= 0:
			out = append(out, keyed.Int64s(fb.sks[l]))
		case arrow.TypeEqual(rec.Column(cols[j]).DataType(), fr.out.Field(j).Type):
			c := rec.Column(cols[j])
			c.Retain()
			out = append(out, c)
		default:
			b := array.NewBuilder(memory.DefaultAllocator, fr.out.Field(j).Type)
			for r := range n {
				if err := appendFrom(b, rec.Column(cols[j]), r); err != nil {
					b.Release()
					return fmt.Errorf("column %s: %w", fr.out.Field(j).Name, err)
				}
			}
			out = append(out, b.NewArray())
			b.Release()
		}
	}
	del := array.NewBooleanBuilder(memory.DefaultAllocator)
	del.AppendValues(make([]bool, n), nil)
	out = append(out, del.NewArray())
	del.Release()
	batch := array.NewRecordBatch(fr.out, out, int64(n))
	defer batch.Release()
	return fr.put(batch, func(int) string { return what })
}

// addFactKeys adds the batch's fact keys to the run's index: a NULL key or a key met
// before (in this batch or an earlier one) is an error. An append adds their hashes to
// its key set instead (checkSuspects finds a duplicate there).
func (fr *factRun) addFactKeys(rec arrow.RecordBatch, cols []int, srcName, what string) error {
	kc := make([]int, 0, len(fr.keyIdx))
	for _, j := range fr.keyIdx {
		kc = append(kc, cols[j])
	}
	n := int(rec.NumRows())
	for _, c := range kc {
		if rec.Column(c).NullN() > 0 {
			for r := range n {
				if _, _, err := fr.factKey(rec, cols, r); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
		}
	}
	if fr.incremental && len(kc) == 1 {
		fr.noteKeyRange(rec.Column(kc[0]))
	}
	b := &fr.batch.block
	b.Reset()
	if err := keyed.AppendKeys(b, rec, kc, 0, n); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if fr.keySet != nil {
		hs := fr.batch.hashes[:0]
		b.Each(func(_ int, key []byte) { hs = append(hs, uint64(factKeyHash(key))) })
		fr.batch.hashes = hs
		fr.keySet.addAll(hs)
		return nil
	}
	// New keys get the ids after the index's, in row order: a row whose id is not the
	// next one has a key met before.
	next := int32(fr.seen.Len())
	fr.seen.AddBlock(b)
	for r, id := range b.IDs {
		if id != next {
			return fmt.Errorf("%s holds two facts with key %s", srcName, keyText(rec, kc, r))
		}
		next++
	}
	return nil
}

// lookupBatch finds, for each row of rec, the key of dimension d's version valid at the
// row's time (business key columns keyCols, time column at): sks and found, per row.
func (fr *factRun) lookupBatch(d *factDim, rec arrow.RecordBatch, keyCols []int, at, n int, sks *[]int64, found *[]bool) error {
	fb := &fr.batch
	var err error
	if fb.times, fb.tok, err = fillTimes(fb.times, fb.tok, rec.Column(at), n); err != nil {
		return err
	}
	b := &fb.block
	if err := appendBusinessKeys(b, rec, keyCols); err != nil {
		return err
	}
	d.keys.LookupBlock(b)
	*sks, *found = resize(*sks, n), resize(*found, n)
	s, f := *sks, *found
	for r, id := range b.IDs {
		s[r], f[r] = 0, false
		if id >= 0 && fb.tok[r] {
			s[r], f[r] = d.keyAt(id, fb.times[r])
		}
	}
	return nil
}

// appendBusinessKeys resets b to the business keys (columns keyCols) of rec's rows; a
// row with a NULL in them has none.
func appendBusinessKeys(b *keyindex.Block, rec arrow.RecordBatch, keyCols []int) error {
	return appendBusinessKeysWhere(b, rec, keyCols, nil)
}

// appendBusinessKeysWhere is appendBusinessKeys of the rows where keep holds (nil: all);
// the others are skipped as rows with a NULL are.
func appendBusinessKeysWhere(b *keyindex.Block, rec arrow.RecordBatch, keyCols []int, keep func(r int) bool) error {
	b.Reset()
	n := int(rec.NumRows())
	nulls := false
	for _, c := range keyCols {
		nulls = nulls || rec.Column(c).NullN() > 0
	}
	if !nulls && keep == nil {
		return keyed.AppendKeys(b, rec, keyCols, 0, n)
	}
	for r := range n {
		null := keep != nil && !keep(r)
		for _, c := range keyCols {
			null = null || rec.Column(c).IsNull(r)
		}
		if null {
			b.Skip()
			continue
		}
		var err error
		if b.Buf, err = keyed.AppendKey(b.Buf, rec, keyCols, r); err != nil {
			return err
		}
		b.End()
	}
	return nil
}

// fillTimes reads a time column as microseconds (ok false: NULL), as timeMicros does.
func fillTimes(times []int64, ok []bool, arr arrow.Array, n int) ([]int64, []bool, error) {
	times, ok = resize(times, n), resize(ok, n)
	if a, isTS := arr.(*array.Timestamp); isTS {
		unit := a.DataType().(*arrow.TimestampType).Unit
		for r := range n {
			ok[r] = a.IsValid(r)
			times[r] = keyed.Micros(int64(a.Value(r)), unit)
		}
		return times, ok, nil
	}
	for r := range n {
		t, valid, err := timeMicros(arr, r)
		if err != nil {
			return nil, nil, err
		}
		times[r], ok[r] = t, valid
	}
	return times, ok, nil
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// addRows keys and emits a batch's facts row by row (their keys are in the run's index
// already).
func (fr *factRun) addRows(rec arrow.RecordBatch, cols []int, what string) error {
	for r := range int(rec.NumRows()) {
		_, kc, err := fr.factKey(rec, cols, r)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		sks, del, err := fr.newFactKeys(rec, kc, r, what)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := fr.emit(rec, cols, r, sks, del); err != nil {
			return err
		}
	}
	return nil
}

// factKeyHash hashes an encoded fact key for factKeySet (a variable so that a test can
// make every key collide).
var factKeyHash = keyed.Hash

// factKeySet is the facts' keys of an append, by 48 bits of their 64-bit hashes: 4
// bytes per fact where an index of the keys would hold the keys too (a hash set of the
// whole hashes takes about 13). The hashes go into 65,536 buckets by their top 16 bits,
// each keeping the next 32; sorting the buckets at the end finds the hashes met twice,
// whose keys become suspects: checkSuspects reads the keys again to tell a duplicate
// from a collision (at 10 M facts about one run in five has any).
type factKeySet struct {
	buckets  [][]uint32
	suspects map[uint64]bool // h>>16 of the hashes met twice
	done     bool
}

// factKeySetBytes is about what newFactKeySet(n) holds.
func factKeySetBytes(n int64) int64 { return n*9/2 + 1<<20 }

// factBatchMemory is what a fact_load holds for the batches it reads and keys at once
// (a few source batches, their keys and lookups), with room for the garbage they leave:
// at 64 MiB the collector returned pages to the OS only to fault them in again (10
// M facts: 3 times the collections, 7% slower).
const factBatchMemory = 96 << 20

func newFactKeySet(capacity int) *factKeySet {
	s := &factKeySet{buckets: make([][]uint32, 1<<16)}
	if capacity > 0 {
		// One array for all, each bucket a window of it three standard deviations above
		// its expected size (one that fills grows alone).
		mean := float64(capacity) / (1 << 16)
		per := int(mean+3*math.Sqrt(mean)) + 4
		backing := make([]uint32, per<<16)
		for i := range s.buckets {
			s.buckets[i] = backing[i*per : i*per : (i+1)*per]
		}
	}
	return s
}

// addAll adds hashes.
func (s *factKeySet) addAll(hs []uint64) {
	for _, h := range hs {
		b := h >> 48
		s.buckets[b] = append(s.buckets[b], uint32(h>>16))
	}
}

// finish sorts the buckets and notes the hashes met twice as suspects (once).
func (s *factKeySet) finish() {
	if s.done {
		return
	}
	s.done = true
	for b, vs := range s.buckets {
		slices.Sort(vs)
		for i := 1; i < len(vs); i++ {
			if vs[i] == vs[i-1] {
				if s.suspects == nil {
					s.suspects = map[uint64]bool{}
				}
				s.suspects[uint64(b)<<32|uint64(vs[i])] = true
			}
		}
	}
}

// suspect reports whether a key's hash is a suspect (after finish).
func (s *factKeySet) suspect(h uint64) bool { return s.suspects[h>>16] }

// checkSuspects reads the fact keys of a snapshot again when hashes were met twice in
// the append's key set: a key met twice among them is a duplicate (an error naming it);
// otherwise the hashes merely collided.
func (fr *factRun) checkSuspects(ctx context.Context, snap *delta.Snapshot, srcName string) error {
	if fr.keySet == nil {
		return nil
	}
	if fr.keySet.finish(); len(fr.keySet.suspects) == 0 {
		return nil
	}
	var names []string
	for _, j := range fr.keyIdx {
		names = append(names, fr.out.Field(j).Name)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: names})
	if err != nil {
		return fmt.Errorf("read %s: %w", srcName, err)
	}
	defer sc.Release()
	seen := map[string]bool{}
	var b keyindex.Block
	for sc.Next() {
		rec := sc.RecordBatch()
		kc := make([]int, len(names))
		for i, name := range names {
			kc[i] = nameIndex(rec.Schema())[strings.ToLower(name)]
		}
		b.Reset()
		if err := keyed.AppendKeys(&b, rec, kc, 0, int(rec.NumRows())); err != nil {
			return err
		}
		var dup error
		b.Each(func(r int, key []byte) {
			if dup != nil || !fr.keySet.suspect(uint64(factKeyHash(key))) {
				return
			}
			if seen[string(key)] {
				dup = fmt.Errorf("%s holds two facts with key %s", srcName, keyText(rec, kc, r))
			}
			seen[string(key)] = true
		})
		if dup != nil {
			return dup
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", srcName, err)
	}
	return nil
}
