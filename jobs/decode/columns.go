package decode

import (
	"fmt"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// column accumulates the values of one declared column for the batch being decoded, in
// plain Go slices that are reused from batch to batch; build copies them into Arrow
// buffers from the allocator. Rows can be taken back (truncate), which is how a bad record
// is dropped after some of its fields were already appended.
type column interface {
	// parse appends the value written as b; on failure it appends nothing and returns
	// false and an optional reason ("out of range").
	parse(b []byte) (bool, string)
	appendNull()
	// reserve makes room for n values, so a batch does not grow its slices.
	reserve(n int)
	len() int
	truncate(n int)
	// build returns the values appended since the last build as an array and starts over.
	build(mem memory.Allocator) arrow.Array
}

// validity tracks nulls; the slice is materialised only once a null is appended.
type validity struct {
	valid []bool
	nulls int
}

func (v *validity) set(n int, ok bool) {
	if ok {
		if v.valid != nil {
			v.valid = append(v.valid, true)
		}
		return
	}
	if v.valid == nil {
		v.valid = make([]bool, n, max(n*2, 1024))
		for i := range v.valid {
			v.valid[i] = true
		}
	}
	v.valid = append(v.valid, false)
	v.nulls++
}

func (v *validity) truncate(n int) {
	if v.valid == nil || len(v.valid) <= n {
		return
	}
	for _, ok := range v.valid[n:] {
		if !ok {
			v.nulls--
		}
	}
	v.valid = v.valid[:n]
}

// bitmap returns the validity bitmap (nil when there are no nulls) and resets.
func (v *validity) bitmap(mem memory.Allocator, n int) (*memory.Buffer, int) {
	defer func() { v.valid, v.nulls = v.valid[:0], 0 }()
	if v.nulls == 0 {
		if v.valid != nil {
			v.valid = v.valid[:0]
		}
		return nil, 0
	}
	return packBools(mem, v.valid[:n]), v.nulls
}

func packBools(mem memory.Allocator, bs []bool) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(bs)))))
	out := buf.Bytes()
	for i := range out {
		out[i] = 0
	}
	for i, b := range bs {
		if b {
			out[i>>3] |= 1 << (i & 7)
		}
	}
	return buf
}

func copyBuffer[T any](mem memory.Allocator, vals []T) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	var z T
	n := len(vals) * int(unsafe.Sizeof(z))
	buf.Resize(n)
	if n > 0 {
		copy(buf.Bytes(), unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), n))
	}
	return buf
}

func makeArray(typ arrow.DataType, n, nulls int, bufs ...*memory.Buffer) arrow.Array {
	data := array.NewData(typ, n, bufs, nil, nulls, 0)
	arr := array.MakeFromData(data)
	data.Release()
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return arr
}

// fixed holds values of a fixed-width type.
type fixed[T any] struct {
	typ  arrow.DataType
	vals []T
	validity
}

func (c *fixed[T]) appendNull() {
	c.validity.set(len(c.vals), false)
	var z T
	c.vals = append(c.vals, z)
}

func (c *fixed[T]) add(v T) {
	if c.valid != nil {
		c.valid = append(c.valid, true)
	}
	c.vals = append(c.vals, v)
}

func (c *fixed[T]) len() int { return len(c.vals) }

func (c *fixed[T]) reserve(n int) {
	if cap(c.vals) < n {
		c.vals = make([]T, 0, n)
	}
}

func (c *fixed[T]) truncate(n int) {
	c.validity.truncate(n)
	c.vals = c.vals[:n]
}

func (c *fixed[T]) build(mem memory.Allocator) arrow.Array {
	n := len(c.vals)
	vb, nulls := c.validity.bitmap(mem, n)
	arr := makeArray(c.typ, n, nulls, vb, copyBuffer(mem, c.vals))
	c.vals = c.vals[:0]
	return arr
}

type intColumn[T int8 | int16 | int32 | int64] struct {
	fixed[T]
	bits int
}

func (c *intColumn[T]) parse(b []byte) (bool, string) {
	v, ok, why := parseInt(b, c.bits)
	if ok {
		c.add(T(v))
	}
	return ok, why
}

