package parquet

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// chunkWriter writes the column chunks of one flat column of the common types (strings,
// binary, longs, ints, dates, timestamps, decimals stored as longs) as arrow-go's column
// writer writes them from the same batches under the same properties, byte for byte:
// the same page boundaries (a page is closed when, at the end of a write step of
// WriteBatchSize values of a batch, it holds DataPageSize bytes or more: of values, or
// with a dictionary of the values' plain size), dictionary (values in first-seen order)
// and its fallback to plain pages when it outgrows its page size limit, definition
// levels, values or indices, page and chunk statistics, compression, page headers and
// chunk metadata (arrow-go's page writer and metadata builder write those two). What it
// does not do is spend arrow-go's per-value and per-step costs: values are read straight
// from the Arrow buffers, a step's statistics are one min/max loop, levels and repeated
// indices are encoded by runs, and the page and compression buffers live as long as the
// writer.
//
// A row group's pages are kept (compressed, with their headers' fields) until the row
// group closes, and written then through arrow-go's page writer in column order, so
// that columns are encoded concurrently and the file is still column after column.
type chunkWriter struct {
	kind     valueKind
	nullable bool
	descr    *schema.Column
	pageSize int64 // DataPageSize
	step     int   // WriteBatchSize
	statsMax int   // MaxStatsSize
	stats    bool  // statistics are written
	signed   bool  // their sort order is signed
	codec    compress.Codec
	level    int
	ctype    compress.Compression
	mem      memory.Allocator
	prec     int // decimals: the declared precision
	// With a dictionary: the data pages' encoding, the dictionary page's, its size limit.
	dictOn                bool
	dictEnc, dictPageEnc  pq.Encoding
	dictLimit             int64
	dict                  dictionary // nil without a dictionary
	usingDict, fellBack   bool       // the open row group's pages are dictionary-encoded; they were
	dictPage              bool       // a dictionary page goes before the held pages
	meta                  *metadata.ColumnChunkMetaDataBuilder
	pageStats, chunkStats metadata.TypedStatistics // nil without statistics
	// A bytes column's least and greatest values in the row groups written so far
	// (bytewise, as its statistics order them); has: any value.
	fileMin, fileMax []byte
	fileHas          bool
	pages            []heldPage
	// blocks hold the held pages' bytes, the last one filling; a row group's pages take
	// more blocks as they come (each at least twice the last), none copied.
	blocks [][]byte
	rows   int64 // rows in held pages

	// The open page.
	levels  rleEncoder
	values  []byte  // PLAIN values
	idx     []int32 // dictionary indices
	raw     int64   // with a dictionary: the values' plain size
	nlevels int64   // rows in the page (values and nulls)

	page, scratch []byte  // scratch
	lows          []int64 // scratch: a step's decimals as INT64
	ids           rleEncoder
}

// valueKind is how a column's Arrow values become Parquet values.
type valueKind int

const (
	kindBytes   valueKind = iota // BYTE_ARRAY from string or binary
	kindInt64                    // INT64 from int64 or a timestamp of the column's unit
	kindInt32                    // INT32 from int32 or date32
	kindDecimal                  // INT64 from decimal128 (precision ≤ 18)
)

// heldPage is a data page written when its row group closes.
type heldPage struct {
	data         []byte // its bytes, in a block
	num          int32
	uncompressed int32
	enc          pq.Encoding
	stats        metadata.EncodedStatistics
	firstRow     int64
}

