package keyed

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// parted is the MERGE source of a run worked in passes, set aside in spill files and
// merged as ONE commit (delta.MergeInParts) at the end. Each pass adds its rows: those
// that match a target row sorted by that row's place (with the target row itself when
// the stage kept it, so the MERGE need not read it again), those to insert by their
// order. run reads them back, the passes' files merged, in parts that fit the limit:
// first the matched rows, file by file (all of a target file's rows in one part), then
// the inserts in their order, so that identity values are generated as a MERGE of the
// whole batch generates them.
type parted struct {
	dir     *Dir
	files   []*delta.Add  // the target snapshot's files, by index
	source  *arrow.Schema // MERGE source rows
	table   *arrow.Schema // target rows (nil: not kept)
	limit   int64         // spilled bytes per part
	matched []*File
	inserts []*File
}

// Spilled MERGE source rows carry two order columns: (target file index, row) for
// matched rows, (order, order2) for inserts.
const (
	orderColumn1 = "_orchestrator_k1"
	orderColumn2 = "_orchestrator_k2"
)

// spillChunk is the most rows of one spilled record (a reader holds one per file).
const spillChunk = 16 << 10

// addMatched adds a pass's rows that match target rows: src (MERGE source rows), the
// target rows (rows; zero: not kept) and each one's place.
func (m *parted) addMatched(ctx context.Context, src arrow.RecordBatch, rows Rows, places []Place) error {
	perm := placeOrder(places)
	k1, k2 := make([]int64, len(perm)), make([]int64, len(perm))
	for i, p := range perm {
		k1[i], k2[i] = int64(places[p].File), places[p].Row
	}
	sorted, err := arrowx.GatherRows(ctx, src, perm)
	if err != nil {
		return err
	}
	defer sorted.Release()
	cols := slices.Clone(sorted.Columns())
	fields := slices.Clone(sorted.Schema().Fields())
	if m.table != nil {
		refs := make([]Ref, len(perm))
		for i, p := range perm {
			refs[i] = rows.At[p]
		}
		held, err := GatherOne(ctx, rows.Recs, refs)
		if err != nil {
			return err
		}
		defer held.Release()
		for i, c := range held.Columns() {
			cols = append(cols, c)
			f := m.table.Field(i)
			f.Name = fmt.Sprintf("_orchestrator_t%d", i)
			fields = append(fields, f)
		}
	}
	return m.spill(&m.matched, fields, cols, src.NumRows(), k1, k2)
}

// placeOrder is the order of places by (file, row).
func placeOrder(places []Place) []int32 {
	perm := make([]int32, len(places))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int {
		return cmp.Or(cmp.Compare(places[a].File, places[b].File), cmp.Compare(places[a].Row, places[b].Row))
	})
	return perm
}

// addInserts adds a pass's rows to insert (MERGE source rows), with their order, by
// (ord, ord2) (rows of one order keep theirs).
func (m *parted) addInserts(ctx context.Context, src arrow.RecordBatch, ord, ord2 []int64) error {
	perm := insertOrder(ord, ord2)
	s1, s2 := make([]int64, len(ord)), make([]int64, len(ord))
	for i, p := range perm {
		s1[i], s2[i] = ord[p], ord2[p]
	}
	sorted, err := arrowx.GatherRows(ctx, src, perm)
	if err != nil {
		return err
	}
	defer sorted.Release()
	return m.spill(&m.inserts, slices.Clone(sorted.Schema().Fields()), slices.Clone(sorted.Columns()), sorted.NumRows(), s1, s2)
}

// insertOrder is the stable order of rows by (ord, ord2) (ord2 nil: zeros).
func insertOrder(ord, ord2 []int64) []int32 {
	perm := make([]int32, len(ord))
	for i := range perm {
		perm[i] = int32(i)
	}
	second := func(i int32) int64 {
		if ord2 == nil {
			return 0
		}
		return ord2[i]
	}
	slices.SortStableFunc(perm, func(a, b int32) int { return cmp.Or(cmp.Compare(ord[a], ord[b]), cmp.Compare(second(a), second(b))) })
	return perm
}