type floatColumn[T float32 | float64] struct {
	fixed[T]
	bits int
}

func (c *floatColumn[T]) parse(b []byte) (bool, string) {
	v, ok, why := parseFloat(b, c.bits)
	if ok {
		c.add(T(v))
	}
	return ok, why
}

type decimalColumn struct {
	fixed[decimal128.Num]
	prec, scale int
}

func (c *decimalColumn) parse(b []byte) (bool, string) {
	hi, lo, ok, why := parseDecimal(b, c.prec, c.scale)
	if ok {
		c.add(decimal128.New(hi, lo))
	}
	return ok, why
}

type dateColumn struct{ fixed[int32] }

func (c *dateColumn) parse(b []byte) (bool, string) {
	v, ok := parseDate(b)
	if ok {
		c.add(v)
	}
	return ok, ""
}

type timestampColumn struct {
	fixed[int64]
	loc    *time.Location
	ntz    bool
	layout string // "" or a layout parseTimestamp does not cover
}

func (c *timestampColumn) parse(b []byte) (bool, string) {
	var v int64
	var ok bool
	var why string
	if c.layout == "" {
		v, ok, why = parseTimestamp(b, c.loc, c.ntz)
	} else {
		v, ok, why = parseTimestampLayout(b, c.layout, c.loc, c.ntz)
	}
	if ok {
		c.add(v)
	}
	return ok, why
}

type boolColumn struct{ fixed[bool] }

func (c *boolColumn) parse(b []byte) (bool, string) {
	v, ok := parseBool(b)
	if ok {
		c.add(v)
	}
	return ok, ""
}

func (c *boolColumn) build(mem memory.Allocator) arrow.Array {
	n := len(c.vals)
	vb, nulls := c.validity.bitmap(mem, n)
	arr := makeArray(c.typ, n, nulls, vb, packBools(mem, c.vals))
	c.vals = c.vals[:0]
	return arr
}

// stringColumn holds utf8 (checked) or binary values as offsets into one byte slice.
type stringColumn struct {
	typ    arrow.DataType
	binary bool
	// trusted: the caller has checked that the values are valid UTF-8.
	trusted bool
	avg     int // text bytes per row of the last batch of the bulk path
	offs    []int32
	data    []byte
	validity
}

func newStringColumn(typ arrow.DataType, binary bool) *stringColumn {
	return &stringColumn{typ: typ, binary: binary, offs: []int32{0}}
}

func (c *stringColumn) parse(b []byte) (bool, string) {
	if !c.binary && !c.trusted && !utf8.Valid(b) {
		return false, "invalid UTF-8"
	}
	if len(c.data)+len(b) > 1<<31-1 {
		return false, "a batch holds at most 2 GiB of text per column"
	}
	if c.valid != nil {
		c.valid = append(c.valid, true)
	}
	c.data = append(c.data, b...)
	c.offs = append(c.offs, int32(len(c.data)))
	return true, ""
}

func (c *stringColumn) appendNull() {
	c.validity.set(len(c.offs)-1, false)
	c.offs = append(c.offs, int32(len(c.data)))
}

func (c *stringColumn) len() int { return len(c.offs) - 1 }

func (c *stringColumn) reserve(n int) {
	if cap(c.offs) < n+1 {
		c.offs = append(make([]int32, 0, n+1), c.offs...)
	}
	if cap(c.data) < n*8 {
		c.data = append(make([]byte, 0, n*8), c.data...)
	}
}

func (c *stringColumn) truncate(n int) {
	c.validity.truncate(n)
	c.offs = c.offs[:n+1]
	c.data = c.data[:c.offs[n]]
}

func (c *stringColumn) build(mem memory.Allocator) arrow.Array {
	n := len(c.offs) - 1
	vb, nulls := c.validity.bitmap(mem, n)
	arr := makeArray(c.typ, n, nulls, vb, copyBuffer(mem, c.offs), copyBuffer(mem, c.data))
	c.offs, c.data = c.offs[:1], c.data[:0]
	return arr
}