// newChunkWriter returns the writer of a column of a flat schema, or nil when arrow-go's
// column writer must write the column: another type or conversion, other encodings,
// page or statistics settings.
func newChunkWriter(f arrow.Field, descr *schema.Column, props *pq.WriterProperties) (*chunkWriter, error) {
	path := descr.Path()
	c := &chunkWriter{nullable: descr.MaxDefinitionLevel() == 1, descr: descr, pageSize: props.DataPageSize(),
		step: int(props.WriteBatchSize()), statsMax: int(props.MaxStatsSizeFor(path)),
		stats:  props.StatisticsEnabledFor(path) && descr.SortOrder() != schema.SortUNKNOWN,
		signed: descr.SortOrder() == schema.SortSIGNED, ctype: props.CompressionFor(path),
		level: props.CompressionLevelFor(path), mem: props.Allocator(),
		dictOn: props.DictionaryEnabledFor(path), dictEnc: props.DictionaryIndexEncoding(),
		dictPageEnc: props.DictionaryPageEncoding(), dictLimit: props.DictionaryPageSizeLimit()}
	if c.dictOn && props.DictionaryCostFallbackEnabledFor(path) ||
		!c.dictOn && props.EncodingFor(path) != pq.Encodings.Plain || props.DataPageVersion() != pq.DataPageV1 ||
		props.PageIndexEnabledFor(path) || props.BloomFilterEnabledFor(path) ||
		props.FileEncryptionProperties() != nil || descr.MaxDefinitionLevel() > 1 || descr.MaxRepetitionLevel() > 0 {
		return nil, nil
	}
	phys := descr.PhysicalType()
	switch id := f.Type.ID(); {
	case (id == arrow.STRING || id == arrow.BINARY) && phys == pq.Types.ByteArray:
		c.kind = kindBytes
		if c.stats && descr.SortOrder() != schema.SortUNSIGNED {
			return nil, nil
		}
	case id == arrow.INT64 && phys == pq.Types.Int64:
		c.kind = kindInt64
	case id == arrow.TIMESTAMP && phys == pq.Types.Int64:
		// The values are written as they are only when the column's unit is theirs
		// (otherwise pqarrow converts them).
		lt, ok := descr.LogicalType().(schema.TimestampLogicalType)
		if !ok || lt.TimeUnit() != timeUnit(f.Type.(*arrow.TimestampType).Unit) {
			return nil, nil
		}
		c.kind = kindInt64
	case (id == arrow.INT32 || id == arrow.DATE32) && phys == pq.Types.Int32:
		c.kind = kindInt32
	case id == arrow.DECIMAL128 && phys == pq.Types.Int64:
		c.kind = kindDecimal
		c.prec = int(f.Type.(*arrow.Decimal128Type).Precision)
		if lt, ok := descr.LogicalType().(schema.DecimalLogicalType); ok {
			c.prec = int(lt.Precision())
		}
	default:
		return nil, nil
	}
	if c.kind != kindBytes && c.stats && !c.signed {
		return nil, nil
	}
	if c.ctype != compress.Codecs.Uncompressed {
		codec, err := compress.GetCodec(c.ctype)
		if err != nil {
			return nil, err
		}
		c.codec = codec
	}
	return c, nil
}

// newDictionary returns an empty dictionary of the column's values.
func (c *chunkWriter) newDictionary() dictionary {
	var d dictionary
	switch c.kind {
	case kindBytes:
		d = &bytesDict{}
	case kindInt32:
		d = &fixedDict[int32]{}
	default:
		d = &fixedDict[int64]{}
	}
	d.reset()
	return d
}

func timeUnit(u arrow.TimeUnit) schema.TimeUnitType {
	switch u {
	case arrow.Millisecond:
		return schema.TimeUnitMillis
	case arrow.Microsecond:
		return schema.TimeUnitMicros
	case arrow.Nanosecond:
		return schema.TimeUnitNanos
	}
	return schema.TimeUnitUnknown
}

// startRowGroup readies the chunk of a new row group, with buffers from the pool.
func (c *chunkWriter) startRowGroup(meta *metadata.ColumnChunkMetaDataBuilder) {
	c.meta = meta
	c.pages, c.rows = c.pages[:0], 0
	c.values, c.page, c.levels.out = getBytes(), getBytes(), getBytes()
	c.idx = getInt32s()
	c.pageStats, c.chunkStats = nil, nil
	if c.stats {
		c.pageStats = metadata.NewStatistics(c.descr, c.mem)
		c.chunkStats = metadata.NewStatistics(c.descr, c.mem)
	}
	c.usingDict, c.fellBack, c.dictPage = c.dictOn, false, false
	if c.dictOn {
		c.dict = c.newDictionary()
	}
	c.startPage()
}

func (c *chunkWriter) startPage() {
	c.levels.reset(c.levels.out[:0], 1)
	c.values, c.idx, c.raw = c.values[:0], c.idx[:0], 0
	c.nlevels = 0
}

