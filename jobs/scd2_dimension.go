package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// The dimension side of scd2_merge's columnar front (scd2_batch.go has the batch side):
// one scan of the dimension sorts its rows against the batch's keys, settles the keys
// whose event repeats their current row, places every stored version the fold or the
// MERGE needs (its file and row), and keeps those rows for the MERGE.

// scdWork is what the dimension scan found for the batch's keys (and for current
// dimension keys a snapshot source no longer has): per key whether it is settled (its
// only event repeats its current row: nothing to do) or quick (its only event changes
// tracked columns of its current row, after that row's valid_from, and no type 1 column;
// see againstCurrent), and its stored versions unless settled. A key costs a byte and an
// index, so a million keys, most of them settled, take 5 MB rather than a slice each.
type scdWork struct {
	flags []uint8 // per key: workSettled, workQuick
	at    []int32 // per key: 1 + the index in vers of its stored versions; 0: none
	vers  [][]scdVersion
}

const (
	workSettled uint8 = 1 << iota
	workQuick
)

func newSCDWork(keys int) *scdWork {
	return &scdWork{flags: make([]uint8, keys), at: make([]int32, keys)}
}

func (w *scdWork) len() int              { return len(w.flags) }
func (w *scdWork) settled(id int32) bool { return w.flags[id]&workSettled != 0 }
func (w *scdWork) isQuick(id int32) bool { return w.flags[id]&workQuick != 0 }
func (w *scdWork) settle(id int32)       { w.flags[id] |= workSettled; w.drop(id) }

// versions returns key id's stored versions.
func (w *scdWork) versions(id int32) []scdVersion {
	if a := w.at[id]; a > 0 {
		return w.vers[a-1]
	}
	return nil
}

// drop forgets key id's versions. Calls for different keys may run at once.
func (w *scdWork) drop(id int32) {
	if a := w.at[id]; a > 0 {
		w.vers[a-1] = nil
	}
}

// add appends a stored version of key id (quick: see againstCurrent).
func (w *scdWork) add(id int32, v scdVersion, quick bool) {
	a := w.at[id]
	if a == 0 {
		w.vers = append(w.vers, nil)
		a = int32(len(w.vers))
		w.at[id] = a
	}
	w.vers[a-1] = append(w.vers[a-1], v)
	if quick {
		w.flags[id] |= workQuick
	}
}

// dimColumns locates the SCD columns of a dimension record.
type dimColumns struct {
	data     []int
	from, to arrow.Array
	curr     *array.Boolean
	sk       *array.Int64
	inferred *array.Boolean // nil without columns.inferred
}

func (l *scdLayout) dimColumns(rec arrow.RecordBatch) (*dimColumns, error) {
	cols, err := sourceColumns(rec.Schema(), l)
	if err != nil {
		return nil, err
	}
	idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
	d := &dimColumns{data: cols, from: rec.Column(idx(l.from)), to: rec.Column(idx(l.to))}
	d.curr, _ = rec.Column(idx(l.curr)).(*array.Boolean)
	if d.curr == nil {
		return nil, fmt.Errorf("column %s is %s; expected boolean", l.curr, rec.Column(idx(l.curr)).DataType())
	}
	if l.inferred != "" {
		if d.inferred, _ = rec.Column(idx(l.inferred)).(*array.Boolean); d.inferred == nil {
			return nil, fmt.Errorf("column %s is %s; expected boolean", l.inferred, rec.Column(idx(l.inferred)).DataType())
		}
	}
	if l.sk != "" {
		if d.sk, _ = rec.Column(idx(l.sk)).(*array.Int64); d.sk == nil {
			return nil, fmt.Errorf("surrogate key column %s is %s; expected long", l.sk, rec.Column(idx(l.sk)).DataType())
		}
	}
	return d, nil
}

