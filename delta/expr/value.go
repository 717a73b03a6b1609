package expr

import (
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"

	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Value is a typed scalar: a partition value, a stats bound, a predicate literal or a row
// value. Dates are days since the epoch and timestamps microseconds (both in i);
// decimals are exact rationals; binary is held in s.
type Value struct {
	kind valueKind
	i    int64
	f    float64
	s    string
	b    bool
	r    *big.Rat
}

type valueKind int

// IntValue is the integer (or date, or timestamp) scalar i.
func IntValue(i int64) Value { return Value{kind: vInt, i: i} }

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.kind == vNull }

// Int is v's integer (days for a date, microseconds for a timestamp); ok is false when v
// is no integer.
func (v Value) Int() (i int64, ok bool) { return v.i, v.kind == vInt }

const (
	vNull valueKind = iota
	vInt
	vFloat
	vString
	vBool
	vDecimal
)

// Compare orders two non-null values of the same column type: -1, 0 or 1. Ints and
// floats compare numerically across kinds.
func Compare(a, b Value) int {
	switch {
	case a.kind == vInt && b.kind == vInt:
		return cmp3(a.i, b.i)
	case a.kind == vString && b.kind == vString:
		return strings.Compare(a.s, b.s)
	case a.kind == vBool && b.kind == vBool:
		return cmp3(b2i(a.b), b2i(b.b))
	case a.kind == vDecimal || b.kind == vDecimal:
		return a.rat().Cmp(b.rat())
	}
	return cmpFloat(a.num(), b.num())
}

func cmp3[T int64 | int](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	// NaN sorts above everything, as in Spark.
	switch {
	case a != a && b != b:
		return 0
	case a != a:
		return 1
	case b != b:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (v Value) num() float64 {
	switch v.kind {
	case vInt:
		return float64(v.i)
	case vDecimal:
		f, _ := v.r.Float64()
		return f
	}
	return v.f
}

func (v Value) rat() *big.Rat {
	switch v.kind {
	case vDecimal:
		return v.r
	case vInt:
		return new(big.Rat).SetInt64(v.i)
	}
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(v.f, 'g', -1, 64))
	if !ok {
		return new(big.Rat)
	}
	return r
}

// ParsePartitionValue parses a serialized partition value (PROTOCOL.md §Partition Value
// Serialization) of the given type; nil and "" are null.
func ParsePartitionValue(dt dschema.DataType, s *string) (Value, error) {
	if s == nil || *s == "" {
		return Value{}, nil
	}
	return parseTyped(dt, *s, true)
}

// parseTyped parses text as a value of type dt. partition selects the partition-value
// timestamp forms ("YYYY-MM-DD HH:MM:SS[.f]" as well as ISO-8601).
func parseTyped(dt dschema.DataType, s string, partition bool) (Value, error) {
	bad := func(err error) (Value, error) {
		return Value{}, fmt.Errorf("%q is not a valid %s: %v", s, dt, err)
	}
	switch t := dt.(type) {
	case *dschema.DecimalType:
		r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
		if !ok {
			return bad(fmt.Errorf("not a number"))
		}
		return Value{kind: vDecimal, r: r}, nil
	case *dschema.PrimitiveType:
		switch t.Name {
		case dschema.TypeString, dschema.TypeBinary:
			return Value{kind: vString, s: s}, nil
		case dschema.TypeLong, dschema.TypeInteger, dschema.TypeShort, dschema.TypeByte:
			i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return bad(err)
			}
			return Value{kind: vInt, i: i}, nil
		case dschema.TypeDouble, dschema.TypeFloat:
			// A float is the float32 nearest the text, as Spark casts it (a partition
			// value, a stat, a quoted literal), so it equals the column's values.
			bits := 64
			if t.Name == dschema.TypeFloat {
				bits = 32
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(s), bits)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return bad(err)
			}
			return Value{kind: vFloat, f: f}, nil
		case dschema.TypeBoolean:
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(s)))
			if err != nil {
				return bad(err)
			}
			return Value{kind: vBool, b: b}, nil
		case dschema.TypeDate:
			d, err := time.Parse("2006-01-02", strings.TrimSpace(s))
			if err != nil {
				return bad(err)
			}
			return Value{kind: vInt, i: d.Unix() / 86400}, nil
		case dschema.TypeTimestamp, dschema.TypeTimestampNTZ:
			ts, err := parseTimestamp(strings.TrimSpace(s))
			if err != nil {
				return bad(err)
			}
			return Value{kind: vInt, i: ts.UnixMicro()}, nil
		}
	}
	return Value{}, fmt.Errorf("type %s has no scalar values", dt)
}

// timestampLayouts are the forms timestamps take in partition values, stats and
// predicate literals. Values without a zone are read as UTC (for timestamp_ntz that is
// the wall-clock reading).
var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02",
}

func parseTimestamp(s string) (time.Time, error) {
	var first error
	for _, l := range timestampLayouts {
		t, err := time.Parse(l, s)
		if err == nil {
			return t, nil
		}
		if first == nil {
			first = err
		}
	}
	return time.Time{}, first
}

// AppendValue appends a scalar to a builder of the matching Arrow type.
func AppendValue(b array.Builder, v Value) error {
	switch bb := b.(type) {
	case *array.StringBuilder:
		bb.Append(v.s)
	case *array.BinaryBuilder:
		bb.Append([]byte(v.s))
	case *array.Int64Builder:
		bb.Append(v.i)
	case *array.Int32Builder:
		bb.Append(int32(v.i))
	case *array.Int16Builder:
		bb.Append(int16(v.i))
	case *array.Int8Builder:
		bb.Append(int8(v.i))
	case *array.Float64Builder:
		bb.Append(v.num())
	case *array.Float32Builder:
		bb.Append(float32(v.num()))
	case *array.BooleanBuilder:
		bb.Append(v.b)
	case *array.Date32Builder:
		bb.Append(arrow.Date32(v.i))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(v.i))
	case *array.Decimal128Builder:
		dt := bb.Type().(*arrow.Decimal128Type)
		n, err := ratToDecimal(v.rat(), dt.Scale)
		if err != nil {
			return err
		}
		bb.Append(n)
	default:
		return fmt.Errorf("cannot build %s values", b.Type())
	}
	return nil
}

// ratToDecimal scales r to an unscaled decimal128 integer; it must be exact.
func ratToDecimal(r *big.Rat, scale int32) (decimal128.Num, error) {
	m := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !m.IsInt() {
		return decimal128.Num{}, fmt.Errorf("%s has more than %d decimal places", r.FloatString(10), scale)
	}
	return decimal128.FromBigInt(m.Num()), nil
}
