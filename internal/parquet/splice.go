package parquet

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// A splice rewrites a data file whose rows stay where they are and change in a few
// columns only. The new file has the old one's row groups; the changed columns' chunks
// come from a file of those columns alone (encoded by the caller), every other chunk is
// copied byte for byte, and the footer is the old footer with the chunks' offsets moved.
// This file is the byte work: reading and checking footers, and writing the spliced
// file. Which files to splice, and the new values, are the caller's.

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

// Footer is a Parquet file's decoded footer.
type Footer struct {
	meta   tValue
	leaves []int // index in the schema list of each leaf column
}

// ReadFooter reads and decodes the footer of the size-byte file src. ok is false for a
// footer splicing does not handle (encrypted, or a schema that is not a tree).
func ReadFooter(src io.ReaderAt, size int64) (_ *Footer, ok bool, _ error) {
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
	f := &Footer{meta: meta}
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

// NumRowGroups is the number of row groups the footer lists.
func (f *Footer) NumRowGroups() int { return len(f.rowGroups()) }

// NumLeaves is the number of leaf columns of the file's schema.
func (f *Footer) NumLeaves() int { return len(f.leaves) }

// rowGroups returns the footer's row groups.
func (f *Footer) rowGroups() []tValue {
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

// CheckChunks reports whether every chunk of the footer lies inside the file's data
// (between the magic and the footer) and the chunks of each row group follow one another
// with no gap or overlap (as every writer lays them out), so copying each chunk's range
// copies exactly its pages: a size that left out a page would leave a gap.
func (f *Footer) CheckChunks(size int64) bool {
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

// SameLeafType says whether leaf column i of a and leaf column j of b are stored the
// same way (schema elements equal but for their name and field id): same physical and
// logical type, same repetition.
func SameLeafType(a *Footer, i int, b *Footer, j int) bool {
	x, y := a.meta.field(fmSchema).elems[a.leaves[i]], b.meta.field(fmSchema).elems[b.leaves[j]]
	x.fields, y.fields = append([]tField(nil), x.fields...), append([]tField(nil), y.fields...)
	x.drop(seName, seFieldID)
	y.drop(seName, seFieldID)
	return bytes.Equal(encodeThrift(nil, &x), encodeThrift(nil, &y))
}

// WriteSpliced writes the spliced file to w and returns its size: every chunk of the old
// file (src, foot) in order, except the leaves in replaced, whose chunks come from the
// file of spliced columns (enc, encFoot: leaf replaced[i] there takes the place of leaf
// i) instead; then the old footer with the chunks' new places. foot must have passed
// CheckChunks, and encFoot have foot's row groups with the same rows; it edits both.
func WriteSpliced(w io.Writer, src io.ReaderAt, foot *Footer, enc io.ReaderAt, encFoot *Footer, replaced map[int]int) (int64, error) {
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
