package parquet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The string column decoder. pqarrow decodes a BYTE_ARRAY column value by value into an
// Arrow builder, which grows and zeroes its buffers as it goes: in scans of string-heavy
// tables (the SCD2 stage's source and dimension) that is the largest single cost. Flat
// string columns in the encodings every writer we know uses (PLAIN and dictionary pages,
// RLE definition levels) are decoded here instead, straight into one offsets and one data
// buffer per batch. Anything else (nested, other encodings, other Arrow types) stays with
// pqarrow: plainStringField decides per file.

// plainStringField reports whether top-level field i of fr is a flat string or binary
// column that byteArrayReader decodes in every row group of rowGroups.
func plainStringField(fr *pqarrow.FileReader, i int, rowGroups []int) bool {
	f := &fr.Manifest.Fields[i]
	if !f.IsLeaf() || f.Field == nil {
		return false
	}
	if id := f.Field.Type.ID(); id != arrow.STRING && id != arrow.BINARY {
		return false
	}
	col := fr.ParquetReader().MetaData().Schema.Column(f.ColIndex)
	if col.PhysicalType() != pq.Types.ByteArray || col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 {
		return false
	}
	return pageEncodingsRead(fr, f.ColIndex, rowGroups)
}

// pageEncodingsRead reports whether leaf column col of fr is, in every row group of
// rowGroups, in encodings byteArrayReader reads (PLAIN and dictionary pages, RLE levels)
// and not encrypted.
func pageEncodingsRead(fr *pqarrow.FileReader, col int, rowGroups []int) bool {
	md := fr.ParquetReader().MetaData()
	for _, rg := range rowGroups {
		cc, err := md.RowGroup(rg).ColumnChunk(col)
		if err != nil || cc.CryptoMetadata() != nil {
			return false
		}
		for _, e := range cc.Encodings() {
			switch e {
			case pq.Encodings.Plain, pq.Encodings.PlainDict, pq.Encodings.RLEDict, pq.Encodings.RLE:
			default:
				return false
			}
		}
	}
	return true
}

// byteArrayReader decodes one flat BYTE_ARRAY column over a list of row groups into
// Arrow string (or binary) arrays of a requested number of rows. With width set it
// reads a fixed-width column (fixedWidthField) instead, by pick only.
type byteArrayReader struct {
	pf        *file.Reader
	col       int
	typ       arrow.DataType
	width     int // bytes of a fixed-width value; 0: byte arrays
	maxDef    int16
	rowGroups []int
	nextRG    int // index into rowGroups of the next row group to open
	what      string

	pages   file.PageReader // of the current row group; nil between row groups
	dictOff []int32         // the row group's dictionary: value j is dictData[dictOff[j]:dictOff[j+1]]
	dictBuf []byte

	left  int // rows left in the current data page
	defs  rleDecoder
	plain []byte // PLAIN page: the values not read yet
	dict  bool   // dictionary page: indices come from ids
	ids   rleDecoder

	lvl, ix []uint32 // scratch
	iota    []int32  // 0, 1, 2, ... (identity)

	// A batch whose rows all hold one dictionary value (a load's file name in every
	// row) is not copied a row at a time: its rows are counted (runRows of runVal)
	// while its chunks go on with that value, and the batch is a slice of run, an
	// array of the value that the reader keeps for the batches after it.
	runVal  []byte
	runRows int
	run     arrow.Array
	runOf   []byte // run's value
}

func newByteArrayReader(fr *pqarrow.FileReader, i int, rowGroups []int, what string) *byteArrayReader {
	f := &fr.Manifest.Fields[i]
	pf := fr.ParquetReader()
	return &byteArrayReader{pf: pf, col: f.ColIndex, typ: f.Field.Type, rowGroups: rowGroups, what: what,
		maxDef: pf.MetaData().Schema.Column(f.ColIndex).MaxDefinitionLevel()}
}

func (r *byteArrayReader) close() {
	if r.pages != nil {
		r.pages.Close()
		r.pages = nil
	}
}

