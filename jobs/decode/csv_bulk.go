package decode

import (
	"bytes"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// The bulk path of CSV parsing. A chunk without a quote byte (most files) is parsed a
// block of records at a time, in two passes over the block: the first cuts every record
// into fields, noting where each field ends; the second parses one column at a time
// over the block's records, straight into the batch's Arrow buffers (no per-value
// dispatch, no copy from scratch slices). A block is small enough to stay in the CPU's
// caches between the passes. Anything irregular — a record with another number of
// fields, a value that does not parse, a null where none is allowed, too much text —
// abandons the bulk path for the chunk, which is then parsed record by record
// (parseChunk), so that bad records, their errors and their order are that path's
// exactly. The batch is the one that path builds.

// bulkCSV turns the bulk path on (a test turns it off to compare the two paths).
var bulkCSV = true

// bulkBlock is the most records cut and parsed in one pass.
const bulkBlock = 512

// fieldTable is a block of records cut into fields.
type fieldTable struct {
	data []byte
	// bounds holds, per record, the offset in data where it starts and then where each
	// of its fields ends (at the delimiter or the record's end): stride = fields + 1.
	bounds []int32
	stride int
	rows   int
	lines  []int64 // each record's physical line, when wanted
}

// field returns field k of record r.
func (t *fieldTable) field(r, k int) []byte {
	b := t.bounds[r*t.stride+k : r*t.stride+k+2]
	s := b[0]
	if k > 0 {
		s++ // past the delimiter
	}
	return t.data[s:b[1]]
}

// textBytes is the total length of field k over the block.
func (t *fieldTable) textBytes(k int) int {
	n := 0
	for r := range t.rows {
		b := t.bounds[r*t.stride+k : r*t.stride+k+2]
		n += int(b[1] - b[0])
	}
	if k > 0 {
		n -= t.rows
	}
	return n
}

// split cuts up to max records of nf fields from data[pos:], which has no quote byte (a
// record per line; blank lines are skipped when nf > 1, as parseChunk skips them), the
// first on physical line *line. It returns where it stopped, and false if a record
// has another number of fields.
func (t *fieldTable) split(data []byte, pos int, line *int64, nf int, delim byte, max int, wantLines bool) (int, bool) {
	t.data, t.stride, t.rows = data, nf+1, 0
	t.lines = t.lines[:0]
	if need := max * t.stride; len(t.bounds) < need {
		t.bounds = make([]int32, need)
	}
	b := t.bounds
	w := 0 // entries written
	skipBlank := nf > 1
	n := len(data)
	for pos < n && t.rows < max {
		end := bytes.IndexByte(data[pos:], '\n')
		next := n
		if end < 0 {
			end = n
		} else {
			end += pos
			next = end + 1
		}
		if end > pos && data[end-1] == '\r' {
			end--
		}
		if end == pos && skipBlank {
			pos = next
			*line++
			continue
		}
		first := w
		b[w] = int32(pos)
		w++
		for i := pos; ; {
			k := bytes.IndexByte(data[i:end], delim)
			if k < 0 {
				break
			}
			if w-first >= t.stride {
				return pos, false // more fields than the record may have
			}
			b[w] = int32(i + k)
			w++
			i += k + 1
		}
		if w-first != nf {
			return pos, false
		}
		b[w] = int32(end)
		w++
		if wantLines {
			t.lines = append(t.lines, *line)
		}
		*line++
		t.rows++
		pos = next
	}
	return pos, true
}

// nullRule says which fields are null in a column, and whether that is allowed: the
// null text (unquoted: the bulk path has no quotes), or an empty field in a column that
// is not a string.
type nullRule struct {
	text     []byte
	isString bool
	nullable bool
}

func (nr *nullRule) isNull(f []byte) bool {
	return len(f) == len(nr.text) && string(f) == string(nr.text) || len(f) == 0 && !nr.isString
}

// bulkColumn is a column the bulk path fills.
type bulkColumn interface {
	// start returns the column's output for a batch of at most rows rows.
	start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput
}

// bulkOutput is one column of a batch being filled on the bulk path.
type bulkOutput interface {
	// fill parses field k of the block's records into rows r0.. of the column; false
	// when a value does not parse or is null where it may not be.
	fill(t *fieldTable, k, r0 int) bool
	// array returns the first n rows as an array; the output is spent.
	array(n int) arrow.Array
	// free releases the output's buffers (instead of array).
	free()
}

// parseBulk decodes chunk c on the bulk path; false when the chunk must be parsed
// record by record instead.
func (p *csvParser) parseBulk(c chunk) (arrow.RecordBatch, bool) {
	s := p.src
	t := &p.table
	mem := s.opts.Mem
	nf := len(s.fileCols)
	// Records are lines: the batch has at most as many rows as the chunk has lines.
	most := bytes.Count(c.data, []byte{'\n'}) + 1
	outs := make([]bulkOutput, nf)
	done := false
	defer func() {
		if !done {
			for _, o := range outs {
				if o != nil {
					o.free()
				}
			}
		}
	}()
	for k, si := range s.fileCols {
		if si >= 0 {
			outs[k] = p.bulk[si].start(most, &p.rules[si], mem)
		}
	}
	var lines []int64
	rows, pos, line := 0, 0, c.line
	for pos < len(c.data) {
		var ok bool
		if pos, ok = t.split(c.data, pos, &line, nf, s.delim, bulkBlock, p.lines != nil); !ok {
			return nil, false
		}
		for k, o := range outs {
			if o != nil && !o.fill(t, k, rows) {
				return nil, false
			}
		}
		lines = append(lines, t.lines...)
		rows += t.rows
	}
	done = true
	arrs := make([]arrow.Array, len(p.cols), s.schema.NumFields())
	defer func() { arrowx.ReleaseArrays(arrs) }() // NewRecordBatch retains what it keeps
	for k, si := range s.fileCols {
		if si >= 0 {
			arrs[si] = outs[k].array(rows)
		}
	}
	for i, col := range p.cols {
		if col == nil {
			arrs[i] = array.MakeArrayOfNull(mem, s.schema.Field(i).Type, rows)
		}
	}
	if p.lines != nil {
		vb := mem.Allocate(rows * 8)
		copy(arrow.Int64Traits.CastFromBytes(vb), lines)
		arrs = append(arrs, makeArray(arrow.PrimitiveTypes.Int64, rows, 0, nil, memory.NewBufferWithAllocator(vb, mem)))
	}
	return array.NewRecordBatch(s.schema, arrs, int64(rows)), true
}

// bulkValidity is a validity bitmap made on the first null.
type bulkValidity struct {
	bits  []byte
	nulls int
}

// null marks row r (of at most n) null.
func (v *bulkValidity) null(mem memory.Allocator, r, n int) {
	if v.bits == nil {
		v.bits = mem.Allocate(int(bitutil.BytesForBits(int64(n))))
		clear(v.bits)
		bitutil.SetBitsTo(v.bits, 0, int64(r), true)
	}
	v.nulls++
}

// valid marks row r valid.
func (v *bulkValidity) valid(r int) {
	if v.bits != nil {
		bitutil.SetBit(v.bits, r)
	}
}

func (v *bulkValidity) buffer(mem memory.Allocator) *memory.Buffer {
	if v.bits == nil {
		return nil
	}
	return memory.NewBufferWithAllocator(v.bits, mem)
}

func (v *bulkValidity) free(mem memory.Allocator) {
	if v.bits != nil {
		mem.Free(v.bits)
	}
}

// fixedOutput fills a fixed-width column with parse.
type fixedOutput[T any] struct {
	typ   arrow.DataType
	nr    *nullRule
	mem   memory.Allocator
	parse func([]byte) (T, bool)
	buf   []byte
	vals  []T
	valid bulkValidity
}

func startFixed[T any](typ arrow.DataType, rows int, nr *nullRule, mem memory.Allocator, parse func([]byte) (T, bool)) bulkOutput {
	var zero T
	buf := mem.Allocate(rows * int(unsafe.Sizeof(zero)))
	return &fixedOutput[T]{typ: typ, nr: nr, mem: mem, parse: parse, buf: buf,
		vals: unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf))), rows)}
}