// spill writes the n rows of cols (in order) to a new spill file of list, with the
// order columns k1, k2, in chunks.
func (m *parted) spill(list *[]*File, fields []arrow.Field, cols []arrow.Array, n int64, k1, k2 []int64) error {
	if n == 0 {
		return nil
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, n)
	defer rec.Release()
	fields = append(fields, arrow.Field{Name: orderColumn1, Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: orderColumn2, Type: arrow.PrimitiveTypes.Int64})
	schema := arrow.NewSchema(fields, nil)
	f, err := m.dir.Create(schema)
	if err != nil {
		return err
	}
	*list = append(*list, f)
	per := float64(RecordBytes(rec)) / float64(n)
	for lo := int64(0); lo < n; lo += spillChunk {
		hi := min(lo+spillChunk, n)
		part := rec.NewSlice(lo, hi)
		c := append(slices.Clone(part.Columns()), Int64s(k1[lo:hi]), Int64s(k2[lo:hi]))
		chunk := array.NewRecordBatch(schema, c, hi-lo)
		err := f.Write(chunk, int64(per*float64(hi-lo))+16*(hi-lo))
		chunk.Release()
		c[len(c)-1].Release()
		c[len(c)-2].Release()
		part.Release()
		if err != nil {
			return err
		}
	}
	return f.Finish()
}

// run merges what the passes added, in parts, through mp (which the caller commits);
// onPart is told of each part merged.
func (m *parted) run(ctx context.Context, mp *delta.MergeInParts, onPart func(int)) error {
	nsrc := len(m.source.Fields())
	parts := 0
	err := m.mergeSpills(ctx, m.matched, true, func(rec arrow.RecordBatch) error {
		k1, k2 := orderColumns(rec)
		src := array.NewRecordBatch(m.source, rec.Columns()[:nsrc], rec.NumRows())
		defer src.Release()
		pos := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
		n := int(rec.NumRows())
		for lo := 0; lo < n; {
			hi := lo
			for hi < n && k1.Value(hi) == k1.Value(lo) {
				hi++
			}
			fm := &delta.FileMatches{Target: slices.Clone(k2.Int64Values()[lo:hi]), Source: make([]int32, hi-lo)}
			for i := range fm.Source {
				fm.Source[i] = int32(lo + i)
			}
			if m.table != nil {
				held := array.NewRecordBatch(m.table, rec.Columns()[nsrc:nsrc+len(m.table.Fields())], rec.NumRows())
				fm.Rows = []arrow.RecordBatch{held.NewSlice(int64(lo), int64(hi))}
				held.Release()
			}
			pos.Files[m.files[k1.Value(lo)].Path] = fm
			lo = hi
		}
		defer func() {
			for _, fm := range pos.Files {
				arrowx.ReleaseRecords(fm.Rows)
			}
		}()
		parts++
		if onPart != nil {
			onPart(parts)
		}
		return mp.Merge(ctx, []arrow.RecordBatch{src}, pos)
	})
	if err != nil {
		return err
	}
	return m.mergeSpills(ctx, m.inserts, false, func(rec arrow.RecordBatch) error {
		src := array.NewRecordBatch(m.source, rec.Columns()[:nsrc], rec.NumRows())
		defer src.Release()
		parts++
		if onPart != nil {
			onPart(parts)
		}
		return mp.Merge(ctx, []arrow.RecordBatch{src}, nil)
	})
}

func orderColumns(rec arrow.RecordBatch) (k1, k2 *array.Int64) {
	n := int(rec.NumCols())
	return rec.Column(n - 2).(*array.Int64), rec.Column(n - 1).(*array.Int64)
}

// mergeSpills reads the rows of files merged in (k1, k2) order, and hands them to part
// in records of about m.limit bytes; byFile: a run of rows with one k1 (a target file)
// is never cut.
func (m *parted) mergeSpills(ctx context.Context, files []*File, byFile bool, part func(arrow.RecordBatch) error) error {
	var rows, bytes int64
	for _, f := range files {
		rows, bytes = rows+f.rows, bytes+f.bytes
	}
	if rows == 0 {
		return nil
	}
	partRows := max(1, int(float64(m.limit)/(float64(bytes)/float64(rows))))
	km := &kmerge{}
	defer km.close()
	for i, f := range files {
		r, err := f.Open()
		if err != nil {
			return err
		}
		c := &cursor{r: r, id: i}
		km.all = append(km.all, c)
		if err := c.next(); err != nil {
			return err
		}
		if c.rec() != nil {
			km.h = append(km.h, c)
		}
	}
	heap.Init(&km.h)
	last := int64(-1)
	for len(km.h) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := km.h[0]
		k1 := c.k1.Value(c.row)
		if len(km.sel) >= partRows && (!byFile || k1 != last) {
			if err := km.flush(ctx, part); err != nil {
				return err
			}
		}
		last = k1
		km.sel = append(km.sel, selected{c: c.id, rec: len(c.recs) - 1, row: c.row})
		c.row++
		if c.row == int(c.rec().NumRows()) {
			if err := c.next(); err != nil {
				return err
			}
		}
		if c.rec() == nil {
			heap.Pop(&km.h)
		} else {
			heap.Fix(&km.h, 0)
		}
	}
	return km.flush(ctx, part)
}