// release closes the reader and drops its run array (batches sliced from it keep it).
func (r *byteArrayReader) release() {
	r.close()
	if r.run != nil {
		r.run.Release()
		r.run, r.runOf = nil, nil
	}
}

func (r *byteArrayReader) corrupt(format string, args ...any) error {
	return fmt.Errorf("column %s: corrupt or unsupported page: %s", r.what, fmt.Sprintf(format, args...))
}

// next returns the next up to n rows as one array (nil at the end of the column), its
// buffers from mem.
func (r *byteArrayReader) next(n int, mem memory.Allocator) (arrow.Array, error) {
	offBuf := mem.Allocate((n + 1) * 4)
	offsets := arrow.Int32Traits.CastFromBytes(offBuf)[:n+1]
	offsets[0] = 0
	var data []byte  // made by the first chunk that copies values, sized by it
	var valid []byte // nil while every row is valid
	free := func() {
		mem.Free(offBuf)
		if data != nil {
			mem.Free(data)
		}
		if valid != nil {
			mem.Free(valid)
		}
	}
	r.runVal, r.runRows = nil, 0
	pos, nulls := 0, 0
	got, err := r.walk(n, func(got, k int) error {
		return r.chunk(k, mem, &data, &valid, offsets, &pos, &nulls, got, n)
	})
	if err != nil {
		free()
		return nil, err
	}
	if got == 0 {
		free()
		return nil, nil
	}
	if r.runRows == got {
		free()
		return r.runSlice(mem, got, n), nil
	}
	// Each buffer is freed whole (as allocated) and says how much of it is used.
	var vbuf *memory.Buffer
	if valid != nil {
		vbuf = sizedBuffer(valid, int(bitutil.BytesForBits(int64(got))), mem)
	}
	if data == nil { // every row empty or null
		data = mem.Allocate(1)
	}
	bufs := []*memory.Buffer{vbuf, sizedBuffer(offBuf, (got+1)*4, mem), sizedBuffer(data, pos, mem)}
	ad := array.NewData(r.typ, got, bufs, nil, nulls, 0)
	defer ad.Release()
	for _, b := range bufs {
		if b != nil {
			b.Release() // NewData holds them now
		}
	}
	return array.MakeFromData(ad), nil
}

// walk moves over the next n rows (fewer at the column's end) page by page: fn gets each
// chunk of a page's rows, its first row counted from the walk's start (got) and its rows
// (k), and moves past them. It returns the rows walked.
func (r *byteArrayReader) walk(n int, fn func(got, k int) error) (int, error) {
	got := 0
	for got < n {
		if r.left == 0 {
			more, err := r.nextPage()
			if err != nil {
				return got, err
			}
			if !more {
				break
			}
			continue
		}
		k := min(n-got, r.left)
		if err := fn(got, k); err != nil {
			return got, err
		}
		r.left -= k
		got += k
	}
	return got, nil
}

// levels reads the definition levels of the next k rows (nil: the column has none, every
// row holds a value) and counts the rows that hold a value.
func (r *byteArrayReader) levels(k int) (lvl []uint32, present int, err error) {
	if r.maxDef == 0 {
		return nil, k, nil
	}
	// (a column with no null: its levels are long runs of maxDef)
	if all, err := r.defs.repeats(k, uint32(r.maxDef)); err != nil {
		return nil, 0, r.corrupt("definition levels: %v", err)
	} else if all {
		return nil, k, nil
	}
	lvl = grow(&r.lvl, k)
	if err := r.defs.read(lvl); err != nil {
		return nil, 0, r.corrupt("definition levels: %v", err)
	}
	for _, l := range lvl {
		if l == uint32(r.maxDef) {
			present++
		} else if l > uint32(r.maxDef) {
			return nil, 0, r.corrupt("definition level %d above %d", l, r.maxDef)
		}
	}
	return lvl, present, nil
}

