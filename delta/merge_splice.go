package delta

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
)

// A splice rewrites a data file whose rows stay where they are and change in a few
// columns only (an SCD2 merge closes versions: it sets valid_to and is_current). The new
// file has the old one's row groups; the changed columns' chunks are encoded anew, every
// other chunk is copied byte for byte (pqfile.WriteSpliced), and the footer is the old
// footer with the chunks' offsets moved. It costs decoding and encoding the changed
// columns instead of every column. Files it cannot splice safely (see planSplice) are
// rewritten the usual way.

// spliceGivenRows merges a file of a table without deletion vectors from the matched
// rows the caller gave (fm.Rows), as mergeGivenRows does with vectors, when the clauses
// update rows and delete none: the new file is the old one with the updated values
// spliced in (planSplice, then splice.write in the background), so only the columns
// whose values change are decoded and encoded. handled is false, with nothing written or
// counted, when that does not apply; the caller then rewrites the file. live is the
// file's row count.
func (m *merger) spliceGivenRows(ctx context.Context, a *Add, fm *FileMatches, live int64) (handled, touched bool, err error) {
	if a.DeletionVector != nil {
		return false, false, nil
	}
	plans, err := m.planGivenRows(ctx, a, fm, live)
	if err != nil {
		return false, false, err
	}
	var ups []spliceUpdate
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
		keys := make([]int, 0, len(p.updateTargets))
		for key := range p.updateTargets {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			tgt := p.updateTargets[key]
			pre, post, err := m.updateRows(ctx, p, key, tgt)
			if err != nil {
				return false, false, err
			}
			u := spliceUpdate{key: key, pre: pre, post: post, rows: make([]int64, len(tgt))}
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
	patch, cols, err := m.patchInFileOrder(ups, changed)
	if err != nil {
		return false, false, err
	}
	defer func() {
		if patch != nil {
			arrowx.ReleaseArrays(patch.vals)
		}
	}()
	if len(cols) > 0 { // else every expr.Value stays as it was: so does the file
		s, ok, err := m.planSplice(a, cols)
		if err != nil || !ok {
			return false, false, err
		}
		m.splices.start(s, patch) // written while the MERGE goes on
		patch = nil
	}
	for _, u := range ups {
		live -= int64(len(u.rows))
	}
	m.res.NumTargetRowsCopied += live // the rows not updated
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

// spliceUpdate is the rows of a file one clause updates: before and after, and where
// they are in the file.
type spliceUpdate struct {
	key       int // the clause (recordPlan.updateTargets)
	pre, post arrow.RecordBatch
	rows      []int64 // file positions
}

// patchInFileOrder is the splice patch of updates ups: the new values of the columns
// that changed (changed, by table column; cols lists them) in file order.
func (m *merger) patchInFileOrder(ups []spliceUpdate, changed []bool) (_ *splicePatch, cols []int, err error) {
	// order[i] is the i-th updated row of the file, row in of update up.
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
	for c, ch := range changed {
		if !ch {
			continue
		}
		parts := make([]arrow.Array, len(ups))
		for j, u := range ups {
			parts[j] = u.post.Column(c)
		}
		all, err := array.Concatenate(parts, m.w.mem)
		if err != nil {
			arrowx.ReleaseArrays(patch.vals)
			return nil, nil, err
		}
		cols = append(cols, c)
		patch.vals = append(patch.vals, arrowx.GatherArray(m.w.mem, all, idx))
		all.Release()
	}
	return patch, cols, nil
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

// splicePatch is the new values of a file's updated rows: rows are file positions in
// ascending order, vals[j] the new values of changed column j in that order.
type splicePatch struct {
	rows []int64
	vals []arrow.Array
}

// splice is one file's splice, checked (planSplice) and ready to write. It holds the
// old file open until write or close.
type splice struct {
	snap     *Snapshot
	opts     WriteOptions // the MERGE's data files'
	mem      memory.Allocator
	a        *Add
	rel      string // a's path in the table
	src      source
	release  func()
	fr       *pqarrow.FileReader
	closeFR  func()
	foot     *pqfile.Footer
	fields   []int // the changed columns: top-level field in the file
	leaf     []int // and leaf column
	chST     *StructType
	chSchema *arrow.Schema
}

// planSplice checks whether file a can be spliced with the columns cols (indexes into
// the table schema) changed and opens it: ok is false, with nothing kept open, when it
// cannot; the caller then rewrites it whole.
func (m *merger) planSplice(a *Add, cols []int) (_ *splice, ok bool, err error) {
	snap, tbl := m.snap, m.w.tblSch
	if len(a.PartitionValues) != len(snap.PartitionColumns()) {
		return nil, false, nil
	}
	for _, c := range cols {
		for _, p := range snap.PartitionColumns() {
			if strings.EqualFold(p, snap.Schema().Fields[c].Name) {
				return nil, false, nil // the rows move to another partition
			}
		}
		if !pqfile.IsFlat(arrow.NewSchema([]arrow.Field{tbl.Field(c)}, nil)) {
			return nil, false, nil
		}
	}
	t := snap.Table()
	s := &splice{snap: snap, opts: m.w.data.opts, mem: m.w.mem, a: a}
	if s.rel, ok = t.relPath(a.Path); !ok {
		return nil, false, nil // an absolute URI (a shallow clone's file)
	}
	defer func() {
		if !ok {
			s.close()
		}
	}()
	key := t.key(s.rel)
	// The file is written in the background (spliceGroup), past the ctx of this file's
	// merge: it is read under the MERGE's.
	if s.src, s.release, err = openSource(m.splices.ctx, t.Store(), key, a.Size); err != nil {
		return nil, false, err
	}
	if s.foot, ok, err = pqfile.ReadFooter(s.src, a.Size); err != nil {
		return nil, false, fmt.Errorf("%s: %w", a.Path, err)
	}
	if !ok || !s.foot.CheckChunks(a.Size) {
		return nil, false, nil
	}
	if s.fr, s.closeFR, err = parquetFrom(s.src, key, s.mem); err != nil {
		return nil, false, err
	}
	md := s.fr.ParquetReader().MetaData()
	if md.NumRowGroups() != s.foot.NumRowGroups() {
		return nil, false, nil
	}
	for rg := range md.NumRowGroups() {
		if md.RowGroup(rg).NumRows() == 0 {
			return nil, false, nil
		}
	}
	// The changed columns in the file: top-level leaves of the table's type.
	s.fields, s.leaf = make([]int, len(cols)), make([]int, len(cols))
	s.chST = &StructType{}
	chFields := make([]arrow.Field, len(cols))
	for j, c := range cols {
		s.fields[j] = -1
		phys := physicalName(snap.Schema().Fields[c]) // column mapping: the file's name for it
		for i, f := range s.fr.Manifest.Fields {
			if f.Field.Name == phys {
				s.fields[j], s.leaf[j] = i, f.ColIndex
			}
		}
		if s.fields[j] < 0 {
			return nil, false, nil
		}
		f := s.fr.Manifest.Fields[s.fields[j]]
		if !f.IsLeaf() || s.leaf[j] >= s.foot.NumLeaves() || !arrow.TypeEqual(f.Field.Type, tbl.Field(c).Type) {
			return nil, false, nil
		}
		s.chST.Fields = append(s.chST.Fields, snap.Schema().Fields[c])
		chFields[j] = tbl.Field(c)
		chFields[j].Name = phys // the chunk is written under the file's name of the column
		chFields[j].Metadata = f.Field.Metadata
	}
	s.chSchema = arrow.NewSchema(chFields, nil)
	if ok, err = s.storedAsWeWrite(); err != nil || !ok {
		return nil, false, err
	}
	return s, true, nil
}

// storedAsWeWrite reports whether the file stores each changed column as we write it
// (same physical and logical type, same repetition): the schema of an empty file of
// those columns says how we do.
func (s *splice) storedAsWeWrite() (bool, error) {
	var empty bytes.Buffer
	props, aprops := parquetWriterProps(s.opts, nil)
	fw, err := pqfile.NewFlatWriter(s.chSchema, &empty, props, aprops)
	if err == nil {
		err = fw.Close()
	}
	if err != nil {
		return false, err
	}
	ours, _, err := pqfile.ReadFooter(bytes.NewReader(empty.Bytes()), int64(empty.Len()))
	if err != nil {
		return false, err
	}
	for j := range s.leaf {
		if !pqfile.SameLeafType(s.foot, s.leaf[j], ours, j) {
			return false, nil // another type, or required
		}
	}
	return true, nil
}

// close releases the old file.
func (s *splice) close() {
	if s.closeFR != nil {
		s.closeFR()
	}
	if s.release != nil {
		s.release()
	}
}

// write writes the spliced file, with patch's values, and returns its add. It closes s.
func (s *splice) write(ctx context.Context, patch *splicePatch) (*Add, error) {
	defer s.close()
	a := s.a
	enc, stats, err := s.encodePatched(ctx, patch)
	if err != nil {
		return nil, err
	}
	encFoot, ok, err := pqfile.ReadFooter(bytes.NewReader(enc), int64(len(enc)))
	if err != nil || !ok {
		return nil, fmt.Errorf("%s: the spliced columns' footer: %v", a.Path, err)
	}
	replaced := make(map[int]int, len(s.leaf)) // file leaf -> spliced column
	for j, l := range s.leaf {
		replaced[l] = j
	}
	newRel, size, err := s.writeSpliced(ctx, enc, encFoot, replaced)
	if err != nil {
		return nil, fmt.Errorf("splice %s: %w", a.Path, err)
	}
	return &Add{
		Path:             encodePath(newRel),
		PartitionValues:  a.PartitionValues,
		Size:             size,
		ModificationTime: s.opts.Now().UnixMilli(),
		DataChange:       true,
		Stats:            spliceStats(a.Stats, stats.JSON(), s.chST),
	}, nil
}

// encodePatched encodes the changed columns, patched, row group by row group into a
// Parquet file of their own (enc), whose chunks then go into the new file; stats are the
// changed columns' statistics.
func (s *splice) encodePatched(ctx context.Context, patch *splicePatch) (enc []byte, stats *fileStats, err error) {
	a := s.a
	md := s.fr.ParquetReader().MetaData()
	stats = newFileStats(s.chST, -1)
	var buf bytes.Buffer
	var fw *pqfile.FlatWriter
	defer func() {
		if fw != nil {
			fw.Close()
		}
	}()
	first, k := int64(0), 0 // file position of the row group's first row; next patched row
	for rg := range md.NumRowGroups() {
		n := md.RowGroup(rg).NumRows()
		hi := k
		for hi < len(patch.rows) && patch.rows[hi] < first+n {
			hi++
		}
		rec, err := s.patchedRowGroup(ctx, rg, patch, k, hi, first)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a.Path, err)
		}
		stats.update(rec)
		if fw == nil {
			props, aprops := parquetWriterProps(s.opts, rec)
			if fw, err = pqfile.NewFlatWriter(s.chSchema, &buf, props, aprops); err != nil {
				rec.Release()
				return nil, nil, err
			}
		}
		err = fw.WriteBuffered(rec)
		rec.Release()
		if err == nil {
			err = fw.NewBufferedRowGroupChecked()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a.Path, err)
		}
		first, k = first+n, hi
	}
	if k != len(patch.rows) {
		return nil, nil, fmt.Errorf("%s: updated row %d is past the file's %d rows", a.Path, patch.rows[k], first)
	}
	err = fw.Close()
	fw = nil
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", a.Path, err)
	}
	return buf.Bytes(), stats, nil
}