// cursor reads one spill file for kmerge: the records read since the last part (the
// last is the current one) and the current row.
type cursor struct {
	r      *Reader
	id     int
	recs   []arrow.RecordBatch
	first  int // the first row of recs[0] not yet handed out
	row    int
	k1, k2 *array.Int64
	done   bool
}

func (c *cursor) rec() arrow.RecordBatch {
	if c.done || len(c.recs) == 0 {
		return nil
	}
	return c.recs[len(c.recs)-1]
}

// next moves to the next non-empty record (or to the end).
func (c *cursor) next() error {
	for c.r.Next() {
		rec := c.r.RecordBatch()
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		if len(c.recs) == 0 {
			c.first = 0
		}
		c.recs = append(c.recs, rec)
		c.row = 0
		c.k1, c.k2 = orderColumns(rec)
		return nil
	}
	c.done = true
	return c.r.Err()
}

type selected struct{ c, rec, row int }

// kmerge is the merge of several cursors by (k1, k2, cursor), and the rows taken since
// the last part.
type kmerge struct {
	all []*cursor
	h   cursorHeap
	sel []selected
}

// flush hands the selected rows, in order, to part as one record, and drops the
// records no longer needed.
func (km *kmerge) flush(ctx context.Context, part func(arrow.RecordBatch) error) error {
	if len(km.sel) == 0 {
		return nil
	}
	// The rows each cursor handed out are consecutive in its records: slice them out,
	// one concatenation of all, then one gather in the selected order.
	var parts []arrow.RecordBatch
	base := map[[2]int]int{} // (cursor, rec) → index in the concatenation of its first row
	off := 0
	for _, c := range km.all {
		for r, rec := range c.recs {
			lo, hi := 0, int(rec.NumRows())
			if r == 0 {
				lo = c.first
			}
			if r == len(c.recs)-1 && !c.done {
				hi = c.row
			}
			if hi <= lo {
				continue
			}
			base[[2]int{c.id, r}] = off - lo
			parts = append(parts, rec.NewSlice(int64(lo), int64(hi)))
			off += hi - lo
		}
	}
	defer arrowx.ReleaseRecords(parts)
	all, err := arrowx.Concat(memory.DefaultAllocator, parts)
	if err != nil {
		return err
	}
	defer all.Release()
	idx := make([]int32, len(km.sel))
	for i, s := range km.sel {
		idx[i] = int32(base[[2]int{s.c, s.rec}] + s.row)
	}
	out, err := arrowx.GatherRows(ctx, all, idx)
	if err != nil {
		return err
	}
	defer out.Release()
	km.sel = km.sel[:0]
	for _, c := range km.all {
		if len(c.recs) == 0 {
			continue
		}
		keep := c.recs[len(c.recs)-1]
		arrowx.ReleaseRecords(c.recs[:len(c.recs)-1])
		c.recs = append(c.recs[:0], keep)
		c.first = c.row
		if c.done {
			keep.Release()
			c.recs = c.recs[:0]
		}
	}
	return part(out)
}

func (km *kmerge) close() {
	for _, c := range km.all {
		arrowx.ReleaseRecords(c.recs)
		c.recs = nil
		c.r.Close()
	}
}

// cursorHeap orders cursors by their current row's (k1, k2), then by cursor.
type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return cmp.Or(cmp.Compare(a.k1.Value(a.row), b.k1.Value(b.row)), cmp.Compare(a.k2.Value(a.row), b.k2.Value(b.row)), cmp.Compare(a.id, b.id)) < 0
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
