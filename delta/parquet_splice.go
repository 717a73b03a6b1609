package delta

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"
)

// A splice rewrites a data file whose rows stay where they are and change in a few
// columns only (an SCD2 merge closes versions: it sets valid_to and is_current). The new
// file has the old one's row groups; the changed columns' chunks are encoded anew, every
// other chunk is copied byte for byte, and the footer is the old footer with the chunks'
// offsets moved. It costs decoding and encoding the changed columns instead of every
// column. Files it cannot splice safely (see planSplice) are rewritten the usual way.

// splicePatch is the new values of a file's updated rows: rows are file positions in
// ascending order, vals[j] the new values of changed column j in that order.
type splicePatch struct {
	rows []int64
	vals []arrow.Array
}

// Footer field ids (parquet.thrift).
const (
	fmSchema    = 2 // FileMetaData.schema
	fmRowGroups = 4 // FileMetaData.row_groups

	seName     = 4 // SchemaElement.name
	seChildren = 5 // SchemaElement.num_children
	seFieldID  = 9 // SchemaElement.field_id

	rgColumns         = 1 // RowGroup.columns
	rgTotalByteSize   = 2
	rgFileOffset      = 5
	rgTotalCompressed = 6

	ccFilePath   = 1 // ColumnChunk.file_path
	ccFileOffset = 2
	ccMetaData   = 3 // 4-7: page index locations; 8, 9: encryption

	cmUncompressed = 6 // ColumnMetaData.total_uncompressed_size
	cmCompressed   = 7
	cmDataPage     = 9
	cmIndexPage    = 10
	cmDictPage     = 11 // 14, 15: bloom filter location
)

// parquetFooter is a data file's decoded footer.
type parquetFooter struct {
	meta   tValue
	leaves []int // index in the schema list of each leaf column
}

// readFooter reads and decodes the footer of the size-byte file src. ok is false for a
// footer splicing does not handle (encrypted).
func readFooter(src io.ReaderAt, size int64) (*parquetFooter, bool, error) {
	var tail [8]byte
	if size < 12 {
		return nil, false, fmt.Errorf("not a parquet file: %d bytes", size)
	}
	if _, err := src.ReadAt(tail[:], size-8); err != nil {
		return nil, false, err
	}
	if string(tail[4:]) != "PAR1" {
		return nil, false, nil // PARE: encrypted footer
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return nil, false, fmt.Errorf("parquet footer of %d bytes in a %d-byte file", n, size)
	}
	buf := make([]byte, n)
	if _, err := src.ReadAt(buf, size-8-n); err != nil {
		return nil, false, err
	}
	meta, err := decodeThriftStruct(buf)
	if err != nil {
		return nil, false, fmt.Errorf("parquet footer: %w", err)
	}
	f := &parquetFooter{meta: meta}
	sch := meta.field(fmSchema)
	if sch == nil || len(sch.elems) == 0 {
		return nil, false, nil
	}
	// Elements are the schema tree in depth-first order; a leaf has no num_children.
	var walk func(i int) (int, bool)
	walk = func(i int) (int, bool) {
		if i >= len(sch.elems) {
			return i, false
		}
		kids, group := sch.elems[i].int(seChildren)
		if !group {
			f.leaves = append(f.leaves, i)
			return i + 1, true
		}
		next := i + 1
		for range kids {
			var ok bool
			if next, ok = walk(next); !ok {
				return next, false
			}
		}
		return next, true
	}
	if end, ok := walk(0); !ok || end != len(sch.elems) {
		return nil, false, nil
	}
	return f, true, nil
}

// rowGroups returns the footer's row groups.
func (f *parquetFooter) rowGroups() []tValue {
	if rgs := f.meta.field(fmRowGroups); rgs != nil {
		return rgs.elems
	}
	return nil
}

