package delta

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// value is a typed scalar used for partition values, stats bounds, predicate literals and
// row values. Dates are days since the epoch and timestamps microseconds (both in i);
// decimals are exact rationals; binary is held in s.
type value struct {
	kind valueKind
	i    int64
	f    float64
	s    string
	b    bool
	r    *big.Rat
}

type valueKind int

const (
	vNull valueKind = iota
	vInt
	vFloat
	vString
	vBool
	vDecimal
)

// compareValues orders two non-null values of the same column type: -1, 0 or 1. Ints and
// floats compare numerically across kinds.
func compareValues(a, b value) int {
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

func (v value) num() float64 {
	switch v.kind {
	case vInt:
		return float64(v.i)
	case vDecimal:
		f, _ := v.r.Float64()
		return f
	}
	return v.f
}

func (v value) rat() *big.Rat {
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

// parsePartitionValue parses a serialized partition value (PROTOCOL.md §Partition Value
// Serialization) of the given type; nil and "" are null.
func parsePartitionValue(dt DataType, s *string) (value, error) {
	if s == nil || *s == "" {
		return value{}, nil
	}
	return parseTyped(dt, *s, true)
}

// parseTyped parses text as a value of type dt. partition selects the partition-value
// timestamp forms ("YYYY-MM-DD HH:MM:SS[.f]" as well as ISO-8601).
func parseTyped(dt DataType, s string, partition bool) (value, error) {
	bad := func(err error) (value, error) {
		return value{}, fmt.Errorf("%q is not a valid %s: %v", s, dt, err)
	}
	switch t := dt.(type) {
	case *DecimalType:
		r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
		if !ok {
			return bad(fmt.Errorf("not a number"))
		}
		return value{kind: vDecimal, r: r}, nil
	case *PrimitiveType:
		switch t.Name {
		case TypeString, TypeBinary:
			return value{kind: vString, s: s}, nil
		case TypeLong, TypeInteger, TypeShort, TypeByte:
			i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return bad(err)
			}
			return value{kind: vInt, i: i}, nil
		case TypeDouble, TypeFloat:
			// A float is the float32 nearest the text, as Spark casts it (a partition
			// value, a stat, a quoted literal), so it equals the column's values.
			bits := 64
			if t.Name == TypeFloat {
				bits = 32
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(s), bits)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return bad(err)
			}
			return value{kind: vFloat, f: f}, nil
		case TypeBoolean:
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(s)))
			if err != nil {
				return bad(err)
			}
			return value{kind: vBool, b: b}, nil
		case TypeDate:
			d, err := time.Parse("2006-01-02", strings.TrimSpace(s))
			if err != nil {
				return bad(err)
			}
			return value{kind: vInt, i: d.Unix() / 86400}, nil
		case TypeTimestamp, TypeTimestampNTZ:
			ts, err := parseTimestamp(strings.TrimSpace(s))
			if err != nil {
				return bad(err)
			}
			return value{kind: vInt, i: ts.UnixMicro()}, nil
		}
	}
	return value{}, fmt.Errorf("type %s has no scalar values", dt)
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

// partitionColumn builds the constant column of n rows holding a file's partition value
// for field f (Arrow type at).
func partitionColumn(mem memory.Allocator, f *StructField, at arrow.DataType, a *Add, n int) (arrow.Array, error) {
	v, err := parsePartitionValue(f.Type, partitionValue(a, f.Name, physicalName(f)))
	if err != nil {
		return nil, fmt.Errorf("partition column %s: %w", f.Name, err)
	}
	if v.kind == vNull {
		return array.MakeArrayOfNull(mem, at, n), nil
	}
	b := array.NewBuilder(mem, at)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		if err := appendValue(b, v); err != nil {
			return nil, fmt.Errorf("partition column %s: %w", f.Name, err)
		}
	}
	return b.NewArray(), nil
}

// appendValue appends a scalar to a builder of the matching Arrow type.
func appendValue(b array.Builder, v value) error {
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