// chunk decodes the next k rows of the current page, rows got.. of a batch of n: it
// sets their offsets (offsets[j] is where row got+j ends), appends their bytes to *data
// at *pos (growing it from mem), and marks nulls in *valid (made on the first null).
func (r *byteArrayReader) chunk(k int, mem memory.Allocator, data, valid *[]byte, all []int32, pos, nulls *int, got, n int) error {
	offsets := all[got+1 : got+1+k]
	lvl, present, err := r.levels(k)
	if err != nil {
		return err
	}
	if lvl != nil {
		if present < k && *valid == nil {
			*valid = mem.Allocate(int(bitutil.BytesForBits(int64(n))))
			bitutil.SetBitsTo(*valid, 0, int64(got), true)
		}
	}
	// The chunk's bytes, counted (and checked) before they are copied.
	need := 0
	var ix []uint32
	if r.dict {
		ix = grow(&r.ix, present)
		if err := r.ids.read(ix); err != nil {
			return r.corrupt("dictionary indices: %v", err)
		}
		for _, id := range ix {
			if int(id) >= len(r.dictOff)-1 {
				return r.corrupt("dictionary index %d of %d values", id, len(r.dictOff)-1)
			}
			need += int(r.dictOff[id+1] - r.dictOff[id])
		}
		if present == k && r.runRows == got && sameIDs(ix) {
			// The batch so far is one value: it goes on if this chunk's is that value.
			val := r.dictBuf[r.dictOff[ix[0]]:r.dictOff[ix[0]+1]]
			if (got == 0 || string(val) == string(r.runVal)) && (got+k)*len(val) <= maxBatchBytes {
				r.runVal = val
				r.runRows += k
				return nil
			}
		}
	} else {
		p, o := r.plain, 0
		for range present {
			if len(p)-o < 4 {
				return r.corrupt("PLAIN value ends early")
			}
			l := int(binary.LittleEndian.Uint32(p[o:]))
			if l > len(p)-o-4 {
				return r.corrupt("PLAIN value of %d bytes, %d left", l, len(p)-o-4)
			}
			need += l
			o += 4 + l
		}
	}
	// The rows before this chunk were one value, not copied yet: they are now.
	pending := r.runRows > 0 && r.runRows == got
	if pending {
		need += got * len(r.runVal)
	}
	at := *pos
	if at+need > maxBatchBytes {
		return fmt.Errorf("column %s: more than 2 GiB of values in one batch", r.what)
	}
	buf := *data
	if at+need > len(buf) {
		// Room for this chunk and, at its average, the rest of the batch.
		rest := (n - got - k) * ((at+need)/(got+k) + 1)
		nb := mem.Allocate(at + need + rest)
		copy(nb, buf[:at])
		if buf != nil {
			mem.Free(buf)
		}
		buf, *data = nb, nb
	}
	if pending {
		at = fillRun(buf, at, r.runVal, all[1:got+1])
		r.runRows = -1 // the batch is not one value
	}
	// The values were checked above. Locals, not r's fields, in the loops: a pointer
	// stored in a heap object costs a write barrier while the GC runs.
	if r.dict && present == k && k > 1 && sameIDs(ix) {
		// One value repeated (a load's file name): copied once, then doubled.
		at = fillRun(buf, at, r.dictBuf[r.dictOff[ix[0]]:r.dictOff[ix[0]+1]], offsets)
		if *valid != nil {
			bitutil.SetBitsTo(*valid, int64(got), int64(k), true)
		}
		*pos = at
		return nil
	}
	v := 0 // values taken so far
	p, o := r.plain, 0
	for j := range k {
		if lvl != nil && lvl[j] != uint32(r.maxDef) {
			*nulls++
			offsets[j] = int32(at)
			continue
		}
		if *valid != nil {
			bitutil.SetBit(*valid, got+j)
		}
		var src []byte
		if r.dict {
			id := ix[v]
			src = r.dictBuf[r.dictOff[id]:r.dictOff[id+1]]
		} else {
			l := int(binary.LittleEndian.Uint32(p[o:]))
			src = p[o+4 : o+4+l]
			o += 4 + l
		}
		at = copyValue(buf, at, src)
		v++
		offsets[j] = int32(at)
	}
	if !r.dict {
		r.plain = p[o:]
	}
	*pos = at
	return nil
}

