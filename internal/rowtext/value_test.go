package rowtext

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestAt(t *testing.T) {
	mem := memory.DefaultAllocator
	ts := time.Date(2026, 1, 14, 9, 30, 0, 250_000_000, time.UTC)
	dec := array.NewDecimal128Builder(mem, &arrow.Decimal128Type{Precision: 10, Scale: 2})
	dec.Append(decimal128.FromI64(1250))
	tz := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})
	tz.Append(arrow.Timestamp(ts.UnixMicro()))
	ntz := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond})
	ntz.Append(arrow.Timestamp(ts.UnixMicro()))
	str := array.NewStringBuilder(mem)
	str.Append("<b>x</b>")
	str.AppendNull()
	strs := str.NewArray()
	st := array.NewStructBuilder(mem, arrow.StructOf(arrow.Field{Name: "z", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "a", Type: arrow.BinaryTypes.String}))
	st.Append(true)
	st.FieldBuilder(0).(*array.Int64Builder).Append(9007199254740993)
	st.FieldBuilder(1).(*array.StringBuilder).Append("q")
	for _, tc := range []struct {
		name     string
		arr      arrow.Array
		i        int
		text     string
		jsonText string
	}{
		{"decimal keeps its scale", dec.NewArray(), 0, "12.50", "12.50"},
		{"timestamp in UTC", tz.NewArray(), 0, "2026-01-14T09:30:00.25Z", `"2026-01-14T09:30:00.25Z"`},
		{"timestamp_ntz has no zone", ntz.NewArray(), 0, "2026-01-14T09:30:00.25", `"2026-01-14T09:30:00.25"`},
		{"markup stays as written", strs, 0, "<b>x</b>", `"<b>x</b>"`},
		{"struct keeps field order and big integers", st.NewArray(), 0, `{"z":9007199254740993,"a":"q"}`, `{"z":9007199254740993,"a":"q"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := At(tc.arr, tc.i)
			b, err := Marshal(v.JSON)
			if err != nil || v.Null || v.Text != tc.text || string(b) != tc.jsonText {
				t.Errorf("At = %+v (JSON %s, %v), want text %q, JSON %s", v, b, err, tc.text, tc.jsonText)
			}
		})
	}
	if v := At(strs, 1); !v.Null {
		t.Errorf("null: %+v", v)
	}
	ints := array.NewInt64Builder(mem)
	ints.AppendValues([]int64{3, 1}, nil)
	ints.AppendNull()
	ia := ints.NewArray()
	if Compare(KeyAt(ia, 2), KeyAt(ia, 1)) >= 0 || Compare(KeyAt(ia, 1), KeyAt(ia, 0)) >= 0 {
		t.Error("order: want null < 1 < 3")
	}
}
