package rowtext

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// Layouts of times.
const (
	TimestampLayout    = "2006-01-02T15:04:05.999999999Z07:00"
	TimestampNTZLayout = "2006-01-02T15:04:05.999999999"
	DateLayout         = "2006-01-02"
	TimeLayout         = "15:04:05.999999999"
)

// Value is one rendered value: Text for text and CSV, JSON the value encoding/json
// writes (json.Number keeps a number's digits; Object keeps a struct's field order).
type Value struct {
	Null bool
	Text string
	JSON any
}

// Text is a string value.
func Text(s string) Value { return Value{Text: s, JSON: s} }

// Int is an integer value.
func Int(v int64) Value {
	s := strconv.FormatInt(v, 10)
	return Value{Text: s, JSON: json.Number(s)}
}

// Null is the null value.
var Null = Value{Null: true}

// Numeric reports whether values of this type are numbers (right-aligned in text).
func Numeric(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	case arrow.DICTIONARY:
		return Numeric(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// At renders row i of arr.
func At(arr arrow.Array, i int) Value {
	if v, ok := arr.(*extensions.VariantArray); ok {
		return variantValue(v, i)
	}
	if arr.IsNull(i) {
		return Null
	}
	switch a := arr.(type) {
	case *array.Null:
		return Null
	case *array.Boolean:
		v := a.Value(i)
		return Value{Text: strconv.FormatBool(v), JSON: v}
	case *array.Int8:
		return Int(int64(a.Value(i)))
	case *array.Int16:
		return Int(int64(a.Value(i)))
	case *array.Int32:
		return Int(int64(a.Value(i)))
	case *array.Int64:
		return Int(a.Value(i))
	case *array.Uint8:
		return uintValue(uint64(a.Value(i)))
	case *array.Uint16:
		return uintValue(uint64(a.Value(i)))
	case *array.Uint32:
		return uintValue(uint64(a.Value(i)))
	case *array.Uint64:
		return uintValue(a.Value(i))
	case *array.Float32:
		return floatValue(float64(a.Value(i)), 32)
	case *array.Float64:
		return floatValue(a.Value(i), 64)
	case *array.Decimal128:
		s := a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
		return Value{Text: s, JSON: json.Number(s)}
	case *array.Decimal256:
		s := a.Value(i).ToString(a.DataType().(*arrow.Decimal256Type).Scale)
		return Value{Text: s, JSON: json.Number(s)}
	case *array.String:
		return Text(a.Value(i))
	case *array.LargeString:
		return Text(a.Value(i))
	case *array.StringView:
		return Text(a.Value(i))
	case *array.Binary:
		return binaryValue(a.Value(i))
	case *array.LargeBinary:
		return binaryValue(a.Value(i))
	case *array.BinaryView:
		return binaryValue(a.Value(i))
	case *array.FixedSizeBinary:
		return binaryValue(a.Value(i))
	case *array.Date32:
		return Text(a.Value(i).ToTime().Format(DateLayout))
	case *array.Date64:
		return Text(a.Value(i).ToTime().Format(DateLayout))
	case *array.Timestamp:
		tt := a.DataType().(*arrow.TimestampType)
		t := a.Value(i).ToTime(tt.Unit).UTC()
		if tt.TimeZone == "" {
			return Text(t.Format(TimestampNTZLayout))
		}
		return Text(t.Format(TimestampLayout))
	case *array.Time32:
		return Text(a.Value(i).ToTime(a.DataType().(*arrow.Time32Type).Unit).Format(TimeLayout))
	case *array.Time64:
		return Text(a.Value(i).ToTime(a.DataType().(*arrow.Time64Type).Unit).Format(TimeLayout))
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		obj := make(Object, a.NumField())
		for f := range obj {
			obj[f] = Member{Key: st.Field(f).Name, Value: At(a.Field(f), i).JSON}
		}
		return nested(obj)
	case *array.Map:
		return nested(mapValue(a, i))
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		vals := a.ListValues()
		list := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			list = append(list, At(vals, int(j)).JSON)
		}
		return nested(list)
	case *array.Dictionary:
		return At(a.Dictionary(), a.GetValueIndex(i))
	}
	return Text(arr.ValueStr(i))
}

func uintValue(v uint64) Value {
	s := strconv.FormatUint(v, 10)
	return Value{Text: s, JSON: json.Number(s)}
}

func floatValue(v float64, bits int) Value {
	s := strconv.FormatFloat(v, 'g', -1, bits)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Value{Text: s, JSON: s}
	}
	return Value{Text: s, JSON: json.Number(s)}
}

func binaryValue(b []byte) Value { return Text(base64.StdEncoding.EncodeToString(b)) }

// nested shows a struct, list or map as JSON in text too.
func nested(v any) Value {
	b, err := Marshal(v)
	if err != nil {
		return Value{Text: err.Error(), JSON: v}
	}
	return Value{Text: string(b), JSON: v}
}

// mapValue is a map as a JSON object when its keys are strings (Delta's usual
// map<string,...>), else as a list of {"key":..., "value":...} entries.
func mapValue(a *array.Map, i int) any {
	start, end := a.ValueOffsets(i)
	keys, items := a.Keys(), a.Items()
	if id := keys.DataType().ID(); id == arrow.STRING || id == arrow.LARGE_STRING {
		obj := make(Object, 0, end-start)
		for j := start; j < end; j++ {
			obj = append(obj, Member{Key: At(keys, int(j)).Text, Value: At(items, int(j)).JSON})
		}
		return obj
	}
	list := make([]any, 0, end-start)
	for j := start; j < end; j++ {
		list = append(list, Object{{"key", At(keys, int(j)).JSON}, {"value", At(items, int(j)).JSON}})
	}
	return list
}

// Marshal encodes v as JSON without HTML escaping, so "<" and "&" stay readable (a page
// escapes them itself).
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Object is a JSON object that keeps its keys in order (struct values, maps).
type Object []Member

// Member is one key of an Object.
type Member struct {
	Key   string
	Value any
}

// MarshalJSON implements json.Marshaler.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		v, err := Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// variantValue is a VARIANT as its JSON text (and value): SQL NULL when the row has no
// variant, JSON null for a variant holding null (Arrow's VariantArray.IsNull reports
// both as null; Spark tells them apart).
func variantValue(v *extensions.VariantArray, i int) Value {
	if v.Storage().IsNull(i) {
		return Null
	}
	if v.IsNull(i) {
		return Value{Text: "null", JSON: nil}
	}
	val, err := v.Value(i)
	if err != nil {
		return Text("error: " + err.Error())
	}
	text := val.String()
	return Value{Text: text, JSON: json.RawMessage(text)}
}