// maxBatchBytes is the most bytes of values a batch holds (its offsets are 32-bit).
const maxBatchBytes = 1<<31 - 1

// fillRun writes len(offs) copies of val to buf at at (copied once, then doubled), sets
// offs[j] to where copy j ends, and returns where the copies end.
func fillRun(buf []byte, at int, val []byte, offs []int32) int {
	end := at + len(offs)*len(val)
	copy(buf[at:], val)
	for filled := len(val); filled < end-at; {
		filled += copy(buf[at+filled:end], buf[at:at+filled])
	}
	for j := range offs {
		offs[j] = int32(at + (j+1)*len(val))
	}
	return end
}

// runSlice returns rows rows of runVal as a slice of r.run, which is made anew (of size
// rows or more) when it holds another value or too few rows.
func (r *byteArrayReader) runSlice(mem memory.Allocator, rows, size int) arrow.Array {
	if r.run == nil || r.run.Len() < rows || string(r.runOf) != string(r.runVal) {
		if r.run != nil {
			r.run.Release()
		}
		size = max(size, rows)
		if size*len(r.runVal) > maxBatchBytes {
			size = rows // (which fits: chunk saw to it)
		}
		offBuf := mem.Allocate((size + 1) * 4)
		offs := arrow.Int32Traits.CastFromBytes(offBuf)[:size+1]
		offs[0] = 0
		n := size * len(r.runVal)
		data := mem.Allocate(max(n, 1))
		fillRun(data, 0, r.runVal, offs[1:])
		bufs := []*memory.Buffer{nil, sizedBuffer(offBuf, (size+1)*4, mem), sizedBuffer(data, n, mem)}
		ad := array.NewData(r.typ, size, bufs, nil, 0, 0)
		bufs[1].Release()
		bufs[2].Release()
		r.run = array.MakeFromData(ad)
		ad.Release()
		r.runOf = bytes.Clone(r.runVal)
	}
	d := array.NewSliceData(r.run.Data(), 0, int64(rows))
	d.(*array.Data).SetNullN(0)
	defer d.Release()
	return array.MakeFromData(d)
}

// sizedBuffer is a buffer of b (allocated from mem, freed whole) that says n bytes of
// it are used.
func sizedBuffer(b []byte, n int, mem memory.Allocator) *memory.Buffer {
	out := memory.NewBufferWithAllocator(b, mem)
	out.ResizeNoShrink(n)
	return out
}

// sameIDs reports whether every index of ix is the first's.
func sameIDs(ix []uint32) bool {
	for _, id := range ix[1:] {
		if id != ix[0] {
			return false
		}
	}
	return true
}

// copyValue copies src to buf at at and returns where it ends. A value of up to 16 bytes
// with 16 bytes of room on both sides moves as one 16-byte block (what follows it in buf
// is overwritten by the next value or lies past the batch's data): no call per value.
func copyValue(buf []byte, at int, src []byte) int {
	if len(src) <= 16 && cap(src) >= 16 && len(buf)-at >= 16 {
		*(*[16]byte)(buf[at : at+16]) = *(*[16]byte)(src[:16])
		return at + len(src)
	}
	return at + copy(buf[at:], src)
}

// splitValue splits p into the value its 4-byte little-endian length prefix announces
// and what follows it; what names the value in the error when p is too short.
func (r *byteArrayReader) splitValue(p []byte, what string) (v, rest []byte, err error) {
	if len(p) < 4 {
		return nil, nil, r.corrupt("%s ends early", what)
	}
	l := binary.LittleEndian.Uint32(p)
	if uint64(l) > uint64(len(p)-4) {
		return nil, nil, r.corrupt("%s of %d bytes, %d left", what, l, len(p)-4)
	}
	return p[4 : 4+l], p[4+l:], nil
}