// write adds a batch's values, in steps of WriteBatchSize values from its first, as
// arrow-go's column writer takes them.
func (c *chunkWriter) write(col arrow.Array) error {
	n := col.Len()
	if !c.nullable && col.NullN() > 0 {
		return fmt.Errorf("%d nulls in a column that is not nullable", col.NullN())
	}
	if c.kind == kindDecimal {
		if err := c.checkDecimals(col.(*array.Decimal128)); err != nil {
			return err
		}
	}
	for lo := 0; lo < n; lo += c.step {
		hi := min(lo+c.step, n)
		valid := c.putStep(col, lo, hi)
		c.nlevels += int64(hi - lo)
		if c.pageStats != nil {
			c.pageStats.IncNulls(int64(hi - lo - valid))
			c.pageStats.IncNumValues(int64(valid))
		}
		size := int64(len(c.values))
		if c.usingDict {
			size = c.raw
		}
		if size >= c.pageSize {
			if err := c.flushPage(); err != nil {
				return err
			}
		}
		if c.usingDict && c.dict.encodedSize() >= c.dictLimit {
			c.fallBack()
		}
	}
	return nil
}

// fallBack leaves the dictionary for plain pages, as arrow-go does when the dictionary
// reaches its page size limit: the dictionary page is written (before the pages cut so
// far) only if a page was cut, and the open page goes on with its values as plain values.
func (c *chunkWriter) fallBack() {
	c.dictPage = len(c.pages) > 0
	for _, id := range c.idx {
		c.values = c.dict.appendPlain(c.values, id)
	}
	c.idx, c.raw = c.idx[:0], 0
	c.usingDict, c.fellBack = false, true
}

// putStep encodes rows lo..hi of col: their definition levels, their values (or
// dictionary indices), and the values' min and max into the page statistics. It
// returns the number of values.
func (c *chunkWriter) putStep(col arrow.Array, lo, hi int) int {
	nulls := 0
	var bits []byte
	off := col.Data().Offset()
	if col.NullN() > 0 {
		bits = col.NullBitmapBytes()
		nulls = (hi - lo) - bitutil.CountSetBits(bits, off+lo, hi-lo)
	}
	if c.nullable {
		c.putLevels(bits, off+lo, hi-lo, nulls)
	}
	if nulls == hi-lo {
		return 0
	}
	switch c.kind {
	case kindBytes:
		c.putBytes(col.(binaryValues), lo, hi, nulls, bits, off)
	case kindInt64:
		vals := arrow.Int64Traits.CastFromBytes(col.Data().Buffers()[1].Bytes())[off:]
		putFixed(c, vals[lo:hi], nulls, bits, off+lo)
	case kindInt32:
		vals := arrow.Int32Traits.CastFromBytes(col.Data().Buffers()[1].Bytes())[off:]
		putFixed(c, vals[lo:hi], nulls, bits, off+lo)
	case kindDecimal:
		ds := col.(*array.Decimal128).Values()[lo:hi]
		c.lows = c.lows[:0]
		for i, d := range ds {
			if nulls == 0 || bitutil.BitIsSet(bits, off+lo+i) {
				c.lows = append(c.lows, int64(d.LowBits()))
			}
		}
		putFixed(c, c.lows, 0, nil, 0)
	}
	return hi - lo - nulls
}

// putLevels encodes the definition levels of n rows from bit off of the validity bits
// (nil: all valid) by runs.
func (c *chunkWriter) putLevels(bits []byte, off, n, nulls int) {
	if nulls == 0 {
		c.levels.putRun(1, n)
		return
	}
	for i := 0; i < n; {
		v := bitutil.BitIsSet(bits, off+i)
		j := i + 1
		for j < n && bitutil.BitIsSet(bits, off+j) == v {
			j++
		}
		level := uint64(0)
		if v {
			level = 1
		}
		c.levels.putRun(level, j-i)
		i = j
	}
}