// chunkRange is where a column chunk's pages lie: from its first page (dictionary, index
// or data) for its compressed size. ok is false for a chunk splicing does not handle
// (in another file, or encrypted).
func chunkRange(cc *tValue) (start, n int64, ok bool) {
	md := cc.field(ccMetaData)
	if md == nil || cc.field(ccFilePath) != nil || cc.field(8) != nil || cc.field(9) != nil {
		return 0, 0, false
	}
	start, ok = md.int(cmDataPage)
	if !ok {
		return 0, 0, false
	}
	for _, id := range []int16{cmDictPage, cmIndexPage} {
		if o, set := md.int(id); set && o > 0 && o < start {
			start = o
		}
	}
	n, ok = md.int(cmCompressed)
	return start, n, ok && n > 0
}

// moveChunk shifts a chunk's page offsets by d and drops the locations of what stays
// behind (page index, bloom filter: optional, and not copied).
func moveChunk(cc *tValue, d int64) {
	if o, ok := cc.int(ccFileOffset); ok && o > 0 {
		cc.setInt(ccFileOffset, tI64, o+d)
	}
	cc.drop(4, 5, 6, 7)
	md := cc.field(ccMetaData)
	for _, id := range []int16{cmDataPage, cmIndexPage, cmDictPage} {
		if o, ok := md.int(id); ok && o > 0 {
			md.setInt(id, tI64, o+d)
		}
	}
	md.drop(14, 15)
}

// checkChunks reports whether every chunk of the footer lies inside the file's data
// (between the magic and the footer) and the chunks of each row group follow one another
// with no gap or overlap (as every writer lays them out), so copying each chunk's range
// copies exactly its pages: a size that left out a page would leave a gap.
func (f *parquetFooter) checkChunks(size int64) bool {
	type span struct{ lo, hi int64 }
	var all []span
	for _, rg := range f.rowGroups() {
		cols := rg.field(rgColumns)
		if cols == nil || len(cols.elems) != len(f.leaves) {
			return false
		}
		first, last, total := size, int64(0), int64(0)
		for i := range cols.elems {
			lo, n, ok := chunkRange(&cols.elems[i])
			if !ok || lo < 4 || lo+n > size-8 {
				return false
			}
			all = append(all, span{lo, lo + n})
			first, last, total = min(first, lo), max(last, lo+n), total+n
		}
		if last-first != total { // a gap (overlaps are caught below)
			return false
		}
	}
	slices.SortFunc(all, func(x, y span) int { return cmp.Compare(x.lo, y.lo) })
	for i := 1; i < len(all); i++ {
		if all[i].lo < all[i-1].hi {
			return false
		}
	}
	return true
}