// version builds the scdVersion of dimension row i.
func (l *scdLayout) version(rec arrow.RecordBatch, d *dimColumns, i int, synthetic *int64, withRow bool) (scdVersion, error) {
	v := scdVersion{Current: !d.curr.IsNull(i) && d.curr.Value(i)}
	if withRow {
		row, err := sourceRow(rec, l, i, d.data)
		if err != nil {
			return scdVersion{}, err
		}
		v.Row = row
	}
	v.From, _ = seqValue(d.from, i)
	v.To = l.toAt(d, i)
	if v.Current && v.To != l.spec.end && l.spec.intervals {
		// Written with another open end (open_end changed): the fold would take the row
		// for a closed one.
		return scdVersion{}, fmt.Errorf("the current version of key %s ends at %s, not at the open end %s: the dimension was written with another open_end; set its current rows' %s to the new open end first (or keep the former open_end)",
			keyText(rec, l.keyColumns(d.data), i), l.spec.showSeq(v.To), l.openEndText(), l.to)
	}
	if d.sk != nil && !d.sk.IsNull(i) {
		v.SK = d.sk.Value(i)
	} else {
		*synthetic--
		v.SK = *synthetic
	}
	v.Inferred = d.isInferred(i)
	v.Tombstone = !v.Inferred && l.spec.deletes == "tombstone" && l.tombstoneAt(rec, d, i)
	return v, nil
}

// isInferred reports whether row i is a fact_load's placeholder (columns.inferred).
func (d *dimColumns) isInferred(i int) bool {
	return d.inferred != nil && !d.inferred.IsNull(i) && d.inferred.Value(i)
}

// toAt reads the valid_to of row i: a NULL (open_end: null) is the open end.
func (l *scdLayout) toAt(d *dimColumns, i int) int64 {
	to, ok := seqValue(d.to, i)
	if !ok {
		return l.spec.end
	}
	return to
}

// tombstoneAt reports whether every non-key data column of row i is null.
func (l *scdLayout) tombstoneAt(rec arrow.RecordBatch, d *dimColumns, i int) bool {
	for j, c := range d.data {
		if !isKeyIndex(l.spec.keys, j) && !rec.Column(c).IsNull(i) {
			return false
		}
	}
	return true
}

