package delta

import (
	"cmp"
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// spliceGivenRows merges a file of a table without deletion vectors from the matched
// rows the caller gave (fm.Rows), as mergeGivenRows does with vectors, when the clauses
// update rows and delete none: the new file is the old one with the updated values
// spliced in (planSplice, then splice.write in the background), so only the columns
// whose values change are decoded and encoded. handled is false, with nothing written or counted, when that does not apply;
// the caller then rewrites the file. live is the file's row count.
func (m *merger) spliceGivenRows(ctx context.Context, a *Add, fm *FileMatches, live int64) (handled, touched bool, err error) {
	if a.DeletionVector != nil {
		return false, false, nil
	}
	plans, err := m.planGivenRows(ctx, a, fm, live)
	if err != nil {
		return false, false, err
	}
	type update struct {
		key       int
		pre, post arrow.RecordBatch
		rows      []int64 // file positions
	}
	var ups []update
	defer func() {
		for _, u := range ups {
			u.pre.Release()
			u.post.Release()
		}
	}()
	ncols := len(m.w.tblSch.Fields())
	changed := make([]bool, ncols)
	k := 0 // index in Target of the record's first row
	for _, p := range plans {
		if len(p.deleted) > 0 {
			return false, false, nil
		}
		keys := make([]int, 0, len(p.updT))
		for key := range p.updT {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			tgt := p.updT[key]
			pre, post, err := m.updateRows(ctx, p, key, tgt)
			if err != nil {
				return false, false, err
			}
			u := update{key: key, pre: pre, post: post, rows: make([]int64, len(tgt))}
			for i, r := range tgt {
				u.rows[i] = fm.Target[k+int(r)]
			}
			ups = append(ups, u)
			for c := range ncols {
				changed[c] = changed[c] || !sameValues(pre.Column(c), post.Column(c))
			}
		}
		k += int(p.rec.NumRows())
	}
	if len(ups) == 0 {
		return true, false, nil // every given row stays as it is
	}
	// The new values in file order: order[i] is the i-th updated row of the file, row
	// in of update up.
	type at struct {
		row    int64
		up, in int
	}
	var order []at
	for j, u := range ups {
		for i, r := range u.rows {
			order = append(order, at{r, j, i})
		}
	}
	slices.SortFunc(order, func(x, y at) int { return cmp.Compare(x.row, y.row) })
	patch := &splicePatch{rows: make([]int64, len(order))}
	offs := make([]int, len(ups)) // index of each update's first row in the concatenation
	for j := 1; j < len(ups); j++ {
		offs[j] = offs[j-1] + int(ups[j-1].post.NumRows())
	}
	idx := make([]int32, len(order))
	for i, o := range order {
		patch.rows[i], idx[i] = o.row, int32(offs[o.up]+o.in)
	}
	var cols []int
	defer func() {
		if patch != nil {
			releaseAll(patch.vals)
		}
	}()
	for c := range ncols {
		if !changed[c] {
			continue
		}
		parts := make([]arrow.Array, len(ups))
		for j, u := range ups {
			parts[j] = u.post.Column(c)
		}
		all, err := array.Concatenate(parts, m.w.mem)
		if err != nil {
			return false, false, err
		}
		cols = append(cols, c)
		patch.vals = append(patch.vals, gatherArray(m.w.mem, all, idx))
		all.Release()
	}
	if len(cols) > 0 { // else every value stays as it was: so does the file
		s, ok, err := m.planSplice(a, cols)
		if err != nil || !ok {
			return false, false, err
		}
		m.splices.start(s, patch) // written while the MERGE goes on
		patch = nil
	}
	m.res.NumTargetRowsCopied += live - int64(len(order))
	for _, u := range ups {
		m.countUpdated(u.key, int(u.post.NumRows()))
		if err := m.writeChanges(u.pre, ChangeUpdatePreimage); err != nil {
			return false, false, err
		}
		if err := m.writeChanges(u.post, ChangeUpdatePostimage); err != nil {
			return false, false, err
		}
	}
	return true, len(cols) > 0, nil
}

// sameValues says whether two arrays of one type hold the same values, row by row. Unlike
// array.Equal it ignores what a null struct row's fields hold (a decoded file and a
// built record fill them differently); a difference it cannot rule out counts as one.
func sameValues(a, b arrow.Array) bool {
	if a.Data() == b.Data() || array.Equal(a, b) { // (a column no clause sets is shared)
		return true
	}
	if a.DataType().ID() != arrow.STRUCT || !arrow.TypeEqual(a.DataType(), b.DataType()) || a.Len() != b.Len() {
		return false
	}
	for i := range a.Len() {
		switch {
		case a.IsNull(i) != b.IsNull(i):
			return false
		case a.IsValid(i) && !array.SliceEqual(a, int64(i), int64(i+1), b, int64(i), int64(i+1)):
			return false
		}
	}
	return true
}