// putFixed appends the valid values of vals (bits from bit off; nil bits: all valid),
// or their dictionary indices, and folds their min and max into the page statistics.
func putFixed[T int32 | int64](c *chunkWriter, vals []T, nulls int, bits []byte, off int) {
	var mn, mx T
	first := true
	if nulls == 0 {
		mn, mx, first = vals[0], vals[0], false
		for _, v := range vals {
			mn, mx = min(mn, v), max(mx, v)
		}
		if c.usingDict {
			c.idx = c.dict.(*fixedDict[T]).add(c.idx, vals)
		} else {
			c.values = appendPlain(c.values, vals)
		}
	} else {
		for i, v := range vals {
			if !bitutil.BitIsSet(bits, off+i) {
				continue
			}
			if c.usingDict {
				c.idx = c.dict.(*fixedDict[T]).add(c.idx, vals[i:i+1])
			} else {
				c.values = appendPlain(c.values, vals[i:i+1])
			}
			if first {
				mn, mx, first = v, v, false
			}
			mn, mx = min(mn, v), max(mx, v)
		}
	}
	if c.usingDict {
		c.raw += int64(len(vals)-nulls) * int64(unsafe.Sizeof(mn))
	}
	if c.pageStats == nil || first {
		return
	}
	switch st := c.pageStats.(type) {
	case *metadata.Int64Statistics:
		st.SetMinMax(int64(mn), int64(mx))
	case *metadata.Int32Statistics:
		st.SetMinMax(int32(mn), int32(mx))
	}
}

// appendPlain appends vals PLAIN: little-endian, one after another.
func appendPlain[T int32 | int64](b []byte, vals []T) []byte {
	size := int(unsafe.Sizeof(vals[0]))
	at := len(b)
	b = slices.Grow(b, len(vals)*size)[:at+len(vals)*size]
	if littleEndian {
		copy(b[at:], unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals)*size))
		return b
	}
	for i, v := range vals {
		if size == 4 {
			binary.LittleEndian.PutUint32(b[at+4*i:], uint32(v))
		} else {
			binary.LittleEndian.PutUint64(b[at+8*i:], uint64(v))
		}
	}
	return b
}

// littleEndian: the machine's integers are laid out as PLAIN lays them out.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// noBytes is a zero-length, non-nil value buffer.
var noBytes = []byte{}

// putBytes appends the valid values of rows lo..hi (each after its 4-byte length), or
// their dictionary indices, and folds their min and max (bytewise) into the page
// statistics.
func (c *chunkWriter) putBytes(col binaryValues, lo, hi, nulls int, bits []byte, off int) {
	offs := col.ValueOffsets()
	data := col.ValueBytes()
	if data == nil {
		// Only empty strings (a gather of them leaves no value buffer): each value is a
		// zero-length slice, never nil, which arrow-go's statistics take for no value.
		data = noBytes
	}
	base := offs[0]
	if c.usingDict && nulls == 0 {
		// A step of one value repeated (a file name, a load time): one lookup.
		so := offs[lo : hi+1]
		w := so[1] - so[0]
		if step := data[so[0]-base : so[hi-lo]-base]; arrowx.OneValue(so, step) {
			v := step[:w]
			c.idx = c.dict.(*bytesDict).addRun(c.idx, v, hi-lo)
			c.raw += int64(hi-lo) * (int64(w) + 4)
			if c.pageStats != nil {
				c.pageStats.(*metadata.ByteArrayStatistics).SetMinMax(v, v)
			}
			return
		}
	}
	var mn, mx []byte
	var mnh, mnl, mxh, mxl uint64
	first := true
	d, _ := c.dict.(*bytesDict)
	for i := lo; i < hi; i++ {
		if nulls > 0 && !bitutil.BitIsSet(bits, off+i) {
			continue
		}
		v := data[offs[i]-base : offs[i+1]-base]
		if c.usingDict {
			c.idx = d.add(c.idx, v)
			c.raw += int64(len(v)) + 4
		} else {
			c.values = binary.LittleEndian.AppendUint32(c.values, uint32(len(v)))
			c.values = append(c.values, v...)
		}
		if c.pageStats == nil {
			continue
		}
		h, l := SortKey16(v)
		if first {
			mn, mx, mnh, mnl, mxh, mxl, first = v, v, h, l, h, l, false
			continue
		}
		if h < mnh || h == mnh && (l < mnl || l == mnl && string(v) < string(mn)) {
			mn, mnh, mnl = v, h, l
		}
		if h > mxh || h == mxh && (l > mxl || l == mxl && string(v) > string(mx)) {
			mx, mxh, mxl = v, h, l
		}
	}
	if c.pageStats != nil && !first {
		c.pageStats.(*metadata.ByteArrayStatistics).SetMinMax(mn, mx)
	}
}