func grow(s *[]uint32, n int) []uint32 {
	if cap(*s) < n {
		*s = make([]uint32, n)
	}
	return (*s)[:n]
}

// nextPage moves to the next data page, opening row groups and loading dictionaries as
// needed; false at the end of the last row group.
func (r *byteArrayReader) nextPage() (bool, error) {
	for {
		if r.pages == nil {
			if r.nextRG == len(r.rowGroups) {
				return false, nil
			}
			pr, err := r.pf.RowGroup(r.rowGroups[r.nextRG]).GetColumnPageReader(r.col)
			if err != nil {
				return false, fmt.Errorf("column %s: %w", r.what, err)
			}
			r.nextRG++
			r.pages, r.dictOff, r.dictBuf = pr, nil, nil
		}
		if !r.pages.Next() {
			err := r.pages.Err()
			r.close()
			if err != nil && !errors.Is(err, io.EOF) {
				return false, fmt.Errorf("column %s: %w", r.what, err)
			}
			continue
		}
		switch p := r.pages.Page().(type) {
		case *file.DictionaryPage:
			if err := r.loadDictionary(p.Data(), int(p.NumValues()), pq.Encoding(p.Encoding())); err != nil {
				return false, err
			}
		case *file.DataPageV1:
			if p.NumValues() == 0 {
				continue
			}
			data := p.Data()
			if r.maxDef > 0 {
				if p.DefinitionLevelEncoding() != pq.Encodings.RLE {
					return false, r.corrupt("definition levels in %s", p.DefinitionLevelEncoding())
				}
				levels, rest, err := r.splitValue(data, "definition levels")
				if err != nil {
					return false, err
				}
				r.defs.reset(levels, 1)
				data = rest
			}
			return true, r.startValues(data, int(p.NumValues()), pq.Encoding(p.Encoding()))
		case *file.DataPageV2:
			if p.NumValues() == 0 {
				continue
			}
			data := p.Data()
			dl, rl := int(p.DefinitionLevelByteLen()), int(p.RepetitionLevelByteLen())
			if rl != 0 || dl > len(data) {
				return false, r.corrupt("levels of %d+%d bytes in a page of %d", rl, dl, len(data))
			}
			if r.maxDef > 0 {
				r.defs.reset(data[:dl], 1)
			}
			return true, r.startValues(data[dl:], int(p.NumValues()), pq.Encoding(p.Encoding()))
		}
	}
}

func (r *byteArrayReader) startValues(data []byte, rows int, enc pq.Encoding) error {
	r.left = rows
	switch enc {
	case pq.Encodings.Plain:
		r.dict, r.plain = false, data
	case pq.Encodings.PlainDict, pq.Encodings.RLEDict:
		if r.dictOff == nil {
			return r.corrupt("dictionary-encoded page without a dictionary")
		}
		if len(data) < 1 || data[0] > 32 {
			return r.corrupt("dictionary index width")
		}
		r.dict = true
		r.ids.reset(data[1:], uint(data[0]))
	default:
		return r.corrupt("values in %s", enc)
	}
	return nil
}

func (r *byteArrayReader) loadDictionary(data []byte, n int, enc pq.Encoding) error {
	if enc != pq.Encodings.Plain && enc != pq.Encodings.PlainDict {
		return r.corrupt("dictionary in %s", enc)
	}
	if r.width > 0 {
		if n < 0 || n > len(data)/r.width {
			return r.corrupt("dictionary of %d values in %d bytes", n, len(data))
		}
		off := make([]int32, n+1)
		for j := range off {
			off[j] = int32(j * r.width)
		}
		r.dictOff, r.dictBuf = off, bytes.Clone(data[:n*r.width])
		return nil
	}
	if n < 0 || n > len(data)/4 {
		return r.corrupt("dictionary of %d values in %d bytes", n, len(data))
	}
	off := make([]int32, 1, n+1)
	buf := make([]byte, 0, len(data)-4*n)
	for range n {
		v, rest, err := r.splitValue(data, "dictionary value")
		if err != nil {
			return err
		}
		buf, data = append(buf, v...), rest
		off = append(off, int32(len(buf)))
	}
	r.dictOff, r.dictBuf = off, buf
	return nil
}