// sameLeafType says whether two schema elements describe the same column but for its name
// and field id.
func sameLeafType(a, b tValue) bool {
	a.fields, b.fields = append([]tField(nil), a.fields...), append([]tField(nil), b.fields...)
	a.drop(seName, seFieldID)
	b.drop(seName, seFieldID)
	return bytes.Equal(encodeThrift(nil, &a), encodeThrift(nil, &b))
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
	foot     *parquetFooter
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
		if !isFlat(arrow.NewSchema([]arrow.Field{tbl.Field(c)}, nil)) {
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
	if s.foot, ok, err = readFooter(s.src, a.Size); err != nil {
		return nil, false, fmt.Errorf("%s: %w", a.Path, err)
	}
	if !ok || !s.foot.checkChunks(a.Size) {
		return nil, false, nil
	}
	if s.fr, s.closeFR, err = parquetFrom(s.src, key, s.mem); err != nil {
		return nil, false, err
	}
	md := s.fr.ParquetReader().MetaData()
	if md.NumRowGroups() != len(s.foot.rowGroups()) {
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
		for i, f := range s.fr.Manifest.Fields {
			if f.Field.Name == tbl.Field(c).Name {
				s.fields[j], s.leaf[j] = i, f.ColIndex
			}
		}
		if s.fields[j] < 0 {
			return nil, false, nil
		}
		f := s.fr.Manifest.Fields[s.fields[j]]
		if !f.IsLeaf() || s.leaf[j] >= len(s.foot.leaves) || !arrow.TypeEqual(f.Field.Type, tbl.Field(c).Type) {
			return nil, false, nil
		}
		s.chST.Fields = append(s.chST.Fields, snap.Schema().Fields[c])
		chFields[j] = tbl.Field(c)
	}
	s.chSchema = arrow.NewSchema(chFields, nil)
	// The file must store each changed column as we write it (same physical and logical
	// type, same repetition): the schema of an empty file of those columns says how.
	var empty bytes.Buffer
	props, aprops := parquetWriterProps(s.opts, nil)
	fw, err := newFlatWriter(s.chSchema, &empty, props, aprops)
	if err == nil {
		err = fw.Close()
	}
	if err != nil {
		return nil, false, err
	}
	ours, _, err := readFooter(bytes.NewReader(empty.Bytes()), int64(empty.Len()))
	if err != nil {
		return nil, false, err
	}
	theirs := s.foot.meta.field(fmSchema)
	for j := range cols {
		if !sameLeafType(theirs.elems[s.foot.leaves[s.leaf[j]]], ours.meta.field(fmSchema).elems[ours.leaves[j]]) {
			return nil, false, nil // another type, or required
		}
	}
	return s, true, nil
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
	a, t := s.a, s.snap.Table()
	md := s.fr.ParquetReader().MetaData()
	// The changed columns, patched and encoded row group by row group into a file of
	// their own, whose chunks then go into the new file.
	stats := newFileStats(s.chST, -1)
	var enc bytes.Buffer
	var fw *flatWriter
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
			return nil, fmt.Errorf("%s: %w", a.Path, err)
		}
		stats.update(rec)
		if fw == nil {
			props, aprops := parquetWriterProps(s.opts, rec)
			if fw, err = newFlatWriter(s.chSchema, &enc, props, aprops); err != nil {
				rec.Release()
				return nil, err
			}
		}
		err = fw.WriteBuffered(rec)
		rec.Release()
		if err == nil {
			err = fw.NewBufferedRowGroupChecked()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.Path, err)
		}
		first, k = first+n, hi
	}
	if k != len(patch.rows) {
		return nil, fmt.Errorf("%s: updated row %d is past the file's %d rows", a.Path, patch.rows[k], first)
	}
	err := fw.Close()
	fw = nil
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Path, err)
	}
	encFoot, ok, err := readFooter(bytes.NewReader(enc.Bytes()), int64(enc.Len()))
	if err != nil || !ok {
		return nil, fmt.Errorf("%s: the spliced columns' footer: %v", a.Path, err)
	}
	replaced := make(map[int]int, len(s.leaf)) // file leaf -> spliced column
	for j, l := range s.leaf {
		replaced[l] = j
	}
	dir := path.Dir(s.rel)
	if dir == "." {
		dir = ""
	} else {
		dir += "/"
	}
	newRel := fmt.Sprintf("%s%s-00000-%s-c000%s.parquet", dir, s.opts.FilePrefix, uuid.NewString(), codecSuffix(s.opts))
	sink := newStreamSink(ctx, t.Store(), t.key(newRel))
	size, err := writeSpliced(sink, s.src, s.foot, bytes.NewReader(enc.Bytes()), encFoot, replaced)
	if err == nil {
		err = sink.upload(ctx, t.Store(), "")
	} else {
		sink.release()
	}
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

// spliceGroup writes a MERGE's spliced files in the background (at most cap(sem) at
// once), while the MERGE goes on with its other files and its inserts. Its workers
// share it.
type spliceGroup struct {
	ctx  context.Context // the MERGE's (a worker's ends with each file)
	sem  chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	adds []*Add
	err  error
}

func newSpliceGroup(ctx context.Context, n int) *spliceGroup {
	return &spliceGroup{ctx: ctx, sem: make(chan struct{}, max(n, 1))}
}

