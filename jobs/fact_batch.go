package jobs

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

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
	block keyindex.Block
	sks   [][]int64 // per lookup, per row: its key
	found [][]bool  // per lookup, per row: whether a version was found
	times []int64
	tok   []bool
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
		for r, ok := range fb.found[i] {
			if ok {
				fr.counts[i][0]++
			} else {
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
	return fr.put(batch)
}

// addFactKeys adds the batch's fact keys to the run's index: a NULL key or a key met
// before (in this batch or an earlier one) is an error.
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
	b := &fr.batch.block
	b.Reset()
	if err := keyed.AppendKeys(b, rec, kc, 0, n); err != nil {
		return fmt.Errorf("%s: %w", what, err)
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
	b.Reset()
	n := int(rec.NumRows())
	nulls := false
	for _, c := range keyCols {
		nulls = nulls || rec.Column(c).NullN() > 0
	}
	if !nulls {
		return keyed.AppendKeys(b, rec, keyCols, 0, n)
	}
	for r := range n {
		null := false
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
