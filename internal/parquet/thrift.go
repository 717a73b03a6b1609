package parquet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A Parquet footer is a Thrift struct in the compact protocol. Splicing a file
// (parquet_splice.go) moves column chunks, so it rewrites the footer's offsets and keeps
// everything else as it was, including fields this code does not know. It therefore
// decodes the footer into a generic tree (tValue), edits the few fields it moves, and
// encodes the tree again.

// Compact protocol type ids.
const (
	tBoolTrue  = 1
	tBoolFalse = 2
	tByte      = 3
	tI16       = 4
	tI32       = 5
	tI64       = 6
	tDouble    = 7
	tBinary    = 8
	tList      = 9
	tSet       = 10
	tMap       = 11
	tStruct    = 12
)

// tValue is one decoded Thrift value. Integers (and a bool, as 0 or 1) are in i, a
// double's bits too; a list, set or map holds its elements in elems (a map: key, value,
// key, value...).
type tValue struct {
	typ    byte // tBoolTrue for any bool
	i      int64
	b      []byte
	elem   byte // list and set: element type; map: key type
	val    byte // map: value type
	elems  []tValue
	fields []tField
}

type tField struct {
	id int16
	v  tValue
}

// field returns the struct field id, or nil.
func (v *tValue) field(id int16) *tValue {
	for i := range v.fields {
		if v.fields[i].id == id {
			return &v.fields[i].v
		}
	}
	return nil
}

// int returns integer field id, and whether it is set.
func (v *tValue) int(id int16) (int64, bool) {
	f := v.field(id)
	if f == nil {
		return 0, false
	}
	return f.i, true
}

// setInt sets integer field id (of type typ) to x, adding it in id order if absent.
func (v *tValue) setInt(id int16, typ byte, x int64) {
	if f := v.field(id); f != nil {
		f.i = x
		return
	}
	at := len(v.fields)
	for i, f := range v.fields {
		if f.id > id {
			at = i
			break
		}
	}
	v.fields = append(v.fields, tField{})
	copy(v.fields[at+1:], v.fields[at:])
	v.fields[at] = tField{id: id, v: tValue{typ: typ, i: x}}
}

// drop removes the struct fields ids.
func (v *tValue) drop(ids ...int16) {
	out := v.fields[:0]
	for _, f := range v.fields {
		keep := true
		for _, id := range ids {
			keep = keep && f.id != id
		}
		if keep {
			out = append(out, f)
		}
	}
	v.fields = out
}

// thriftMaxDepth bounds nesting (a Parquet footer nests a few levels).
const thriftMaxDepth = 32

var errThriftShort = errors.New("thrift: truncated")

type thriftReader struct {
	buf []byte
	pos int
}

// decodeThriftStruct decodes one compact-protocol struct that fills buf.
func decodeThriftStruct(buf []byte) (tValue, error) {
	r := &thriftReader{buf: buf}
	v, err := r.value(tStruct, 0)
	if err != nil {
		return tValue{}, err
	}
	if r.pos != len(buf) {
		return tValue{}, fmt.Errorf("thrift: %d bytes after the struct", len(buf)-r.pos)
	}
	return v, nil
}