// checkDecimals reports a present value that is not an INT64 of the column's
// precision, as pqarrow does before writing any.
func (c *chunkWriter) checkDecimals(a *array.Decimal128) error {
	for i, v := range a.Values() {
		if a.IsNull(i) {
			continue
		}
		if v.HighBits() != int64(v.LowBits())>>63 {
			return fmt.Errorf("%w: Decimal128 value at index %d does not fit in Parquet INT64", arrow.ErrInvalid, i)
		}
		if c.prec <= 0 || c.prec > decimal128.MaxPrecision || v.Sign() < 0 && v.Negate() == v || !v.FitsInPrecision(int32(c.prec)) {
			return fmt.Errorf("%w: Decimal128 value at index %d does not fit Parquet DECIMAL precision %d", arrow.ErrInvalid, i, c.prec)
		}
	}
	return nil
}

// flushPage closes the open page: levels and values (or the indices' width and
// indices), compressed, kept with its header's fields until the row group closes.
func (c *chunkWriter) flushPage() error {
	c.page = c.page[:0]
	if c.nullable {
		lv := c.levels.flush()
		c.page = binary.LittleEndian.AppendUint32(c.page, uint32(len(lv)))
		c.page = append(c.page, lv...)
		c.levels.out = lv
	}
	enc := pq.Encodings.Plain
	if c.usingDict {
		enc = c.dictEnc
		width := dictWidth(c.dict.entries())
		c.page = append(c.page, byte(width))
		c.ids.reset(c.page, uint(width))
		for i := 0; i < len(c.idx); {
			id := c.idx[i]
			j := i + 1
			for j < len(c.idx) && c.idx[j] == id {
				j++
			}
			if j-i > 1 {
				c.ids.putRun(uint64(id), j-i)
			} else {
				c.ids.put(uint64(id))
			}
			i = j
		}
		c.page = c.ids.flush()
	} else {
		c.page = append(c.page, c.values...)
	}
	if int64(len(c.page)) > math.MaxInt32 {
		return fmt.Errorf("parquet: uncompressed page size %d exceeds INT32_MAX (%d)", len(c.page), int64(math.MaxInt32))
	}
	var st metadata.EncodedStatistics
	if c.pageStats != nil {
		var err error
		if st, err = c.pageStats.Encode(); err != nil {
			return err
		}
	}
	st.ApplyStatSizeLimits(c.statsMax)
	st.Signed = c.signed
	if c.pageStats != nil {
		c.chunkStats.Merge(c.pageStats)
		c.pageStats.Reset()
	}
	var data []byte
	if c.codec == nil {
		blk := c.room(len(c.page))
		at := len(*blk)
		*blk = append(*blk, c.page...)
		data = (*blk)[at:]
	} else {
		// As arrow-go's page writer compresses: into an empty buffer of room enough,
		// here a block's end.
		blk := c.room(int(c.codec.CompressBound(int64(len(c.page)))))
		at := len(*blk)
		out := c.codec.EncodeLevel((*blk)[at:at], c.page, c.level)
		if len(out) > 0 && unsafe.SliceData(out) != unsafe.SliceData((*blk)[at:cap(*blk)]) {
			blk = c.room(len(out)) // the codec wanted more room
			at = len(*blk)
			*blk = append(*blk, out...)
		} else {
			*blk = (*blk)[:at+len(out)]
		}
		data = (*blk)[at:]
	}
	c.pages = append(c.pages, heldPage{data: data, num: int32(c.nlevels),
		uncompressed: int32(len(c.page)), enc: enc, stats: st, firstRow: c.rows})
	c.rows += c.nlevels
	c.startPage()
	return nil
}

// room is the block the next n bytes of held pages go to: the last one, or a new one
// when they do not fit there. Blocks come from PageBuffers (not zeroed: every byte of a
// page is written before it is read), and go back when the row group is written.
func (c *chunkWriter) room(n int) *[]byte {
	if k := len(c.blocks); k > 0 && cap(c.blocks[k-1])-len(c.blocks[k-1]) >= n {
		return &c.blocks[k-1]
	}
	size := minBlock
	if k := len(c.blocks); k > 0 {
		size = min(2*cap(c.blocks[k-1]), maxBlock)
	}
	c.blocks = append(c.blocks, PageBuffers.Allocate(max(size, n))[:0])
	return &c.blocks[len(c.blocks)-1]
}