// dimensionSpec is what a pass of scd2_merge reads of the dimension: every column;
// with deleteAt (a snapshot source that deletes) every current row whatever the batch's
// keys. A small live batch (at most 10,000 keys, one key column, nothing to delete)
// reads only the files whose stats may hold its keys (every row of a file read comes
// back, so each version knows its place: the MERGE matches rows by position).
func (b *scdBatch) dimensionSpec(deleteAt *snapshotDeletes) (keyed.TargetSpec, error) {
	l := b.l
	spec := keyed.TargetSpec{ReadAhead: true, Select: func(rec arrow.RecordBatch) ([]int, func(int) bool, error) {
		d, err := l.dimColumns(rec)
		if err != nil {
			return nil, nil, err
		}
		var keepAll func(int) bool
		if deleteAt != nil {
			keepAll = func(i int) bool { return !d.curr.IsNull(i) && d.curr.Value(i) }
		}
		return l.keyColumns(d.data), keepAll, nil
	}}
	if deleteAt == nil {
		var err error
		if spec.Filter, err = b.keyFilter(); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// keyFilterMax is the most keys of a batch that keyFilter makes a predicate of (a test
// lowers it).
var keyFilterMax = 10_000

// keyFilter is a predicate on the batch's keys, for a small batch (at most 10,000 keys,
// one key column) whose scans of the target read only the files whose stats may hold
// them; nil for another.
func (b *scdBatch) keyFilter() (expr.Predicate, error) {
	l := b.l
	if len(l.spec.keys) != 1 || len(b.head) == 0 || len(b.head) > keyFilterMax {
		return nil, nil
	}
	keys := make([]any, 0, len(b.head))
	for _, ev := range b.head {
		r := b.evRec[ev]
		v, err := keyed.Value(b.recs[r].Column(b.cols[r][l.spec.keys[0]]), int(b.evRow[ev]))
		if err != nil {
			return nil, err
		}
		keys = append(keys, v)
	}
	return expr.In(l.data[l.spec.keys[0]].Name, keys...), nil
}

// dimPlacer sorts the dimension's records against a batch (one scan of the dimension,
// or of its rows set aside for a pass): it fills work with, per batch key, its stored
// versions (or settled), and, when deleteAt is set (a snapshot source that deletes),
// missing with the current rows of keys the batch does not have, each to be deleted at
// deleteAt.of(it). A missing key's delete only needs its current row: it closes that
// row, or changes nothing when its time is before it.
type dimPlacer struct {
	b         *scdBatch
	work      *scdWork
	deleteAt  *snapshotDeletes
	missing   []scdVersion
	synthetic int64
	kept      []int32 // rows of the current record kept
	rows      *sortedRows
}

// place sorts the rows of a dimension record (of the table's schema), with their places.
func (p *dimPlacer) place(ctx context.Context, tr keyed.TargetRecord) error {
	b, l, work, rec := p.b, p.b.l, p.work, tr.Rec
	// The scan keeps the rows that may change, so the MERGE need not read the files
	// again: with deletion vectors it marks the rows it changes, without them it splices
	// the new values into copies of the files (delta's spliceGivenRows).
	p.kept = p.kept[:0]
	keep := func(i int) dimRow {
		r := dimRow{place: tr.Place(i), placed: true, held: int32(len(b.dimRows) + 1), hrow: int32(len(p.kept))}
		p.kept = append(p.kept, int32(i))
		return r
	}
	d, err := l.dimColumns(rec)
	if err != nil {
		return err
	}
	b.heldData = d.data // the kept rows have the scan's columns
	rows := p.rows
	if err := b.sortRows(rec, d, rows); err != nil {
		return err
	}
	for i, id := range rows.ids {
		current := !d.curr.IsNull(i) && d.curr.Value(i)
		if id < 0 {
			if p.deleteAt == nil || !current || (l.spec.deletes == "tombstone" && l.tombstoneAt(rec, d, i)) {
				continue
			}
			if isMemberRow(rec, l.keyColumns(d.data), i) || d.isInferred(i) {
				continue // a fact_load's unknown member or placeholder: no extract has it, none deletes it
			}
			v, err := l.version(rec, d, i, &p.synthetic, true)
			if err != nil {
				return err
			}
			v.at = keep(i)
			p.missing = append(p.missing, v)
			continue
		}
		if work.settled(id) {
			continue
		}
		repeats, quick := rows.repeats[i], rows.quick[i]
		if repeats {
			work.settle(id)
			continue
		}
		// A key's quick change needs only its version's place, not its values: with
		// the rows kept, the values are read from there if the fold needs them after
		// all (versionRow).
		v, err := l.version(rec, d, i, &p.synthetic, !(quick && len(work.versions(id)) == 0))
		if err != nil {
			return err
		}
		v.at = keep(i)
		work.add(id, v, quick)
	}
	if len(p.kept) > 0 {
		rows, err := arrowx.GatherRows(ctx, rec, p.kept)
		if err != nil {
			return err
		}
		b.dimRows = append(b.dimRows, rows)
	}
	return nil
}

// sortedRows is what sortRows found for each row of a dimension record: its key's id
// in the batch (-1: not in the batch) and, for a current row of a batch key, what
// againstCurrent says.
type sortedRows struct {
	ids            []int32
	repeats, quick []bool
	blocks         [2]keyindex.Block
}

// splitSortAt is the record size from which sortRows works on two halves at once (a
// test lowers it).
var splitSortAt = 4096

// sortRows looks a dimension record's keys up in the batch and compares the current
// rows with their keys' events, the two halves of the record at once (lookups and
// comparisons only read the batch).
func (b *scdBatch) sortRows(rec arrow.RecordBatch, d *dimColumns, out *sortedRows) error {
	n := int(rec.NumRows())
	out.ids = slices.Grow(out.ids[:0], n)[:n]
	out.repeats = slices.Grow(out.repeats[:0], n)[:n]
	out.quick = slices.Grow(out.quick[:0], n)[:n]
	half := n / 2
	if n < splitSortAt {
		half = n
	}
	keyCols := b.l.keyColumns(d.data)
	part := func(k, lo, hi int) error {
		kb := &out.blocks[k]
		kb.Reset()
		for i := lo; i < hi; i++ {
			var err error
			if kb.Buf, err = keyed.AppendKey(kb.Buf, rec, keyCols, i); err != nil {
				return err
			}
			kb.End()
		}
		b.keys.LookupBlock(kb)
		for j, id := range kb.IDs {
			i := lo + j
			out.ids[i] = id
			out.repeats[i], out.quick[i] = false, false
			if id >= 0 && !d.curr.IsNull(i) && d.curr.Value(i) && !d.isInferred(i) {
				// (A placeholder is folded: the key's first version fills it.)
				out.repeats[i], out.quick[i] = b.againstCurrent(id, rec, d, i)
			}
		}
		return nil
	}
	if half == n {
		return part(0, 0, n)
	}
	var wg sync.WaitGroup
	var err1 error
	wg.Go(func() { err1 = part(1, half, n) })
	err := part(0, 0, half)
	wg.Wait()
	return errors.Join(err, err1)
}

// againstCurrent compares key id's events with its current dimension row i. They
// repeat it when they are one upsert, at or after the row's valid_from, with every
// non-key column equal: that changes nothing (rule 2), and the key is settled. They are
// a quick change when they are one upsert after the row's valid_from that changes a
// tracked column and no type 1 column: if row i is the key's only version, the fold
// would close it at the event and add the event as the new current version, which the
// stage then does without Go rows (foldBatch).
func (b *scdBatch) againstCurrent(id int32, rec arrow.RecordBatch, d *dimColumns, i int) (repeats, quick bool) {
	if b.count[id] != 1 {
		return false, false
	}
	ev := b.head[id]
	from, ok := seqValue(d.from, i)
	l := b.l
	if b.evDel[ev] || !ok || b.evSeq[ev] < from || l.spec.hasFirstFrom && from == l.spec.firstFrom && b.evSeq[ev] <= b.lateUpTo {
		// (A first version at first_valid_from hides where the key's events start: an
		// event that may be late may come before them, which only the fold tells.)
		return false, false
	}
	if l.spec.deletes == "tombstone" && l.tombstoneAt(rec, d, i) {
		return false, false
	}
	src, row, cols := b.recs[b.evRec[ev]], int(b.evRow[ev]), b.cols[b.evRec[ev]]
	same := func(j int) bool { return sameValue(src.Column(cols[j]), row, rec.Column(d.data[j]), i) }
	for _, j := range l.spec.type1 {
		if !same(j) {
			return false, false
		}
	}
	for _, j := range l.spec.tracked {
		if !same(j) {
			// (With ignore_null_updates the event's NULLs take the row's values: the fold
			// does that.)
			return false, b.evSeq[ev] > from && l.toAt(d, i) == l.spec.end && !l.spec.ignoreNulls
		}
	}
	return true, false
}

// quickInsert reports whether key id is new to the dimension (no stored version) with
// one upsert event: the fold would insert the event as the key's current version.
func (b *scdBatch) quickInsert(id int32, w *scdWork) bool {
	return len(w.versions(id)) == 0 && b.count[id] == 1 && !b.evDel[b.head[id]]
}

// versionRows fills in the values of stored versions the scan placed without them (see
// scanDimension), reading them from the rows it kept.
func (b *scdBatch) versionRows(versions []scdVersion) error {
	for k := range versions {
		v := &versions[k]
		if v.Row != nil {
			continue
		}
		if v.at.held == 0 {
			return fmt.Errorf("internal error: a stored version at %v has neither values nor a kept row", v.at.place)
		}
		row, err := sourceRow(b.dimRows[v.at.held-1], b.l, int(v.at.hrow), b.heldData)
		if err != nil {
			return err
		}
		v.Row = row
	}
	return nil
}

// sameValue is null-safe equality of a[i] and b[j], with fast paths for equal types.
func sameValue(a arrow.Array, i int, b arrow.Array, j int) bool {
	an, bn := a.IsNull(i), b.IsNull(j)
	if an || bn {
		return an && bn
	}
	switch x := a.(type) {
	case *array.String:
		if y, ok := b.(*array.String); ok {
			return x.Value(i) == y.Value(j)
		}
	case *array.Int64:
		if y, ok := b.(*array.Int64); ok {
			return x.Value(i) == y.Value(j)
		}
	case *array.Int32:
		if y, ok := b.(*array.Int32); ok {
			return x.Value(i) == y.Value(j)
		}
	case *array.Boolean:
		if y, ok := b.(*array.Boolean); ok {
			return x.Value(i) == y.Value(j)
		}
	case *array.Date32:
		if y, ok := b.(*array.Date32); ok {
			return x.Value(i) == y.Value(j)
		}
	case *array.Decimal128:
		if y, ok := b.(*array.Decimal128); ok && arrow.TypeEqual(x.DataType(), y.DataType()) {
			return x.Value(i) == y.Value(j)
		}
	}
	va, errA := keyed.Value(a, i)
	vb, errB := keyed.Value(b, j)
	return errA == nil && errB == nil && valuesEqual(va, vb)
}