// nestedColumn holds struct, array and map values written as JSON (NDJSON only). Each
// value is checked when it arrives by decoding it into a scratch builder, kept as text, and
// decoded for real at build time, so a bad record can still be taken back.
type nestedColumn struct {
	typ     arrow.DataType
	raws    [][]byte // nil: null
	scratch array.Builder
}

func (c *nestedColumn) parse(b []byte) (bool, string) {
	if err := c.scratch.UnmarshalJSON(jsonList(b)); err != nil {
		return false, err.Error()
	}
	c.raws = append(c.raws, append([]byte(nil), b...))
	if c.scratch.Len() >= 1024 {
		c.scratch.NewArray().Release()
	}
	return true, ""
}

func (c *nestedColumn) appendNull()    { c.raws = append(c.raws, nil) }
func (c *nestedColumn) len() int       { return len(c.raws) }
func (c *nestedColumn) reserve(int)    {}
func (c *nestedColumn) truncate(n int) { c.raws = c.raws[:n] }

func (c *nestedColumn) build(mem memory.Allocator) arrow.Array {
	bld := array.NewBuilder(mem, c.typ)
	defer bld.Release()
	for _, r := range c.raws {
		if r == nil {
			bld.AppendNull()
			continue
		}
		if err := bld.UnmarshalJSON(jsonList(r)); err != nil {
			panic(fmt.Sprintf("decode: nested value accepted earlier no longer decodes: %v", err))
		}
	}
	c.raws = c.raws[:0]
	return bld.NewArray()
}

// jsonList wraps one JSON value as a one-element list, which is what a builder's
// UnmarshalJSON takes.
func jsonList(v []byte) []byte {
	out := make([]byte, 0, len(v)+2)
	return append(append(append(out, '['), v...), ']')
}

// newColumn returns the accumulator for a declared column. layout is the CSV
// timestamp_format ("" for the built-in formats).
func newColumn(f *dschema.StructField, typ arrow.DataType, mem memory.Allocator, loc *time.Location, layout string, nested bool) (column, error) {
	switch t := f.Type.(type) {
	case *dschema.DecimalType:
		return &decimalColumn{fixed: fixed[decimal128.Num]{typ: typ}, prec: t.Precision, scale: t.Scale}, nil
	case *dschema.PrimitiveType:
		switch t.Name {
		case dschema.TypeString:
			return newStringColumn(typ, false), nil
		case dschema.TypeBinary:
			return newStringColumn(typ, true), nil
		case dschema.TypeLong:
			return &intColumn[int64]{fixed[int64]{typ: typ}, 64}, nil
		case dschema.TypeInteger:
			return &intColumn[int32]{fixed[int32]{typ: typ}, 32}, nil
		case dschema.TypeShort:
			return &intColumn[int16]{fixed[int16]{typ: typ}, 16}, nil
		case dschema.TypeByte:
			return &intColumn[int8]{fixed[int8]{typ: typ}, 8}, nil
		case dschema.TypeDouble:
			return &floatColumn[float64]{fixed[float64]{typ: typ}, 64}, nil
		case dschema.TypeFloat:
			return &floatColumn[float32]{fixed[float32]{typ: typ}, 32}, nil
		case dschema.TypeBoolean:
			return &boolColumn{fixed[bool]{typ: typ}}, nil
		case dschema.TypeDate:
			return &dateColumn{fixed[int32]{typ: typ}}, nil
		case dschema.TypeTimestamp, dschema.TypeTimestampNTZ:
			if fastLayouts[layout] {
				layout = ""
			}
			return &timestampColumn{fixed: fixed[int64]{typ: typ}, loc: loc, ntz: t.Name == dschema.TypeTimestampNTZ, layout: layout}, nil
		}
	case *dschema.StructType, *dschema.ArrayType, *dschema.MapType:
		if nested {
			return &nestedColumn{typ: typ, scratch: array.NewBuilder(mem, typ)}, nil
		}
		return nil, fmt.Errorf("column %s: type %s cannot be read from this format", f.Name, f.Type)
	}
	return nil, fmt.Errorf("column %s: unsupported type %s", f.Name, f.Type)
}
