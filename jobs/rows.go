package jobs

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Row values move between Arrow and the SCD fold as comparable Go values (keyed.Value
// reads them): nil, string, int64 (every integer type, date32 days, timestamp
// microseconds), float64, bool and decimal128.Num. Binary values are held as strings.

// appendValue appends a Go value (as colValue returns them) to a builder.
func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.BinaryBuilder:
		b.Append([]byte(v.(string)))
	case *array.Int8Builder:
		b.Append(int8(v.(int64)))
	case *array.Int16Builder:
		b.Append(int16(v.(int64)))
	case *array.Int32Builder:
		b.Append(int32(v.(int64)))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Float32Builder:
		b.Append(float32(v.(float64)))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.Date32Builder:
		b.Append(arrow.Date32(v.(int64)))
	case *array.TimestampBuilder:
		unit := b.Type().(*arrow.TimestampType).Unit
		micros := v.(int64)
		switch unit {
		case arrow.Second:
			micros /= 1_000_000
		case arrow.Millisecond:
			micros /= 1_000
		case arrow.Nanosecond:
			micros *= 1_000
		}
		b.Append(arrow.Timestamp(micros))
	case *array.Decimal128Builder:
		b.Append(v.(decimal128.Num))
	default:
		return fmt.Errorf("column type %s is not supported here", b.Type())
	}
	return nil
}

// appendFrom appends arr[i] to b: directly when they hold the same type, else through
// colValue and appendValue (which convert, e.g. int32 to int64).
func appendFrom(b array.Builder, arr arrow.Array, i int) error {
	if arr.IsNull(i) {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		if a, ok := arr.(*array.String); ok {
			b.Append(a.Value(i))
			return nil
		}
	case *array.Int64Builder:
		if a, ok := arr.(*array.Int64); ok {
			b.Append(a.Value(i))
			return nil
		}
	case *array.Int32Builder:
		if a, ok := arr.(*array.Int32); ok {
			b.Append(a.Value(i))
			return nil
		}
	case *array.BooleanBuilder:
		if a, ok := arr.(*array.Boolean); ok {
			b.Append(a.Value(i))
			return nil
		}
	case *array.TimestampBuilder:
		if a, ok := arr.(*array.Timestamp); ok && arrow.TypeEqual(a.DataType(), b.Type()) {
			b.Append(a.Value(i))
			return nil
		}
	}
	v, err := keyed.Value(arr, i)
	if err != nil {
		return err
	}
	return appendValue(b, v)
}