// writeSpliced writes and uploads the new file beside the old one: the old file's
// chunks with the changed columns' (leaf -> column of enc in replaced) from enc. It
// returns the new file's path relative to the table and its size.
func (s *splice) writeSpliced(ctx context.Context, enc []byte, encFoot *pqfile.Footer, replaced map[int]int) (string, int64, error) {
	t := s.snap.Table()
	dir := path.Dir(s.rel)
	if dir == "." {
		dir = ""
	} else {
		dir += "/"
	}
	newRel := fmt.Sprintf("%s%s-00000-%s-c000%s.parquet", dir, s.opts.FilePrefix, uuid.NewString(), codecSuffix(s.opts))
	sink := newStreamSink(ctx, t.Store(), t.key(newRel))
	size, err := pqfile.WriteSpliced(sink, s.src, s.foot, bytes.NewReader(enc), encFoot, replaced)
	if err == nil {
		err = sink.upload(ctx, t.Store(), "")
	} else {
		sink.release()
	}
	return newRel, size, err
}

// spliceGroup writes a MERGE's spliced files in the background (at most n at once),
// while the MERGE goes on with its other files and its inserts. Its workers share it.
type spliceGroup struct {
	ctx  context.Context // the MERGE's (a worker's ends with each file)
	g    errgroup.Group
	mu   sync.Mutex // guards adds
	adds []*Add
}