// start writes s with patch in the background; the group owns patch from now on.
func (g *spliceGroup) start(s *splice, patch *splicePatch) {
	g.sem <- struct{}{}
	g.wg.Go(func() {
		add, err := s.write(g.ctx, patch)
		releaseAll(patch.vals)
		g.mu.Lock()
		if err != nil {
			g.err = errors.Join(g.err, err)
		} else {
			g.adds = append(g.adds, add)
		}
		g.mu.Unlock()
		<-g.sem
	})
}

// wait waits for every splice started and returns their adds, or their errors.
func (g *spliceGroup) wait() ([]*Add, error) {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.adds, g.err
}

// patchedRowGroup reads the changed columns of row group rg (whose first row is file
// position first) and puts in patch's rows k..hi-1.
func (s *splice) patchedRowGroup(ctx context.Context, rg int, patch *splicePatch, k, hi int, first int64) (arrow.RecordBatch, error) {
	cr, err := openBatches(ctx, s.fr, s.mem, s.fields, []int{rg}, 0, "data file")
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
	defer releaseAll(out)
	for j := range s.fields {
		vals := array.NewSlice(patch.vals[j], int64(k), int64(hi))
		both, err := array.Concatenate([]arrow.Array{old.Column(j), vals}, s.mem)
		vals.Release()
		if err != nil {
			return nil, err
		}
		out[j] = gatherArray(s.mem, both, idx)
		both.Release()
	}
	return array.NewRecordBatch(s.chSchema, out, int64(n)), nil
}

// writeSpliced writes the spliced file to w: every chunk of the old file (src, foot) in
// order, except the leaves in replaced, whose chunks come from the file of spliced
// columns (enc, encFoot) instead; then the old footer with the chunks' new places. It
// edits both footers.
func writeSpliced(w io.Writer, src io.ReaderAt, foot *parquetFooter, enc io.ReaderAt, encFoot *parquetFooter, replaced map[int]int) (int64, error) {
	if _, err := io.WriteString(w, "PAR1"); err != nil {
		return 0, err
	}
	pos := int64(4)
	buf := make([]byte, 1<<20)
	newRGs := encFoot.rowGroups()
	rgs := foot.rowGroups()
	for r := range rgs {
		rg := &rgs[r]
		cols := rg.field(rgColumns).elems
		var total, compressed int64
		for i := range cols {
			from := src
			if j, ok := replaced[i]; ok {
				from, cols[i] = enc, newRGs[r].field(rgColumns).elems[j]
			}
			lo, n, _ := chunkRange(&cols[i])
			if _, err := io.CopyBuffer(w, io.NewSectionReader(from, lo, n), buf); err != nil {
				return 0, err
			}
			moveChunk(&cols[i], pos-lo)
			if _, ok := rg.int(rgFileOffset); ok && i == 0 {
				rg.setInt(rgFileOffset, tI64, pos)
			}
			pos += n
			u, _ := cols[i].field(ccMetaData).int(cmUncompressed)
			total, compressed = total+u, compressed+n
		}
		rg.setInt(rgTotalByteSize, tI64, total)
		if _, ok := rg.int(rgTotalCompressed); ok {
			rg.setInt(rgTotalCompressed, tI64, compressed)
		}
	}
	footer := encodeThrift(nil, &foot.meta)
	footer = binary.LittleEndian.AppendUint32(footer, uint32(len(footer)))
	footer = append(footer, "PAR1"...)
	if _, err := w.Write(footer); err != nil {
		return 0, err
	}
	return pos + int64(len(footer)), nil
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
		if _, covered := nulls[col.Name]; !covered {
			continue
		}
		for _, k := range []string{"minValues", "maxValues", "nullCount"} {
			om, _ := o[k].(map[string]any)
			fm, _ := f[k].(map[string]any)
			if v, ok := fm[col.Name]; ok {
				if om == nil {
					om = map[string]any{}
					o[k] = om
				}
				om[col.Name] = v
			} else if om != nil {
				delete(om, col.Name)
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