func (o *fixedOutput[T]) fill(t *fieldTable, k, r0 int) bool {
	vals := o.vals[r0 : r0+t.rows]
	var zero T
	for r := range vals {
		f := t.field(r, k)
		if o.nr.isNull(f) {
			if !o.nr.nullable {
				return false
			}
			o.valid.null(o.mem, r0+r, len(o.vals))
			vals[r] = zero
			continue
		}
		v, ok := o.parse(f)
		if !ok {
			return false
		}
		vals[r] = v
		o.valid.valid(r0 + r)
	}
	return true
}

func (o *fixedOutput[T]) array(n int) arrow.Array {
	return makeArray(o.typ, n, o.valid.nulls, o.valid.buffer(o.mem), memory.NewBufferWithAllocator(o.buf, o.mem))
}

func (o *fixedOutput[T]) free() {
	o.mem.Free(o.buf)
	o.valid.free(o.mem)
}

func (c *intColumn[T]) start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput {
	return startFixed(c.typ, rows, nr, mem, func(b []byte) (T, bool) {
		v, ok, _ := parseInt(b, c.bits)
		return T(v), ok
	})
}

func (c *floatColumn[T]) start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput {
	return startFixed(c.typ, rows, nr, mem, func(b []byte) (T, bool) {
		v, ok, _ := parseFloat(b, c.bits)
		return T(v), ok
	})
}