// rleDecoder reads Parquet's RLE / bit-packing hybrid encoding of values bw bits wide.
type rleDecoder struct {
	buf    []byte
	bw     uint
	run    int    // values left in the current RLE run
	val    uint32 // its value
	packed int    // values left in the current bit-packed run
	bits   []byte // that run's bytes
	pos    uint   // bit offset in bits of its next value
}

func (d *rleDecoder) reset(buf []byte, bw uint) {
	*d = rleDecoder{buf: buf, bw: bw}
}

// skip moves past n values without decoding them.
func (d *rleDecoder) skip(n int) error {
	for n > 0 {
		switch {
		case d.run > 0:
			k := min(d.run, n)
			d.run -= k
			n -= k
		case d.packed > 0:
			k := min(d.packed, n)
			d.pos += uint(k) * d.bw
			d.packed -= k
			n -= k
		default:
			var one [1]uint32 // (reads the next run's header, and its first value)
			if err := d.read(one[:]); err != nil {
				return err
			}
			n--
		}
	}
	return nil
}

// repeats moves past the next n values if they are all v in one RLE run, and reports
// whether they were.
func (d *rleDecoder) repeats(n int, v uint32) (bool, error) {
	if d.run == 0 && d.packed == 0 {
		if err := d.nextRun(); err != nil {
			return false, err
		}
	}
	if d.run < n || d.val != v {
		return false, nil
	}
	d.run -= n
	return true, nil
}

// read fills dst.
func (d *rleDecoder) read(dst []uint32) error {
	mask := uint64(1)<<d.bw - 1
	for len(dst) > 0 {
		switch {
		case d.run > 0:
			k := min(d.run, len(dst))
			for j := range k {
				dst[j] = d.val
			}
			d.run -= k
			dst = dst[k:]
		case d.packed > 0:
			k := min(d.packed, len(dst))
			for j := range k {
				b := d.pos >> 3
				var w uint64
				if int(b)+8 <= len(d.bits) {
					w = binary.LittleEndian.Uint64(d.bits[b:])
				} else {
					for s, x := range d.bits[b:] {
						w |= uint64(x) << (8 * s)
					}
				}
				dst[j] = uint32(w >> (d.pos & 7) & mask)
				d.pos += d.bw
			}
			d.packed -= k
			dst = dst[k:]
		default:
			if err := d.nextRun(); err != nil {
				return err
			}
		}
	}
	return nil
}

// nextRun reads the next run's header.
func (d *rleDecoder) nextRun() error {
	h, n := binary.Uvarint(d.buf)
	if n <= 0 {
		return errors.New("run header missing or malformed")
	}
	d.buf = d.buf[n:]
	if h&1 == 1 {
		groups := h >> 1
		size := groups * uint64(d.bw) // bytes: 8 values of bw bits per group
		if groups == 0 || size > uint64(len(d.buf)) {
			return fmt.Errorf("bit-packed run of %d groups in %d bytes", groups, len(d.buf))
		}
		d.bits, d.pos, d.packed = d.buf[:size], 0, int(groups*8)
		d.buf = d.buf[size:]
		return nil
	}
	count := h >> 1
	w := int(d.bw+7) / 8
	if count == 0 || count > 1<<31 || w > len(d.buf) {
		return fmt.Errorf("RLE run of %d values, %d bytes left", count, len(d.buf))
	}
	var v uint32
	for s := range w {
		v |= uint32(d.buf[s]) << (8 * s)
	}
	d.run, d.val = int(count), v
	d.buf = d.buf[w:]
	return nil
}