// A column chunk's first block, and the most a later one takes (unless a page needs
// more).
const (
	minBlock = 64 << 10
	maxBlock = 8 << 20
)

// dictWidth is the bit width of indices into a dictionary of n entries, as arrow-go's
// dictionary encoder takes it when it writes a page.
func dictWidth(n int) int {
	switch n {
	case 0:
		return 0
	case 1:
		return 1
	}
	return bits.Len32(uint32(n - 1))
}

// finishPages closes the open page, if it has rows.
func (c *chunkWriter) finishPages() error {
	if c.nlevels == 0 {
		return nil
	}
	return c.flushPage()
}

// writeChunk writes the row group's dictionary page (if any) and pages, and the chunk's
// metadata, through pager.
func (c *chunkWriter) writeChunk(pager file.PageWriter) error {
	dictWritten := false
	if c.usingDict || c.dictPage {
		c.scratch = c.dict.writeTo(c.scratch[:0])
		page := file.NewDictionaryPage(memory.NewBufferBytes(c.scratch), int32(c.dict.entries()), c.dictPageEnc)
		_, err := pager.WriteDictionaryPage(page)
		page.Release()
		if err != nil {
			return err
		}
		dictWritten = true
	}
	for _, p := range c.pages {
		page := file.NewDataPageV1WithConfig(memory.NewBufferBytes(p.data), pq.Encodings.RLE, pq.Encodings.RLE,
			file.DataPageConfig{Num: p.num, Encoding: p.enc, UncompressedSize: p.uncompressed, Stats: p.stats, FirstRowIndex: p.firstRow})
		_, err := pager.WriteDataPage(page)
		page.Release()
		if err != nil {
			return err
		}
	}
	if bs, ok := c.chunkStats.(*metadata.ByteArrayStatistics); ok && bs.HasMinMax() {
		if mn := bs.Min(); !c.fileHas || bytes.Compare(mn, c.fileMin) < 0 {
			c.fileMin = append(c.fileMin[:0], mn...)
		}
		if mx := bs.Max(); !c.fileHas || bytes.Compare(mx, c.fileMax) > 0 {
			c.fileMax = append(c.fileMax[:0], mx...)
		}
		c.fileHas = true
	}
	if c.chunkStats != nil {
		st, err := c.chunkStats.Encode()
		if err != nil {
			return err
		}
		st.ApplyStatSizeLimits(c.statsMax)
		st.Signed = c.signed
		if c.rows > 0 && st.IsSet() {
			c.meta.SetStats(st)
		}
	}
	err := pager.Close(c.dictOn && dictWritten, c.fellBack && dictWritten)
	c.releaseBuffers()
	return err
}

// releaseBuffers gives the row group's buffers back to the pool: a writer between row
// groups (one of many partitions' files) holds none.
func (c *chunkWriter) releaseBuffers() {
	for _, b := range []*[]byte{&c.values, &c.page, &c.levels.out, &c.scratch} {
		putBytes(*b)
		*b = nil
	}
	for i, b := range c.blocks {
		PageBuffers.Free(b)
		c.blocks[i] = nil
	}
	c.blocks = c.blocks[:0]
	c.ids.out = nil // c.page's array
	putInt32s(c.idx)
	c.idx, c.lows = nil, nil
	clear(c.pages) // (their blocks' bytes)
	c.pages, c.dict = c.pages[:0], nil
}

// Buffers are pooled across writers: a page's values and compressed bytes, a row
// group's pages.
var bytePool, int32Pool sync.Pool

func getBytes() []byte {
	if p, ok := bytePool.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

func putBytes(b []byte) {
	if cap(b) > 0 {
		bytePool.Put(&b)
	}
}

func getInt32s() []int32 {
	if p, ok := int32Pool.Get().(*[]int32); ok {
		return (*p)[:0]
	}
	return nil
}

func putInt32s(b []int32) {
	if cap(b) > 0 {
		int32Pool.Put(&b)
	}
}