func (c *decimalColumn) start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput {
	return startFixed(c.typ, rows, nr, mem, func(b []byte) (decimal128.Num, bool) {
		hi, lo, ok, _ := parseDecimal(b, c.prec, c.scale)
		return decimal128.New(hi, lo), ok
	})
}

func (c *dateColumn) start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput {
	return startFixed(c.typ, rows, nr, mem, parseDate)
}

func (c *timestampColumn) start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput {
	if c.layout != "" {
		return startFixed(c.typ, rows, nr, mem, func(b []byte) (int64, bool) {
			v, ok, _ := parseTimestampLayout(b, c.layout, c.loc, c.ntz)
			return v, ok
		})
	}
	return startFixed(c.typ, rows, nr, mem, func(b []byte) (int64, bool) {
		v, ok, _ := parseTimestamp(b, c.loc, c.ntz)
		return v, ok
	})
}

// boolOutput fills a boolean column (values bit-packed).
type boolOutput struct {
	typ   arrow.DataType
	nr    *nullRule
	mem   memory.Allocator
	bits  []byte
	rows  int
	valid bulkValidity
}

func (c *boolColumn) start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput {
	b := mem.Allocate(int(bitutil.BytesForBits(int64(rows))))
	clear(b)
	return &boolOutput{typ: c.typ, nr: nr, mem: mem, bits: b, rows: rows}
}

func (o *boolOutput) fill(t *fieldTable, k, r0 int) bool {
	for r := range t.rows {
		f := t.field(r, k)
		if o.nr.isNull(f) {
			if !o.nr.nullable {
				return false
			}
			o.valid.null(o.mem, r0+r, o.rows)
			continue
		}
		v, ok := parseBool(f)
		if !ok {
			return false
		}
		if v {
			bitutil.SetBit(o.bits, r0+r)
		}
		o.valid.valid(r0 + r)
	}
	return true
}

func (o *boolOutput) array(n int) arrow.Array {
	return makeArray(o.typ, n, o.valid.nulls, o.valid.buffer(o.mem), memory.NewBufferWithAllocator(o.bits, o.mem))
}

func (o *boolOutput) free() {
	o.mem.Free(o.bits)
	o.valid.free(o.mem)
}

// stringOutput fills a string or binary column: offsets for every row up front, the
// text buffer grown as blocks need it.
type stringOutput struct {
	col   *stringColumn
	typ   arrow.DataType
	nr    *nullRule
	mem   memory.Allocator
	check bool // values must be checked as UTF-8
	offb  []byte
	offs  []int32
	data  []byte
	at    int
	valid bulkValidity
}

func (c *stringColumn) start(rows int, nr *nullRule, mem memory.Allocator) bulkOutput {
	o := &stringOutput{col: c, typ: c.typ, nr: nr, mem: mem, check: !c.binary && !c.trusted,
		offb: mem.Allocate((rows + 1) * 4)}
	o.offs = arrow.Int32Traits.CastFromBytes(o.offb)[:rows+1]
	o.offs[0] = 0
	// The text of the previous batch's rows, on average, as a first guess.
	o.data = mem.Allocate(rows * max(c.avg, 1))
	return o
}

func (o *stringOutput) fill(t *fieldTable, k, r0 int) bool {
	// Room for the block's text (null texts are counted too: an upper bound).
	if need := o.at + t.textBytes(k); need > len(o.data) {
		if need > 1<<31-1 {
			return false // parseChunk reports it
		}
		o.data = o.mem.Reallocate(max(need, 2*len(o.data)), o.data)
	}
	data, at := o.data, o.at
	offs := o.offs[r0+1 : r0+1+t.rows]
	for r := range offs {
		f := t.field(r, k)
		if o.nr.isNull(f) {
			if !o.nr.nullable {
				return false
			}
			o.valid.null(o.mem, r0+r, len(o.offs)-1)
			offs[r] = int32(at)
			continue
		}
		if o.check && !utf8.Valid(f) {
			return false
		}
		at += copy(data[at:], f)
		offs[r] = int32(at)
		o.valid.valid(r0 + r)
	}
	o.at = at
	return true
}

func (o *stringOutput) array(n int) arrow.Array {
	if n > 0 {
		o.col.avg = o.at/n + 1
	}
	data := memory.NewBufferWithAllocator(o.data, o.mem)
	data.ResizeNoShrink(o.at)
	return makeArray(o.typ, n, o.valid.nulls, o.valid.buffer(o.mem), memory.NewBufferWithAllocator(o.offb, o.mem), data)
}

func (o *stringOutput) free() {
	o.mem.Free(o.offb)
	o.mem.Free(o.data)
	o.valid.free(o.mem)
}