func (r *thriftReader) byte() (byte, error) {
	if r.pos >= len(r.buf) {
		return 0, errThriftShort
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

func (r *thriftReader) uvarint() (uint64, error) {
	x, n := binary.Uvarint(r.buf[r.pos:])
	if n <= 0 {
		return 0, errThriftShort
	}
	r.pos += n
	return x, nil
}

func (r *thriftReader) varint() (int64, error) {
	u, err := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// count reads a collection size, which cannot exceed the bytes left (every element
// takes at least one byte, except bools in a struct, which are not in collections).
func (r *thriftReader) count(n uint64) (int, error) {
	if n > uint64(len(r.buf)-r.pos) {
		return 0, errThriftShort
	}
	return int(n), nil
}

func (r *thriftReader) value(typ byte, depth int) (tValue, error) {
	if depth > thriftMaxDepth {
		return tValue{}, errors.New("thrift: nested too deep")
	}
	v := tValue{typ: typ}
	var err error
	switch typ {
	case tBoolTrue, tBoolFalse: // a collection element: one byte
		var b byte
		b, err = r.byte()
		v.typ, v.i = tBoolTrue, int64(b)
	case tByte:
		var b byte
		b, err = r.byte()
		v.i = int64(int8(b))
	case tI16, tI32, tI64:
		v.i, err = r.varint()
	case tDouble:
		if len(r.buf)-r.pos < 8 {
			return v, errThriftShort
		}
		v.i = int64(binary.LittleEndian.Uint64(r.buf[r.pos:]))
		r.pos += 8
	case tBinary:
		var n uint64
		if n, err = r.uvarint(); err != nil {
			return v, err
		}
		var k int
		if k, err = r.count(n); err != nil {
			return v, err
		}
		v.b = r.buf[r.pos : r.pos+k]
		r.pos += k
	case tList, tSet:
		var h byte
		if h, err = r.byte(); err != nil {
			return v, err
		}
		n := uint64(h >> 4)
		v.elem = h & 0x0f
		if n == 15 {
			if n, err = r.uvarint(); err != nil {
				return v, err
			}
		}
		var k int
		if k, err = r.count(n); err != nil {
			return v, err
		}
		v.elems = make([]tValue, k)
		for i := range v.elems {
			if v.elems[i], err = r.value(v.elem, depth+1); err != nil {
				return v, err
			}
		}
	case tMap:
		var n uint64
		if n, err = r.uvarint(); err != nil {
			return v, err
		}
		var k int
		if k, err = r.count(n); err != nil {
			return v, err
		}
		if k > 0 {
			var h byte
			if h, err = r.byte(); err != nil {
				return v, err
			}
			v.elem, v.val = h>>4, h&0x0f
		}
		v.elems = make([]tValue, 2*k)
		for i := range v.elems {
			t := v.elem
			if i%2 == 1 {
				t = v.val
			}
			if v.elems[i], err = r.value(t, depth+1); err != nil {
				return v, err
			}
		}
	case tStruct:
		last := int16(0)
		for {
			var h byte
			if h, err = r.byte(); err != nil {
				return v, err
			}
			if h == 0 {
				return v, nil
			}
			ft := h & 0x0f
			id := last + int16(h>>4)
			if h>>4 == 0 {
				var x int64
				if x, err = r.varint(); err != nil {
					return v, err
				}
				id = int16(x)
			}
			last = id
			var fv tValue
			switch ft {
			case tBoolTrue, tBoolFalse:
				fv = tValue{typ: tBoolTrue}
				if ft == tBoolTrue {
					fv.i = 1
				}
			default:
				if fv, err = r.value(ft, depth+1); err != nil {
					return v, err
				}
			}
			v.fields = append(v.fields, tField{id: id, v: fv})
		}
	default:
		return v, fmt.Errorf("thrift: unknown type %d", typ)
	}
	return v, err
}

// encodeThrift appends the compact-protocol encoding of struct v.
func encodeThrift(dst []byte, v *tValue) []byte {
	return appendThrift(dst, v, true)
}

func appendThrift(dst []byte, v *tValue, inCollection bool) []byte {
	switch v.typ {
	case tBoolTrue: // in a struct the field header carries the value
		if inCollection {
			dst = append(dst, byte(v.i))
		}
	case tByte:
		dst = append(dst, byte(v.i))
	case tI16, tI32, tI64:
		dst = binary.AppendUvarint(dst, uint64(v.i<<1)^uint64(v.i>>63))
	case tDouble:
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v.i))
	case tBinary:
		dst = binary.AppendUvarint(dst, uint64(len(v.b)))
		dst = append(dst, v.b...)
	case tList, tSet:
		if n := len(v.elems); n < 15 {
			dst = append(dst, byte(n)<<4|v.elem)
		} else {
			dst = append(dst, 0xf0|v.elem)
			dst = binary.AppendUvarint(dst, uint64(n))
		}
		for i := range v.elems {
			dst = appendThrift(dst, &v.elems[i], true)
		}
	case tMap:
		dst = binary.AppendUvarint(dst, uint64(len(v.elems)/2))
		if len(v.elems) > 0 {
			dst = append(dst, v.elem<<4|v.val)
		}
		for i := range v.elems {
			dst = appendThrift(dst, &v.elems[i], true)
		}
	case tStruct:
		last := int16(0)
		for i := range v.fields {
			f := &v.fields[i]
			t := f.v.typ
			if t == tBoolTrue && f.v.i == 0 {
				t = tBoolFalse
			}
			if d := f.id - last; d > 0 && d <= 15 {
				dst = append(dst, byte(d)<<4|t)
			} else {
				dst = append(dst, t)
				dst = binary.AppendUvarint(dst, uint64(int64(f.id)<<1)^uint64(int64(f.id)>>63))
			}
			last = f.id
			dst = appendThrift(dst, &f.v, false)
		}
		dst = append(dst, 0)
	}
	return dst
}