func newSpliceGroup(ctx context.Context, n int) *spliceGroup {
	g := &spliceGroup{ctx: ctx}
	g.g.SetLimit(max(n, 1))
	return g
}

// start writes s with patch in the background (waiting for a turn when n are being
// written); the group owns patch from now on.
func (g *spliceGroup) start(s *splice, patch *splicePatch) {
	g.g.Go(func() error {
		add, err := s.write(g.ctx, patch)
		arrowx.ReleaseArrays(patch.vals)
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.adds = append(g.adds, add)
		g.mu.Unlock()
		return nil
	})
}

// wait waits for every splice started and returns their adds, or the first error.
func (g *spliceGroup) wait() ([]*Add, error) {
	err := g.g.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.adds, err
}

// patchedRowGroup reads the changed columns of row group rg (whose first row is file
// position first) and puts in patch's rows k..hi-1.
func (s *splice) patchedRowGroup(ctx context.Context, rg int, patch *splicePatch, k, hi int, first int64) (arrow.RecordBatch, error) {
	cr, err := pqfile.OpenColumns(ctx, s.fr, s.mem, s.fields, []int{rg}, 0, "data file")
	if err != nil {
		return nil, err
	}
	defer cr.Release()
	if !cr.Next() {
		if err := cr.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("row group %d: no rows read", rg)
	}
	old := cr.RecordBatch()
	n := int(old.NumRows())
	idx := indexRange(n)
	for j := k; j < hi; j++ {
		idx[patch.rows[j]-first] = int32(n + j - k)
	}
	out := make([]arrow.Array, len(s.fields))
	defer arrowx.ReleaseArrays(out)
	for j := range s.fields {
		vals := array.NewSlice(patch.vals[j], int64(k), int64(hi))
		both, err := array.Concatenate([]arrow.Array{old.Column(j), vals}, s.mem)
		vals.Release()
		if err != nil {
			return nil, err
		}
		out[j] = arrowx.GatherArray(s.mem, both, idx)
		both.Release()
	}
	return array.NewRecordBatch(s.chSchema, out, int64(n)), nil
}

// spliceStats is the stats of a spliced file: the old file's, with the changed columns'
// (in fresh, computed over the new file's values of the columns of ch) taking the
// place of theirs. A column the old stats did not cover stays uncovered.
func spliceStats(old, fresh string, ch *StructType) string {
	if old == "" {
		return ""
	}
	var o, f map[string]any
	if err := unmarshalNumbers(old, &o); err != nil {
		return ""
	}
	if err := unmarshalNumbers(fresh, &f); err != nil {
		return ""
	}
	nulls, _ := o["nullCount"].(map[string]any)
	for _, col := range ch.Fields {
		name := physicalName(col) // stats name columns physically (column mapping)
		if _, covered := nulls[name]; !covered {
			continue
		}
		for _, k := range []string{"minValues", "maxValues", "nullCount"} {
			om, _ := o[k].(map[string]any)
			fm, _ := f[k].(map[string]any)
			if v, ok := fm[name]; ok {
				if om == nil {
					om = map[string]any{}
					o[k] = om
				}
				om[name] = v
			} else if om != nil {
				delete(om, name)
			}
		}
	}
	b, err := json.Marshal(o)
	if err != nil {
		return ""
	}
	return string(b)
}

func unmarshalNumbers(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	return d.Decode(v)
}
