package main

import (
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

func TestArrowCell(t *testing.T) {
	mem := memory.NewGoAllocator()
	build := func(dt arrow.DataType, fill func(b array.Builder)) arrow.Array {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		fill(b)
		return b.NewArray()
	}
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	ntz := &arrow.TimestampType{Unit: arrow.Microsecond}
	dec := &arrow.Decimal128Type{Precision: 10, Scale: 2}
	tests := []struct {
		name     string
		arr      arrow.Array
		wantText string
		wantJSON string
	}{
		{"int64", build(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(-9007199254740993) }), "-9007199254740993", "-9007199254740993"},
		{"int32", build(arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).Append(42) }), "42", "42"},
		{"float64", build(arrow.PrimitiveTypes.Float64, func(b array.Builder) { b.(*array.Float64Builder).Append(0.1) }), "0.1", "0.1"},
		{"nan", build(arrow.PrimitiveTypes.Float64, func(b array.Builder) { b.(*array.Float64Builder).Append(math.NaN()) }), "NaN", `"NaN"`},
		{"decimal scale kept", build(dec, func(b array.Builder) { b.(*array.Decimal128Builder).Append(decimal128.FromI64(1250)) }), "12.50", "12.50"},
		{"decimal negative small", build(dec, func(b array.Builder) { b.(*array.Decimal128Builder).Append(decimal128.FromI64(-5)) }), "-0.05", "-0.05"},
		{"string", build(arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).Append(`a "b" <c>`) }), `a "b" <c>`, `"a \"b\" <c>"`},
		{"binary", build(arrow.BinaryTypes.Binary, func(b array.Builder) { b.(*array.BinaryBuilder).Append([]byte{0, 1, 2}) }), "AAEC", `"AAEC"`},
		{"bool", build(arrow.FixedWidthTypes.Boolean, func(b array.Builder) { b.(*array.BooleanBuilder).Append(true) }), "true", "true"},
		{"date", build(arrow.FixedWidthTypes.Date32, func(b array.Builder) { b.(*array.Date32Builder).Append(arrow.Date32(20467)) }), "2026-01-14", `"2026-01-14"`},
		{"timestamp utc", build(ts, func(b array.Builder) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(1768383000250000)) }), "2026-01-14T09:30:00.25Z", `"2026-01-14T09:30:00.25Z"`},
		{"timestamp whole second", build(ts, func(b array.Builder) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(1768383000000000)) }), "2026-01-14T09:30:00Z", `"2026-01-14T09:30:00Z"`},
		{"timestamp ntz", build(ntz, func(b array.Builder) { b.(*array.TimestampBuilder).Append(arrow.Timestamp(1768383000000001)) }), "2026-01-14T09:30:00.000001", `"2026-01-14T09:30:00.000001"`},
		{"list", build(arrow.ListOf(arrow.PrimitiveTypes.Int32), func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{1, 2}, nil)
			lb.ValueBuilder().AppendNull()
		}), "[1,2,null]", "[1,2,null]"},
		{"struct", build(arrow.StructOf(arrow.Field{Name: "z", Type: arrow.BinaryTypes.String, Nullable: true}, arrow.Field{Name: "a", Type: dec}), func(b array.Builder) {
			sb := b.(*array.StructBuilder)
			sb.Append(true)
			sb.FieldBuilder(0).AppendNull()
			sb.FieldBuilder(1).(*array.Decimal128Builder).Append(decimal128.FromI64(100))
		}), `{"z":null,"a":1.00}`, `{"z":null,"a":1.00}`},
		{"map", build(arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), func(b array.Builder) {
			mb := b.(*array.MapBuilder)
			mb.Append(true)
			mb.KeyBuilder().(*array.StringBuilder).AppendValues([]string{"b", "a"}, nil)
			mb.ItemBuilder().(*array.Int64Builder).AppendValues([]int64{2, 1}, nil)
		}), `{"b":2,"a":1}`, `{"b":2,"a":1}`},
		{"null", build(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.AppendNull() }), "", "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.arr.Release()
			c := arrowCell(tc.arr, 0)
			var js []byte
			if c.Null {
				js = []byte("null")
			} else {
				var err error
				if js, err = rowtext.Marshal(c.JSON); err != nil {
					t.Fatal(err)
				}
			}
			if c.Text != tc.wantText || string(js) != tc.wantJSON {
				t.Errorf("got text %q json %s, want text %q json %s", c.Text, js, tc.wantText, tc.wantJSON)
			}
		})
	}
}
