package main

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// How Arrow values are shown. Every rendering is exact: decimals keep their scale
// ("12.50"), timestamps are RFC 3339 in UTC with as many fractional digits as they need
// ("2026-01-14T09:30:00.25Z"; a timestamp_ntz has no zone: "2026-01-14T09:30:00"),
// dates are YYYY-MM-DD, binary is base64, and structs, lists and maps are JSON. In JSON
// output integers and decimals are numbers written with all their digits, NaN and
// infinities strings.
const (
	timestampLayout    = "2006-01-02T15:04:05.999999999Z07:00"
	timestampNTZLayout = "2006-01-02T15:04:05.999999999"
	dateLayout         = "2006-01-02"
	timeLayout         = "15:04:05.999999999"
)

// numericType reports whether a column of this type is right-aligned in text output.
func numericType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	case arrow.DICTIONARY:
		return numericType(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// arrowCell renders row i of arr.
func arrowCell(arr arrow.Array, i int) cell {
	if arr.IsNull(i) {
		return nullCell
	}
	switch a := arr.(type) {
	case *array.Null:
		return nullCell
	case *array.Boolean:
		v := a.Value(i)
		return cell{text: strconv.FormatBool(v), json: v}
	case *array.Int8:
		return intCell(int64(a.Value(i)))
	case *array.Int16:
		return intCell(int64(a.Value(i)))
	case *array.Int32:
		return intCell(int64(a.Value(i)))
	case *array.Int64:
		return intCell(a.Value(i))
	case *array.Uint8:
		return uintCell(uint64(a.Value(i)))
	case *array.Uint16:
		return uintCell(uint64(a.Value(i)))
	case *array.Uint32:
		return uintCell(uint64(a.Value(i)))
	case *array.Uint64:
		return uintCell(a.Value(i))
	case *array.Float32:
		return floatCell(float64(a.Value(i)), 32)
	case *array.Float64:
		return floatCell(a.Value(i), 64)
	case *array.Decimal128:
		s := a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
		return cell{text: s, json: json.Number(s)}
	case *array.Decimal256:
		s := a.Value(i).ToString(a.DataType().(*arrow.Decimal256Type).Scale)
		return cell{text: s, json: json.Number(s)}
	case *array.String:
		return textCell(a.Value(i))
	case *array.LargeString:
		return textCell(a.Value(i))
	case *array.StringView:
		return textCell(a.Value(i))
	case *array.Binary:
		return binaryCell(a.Value(i))
	case *array.LargeBinary:
		return binaryCell(a.Value(i))
	case *array.BinaryView:
		return binaryCell(a.Value(i))
	case *array.FixedSizeBinary:
		return binaryCell(a.Value(i))
	case *array.Date32:
		return textCell(a.Value(i).ToTime().Format(dateLayout))
	case *array.Date64:
		return textCell(a.Value(i).ToTime().Format(dateLayout))
	case *array.Timestamp:
		tt := a.DataType().(*arrow.TimestampType)
		t := a.Value(i).ToTime(tt.Unit).UTC()
		if tt.TimeZone == "" {
			return textCell(t.Format(timestampNTZLayout))
		}
		return textCell(t.Format(timestampLayout))
	case *array.Time32:
		return textCell(a.Value(i).ToTime(a.DataType().(*arrow.Time32Type).Unit).Format(timeLayout))
	case *array.Time64:
		return textCell(a.Value(i).ToTime(a.DataType().(*arrow.Time64Type).Unit).Format(timeLayout))
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		obj := make(object, a.NumField())
		for f := range obj {
			obj[f] = member{key: st.Field(f).Name, value: arrowCell(a.Field(f), i).json}
		}
		return nestedCell(obj)
	case *array.Map:
		return nestedCell(mapValue(a, i))
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		vals := a.ListValues()
		list := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			list = append(list, arrowCell(vals, int(j)).json)
		}
		return nestedCell(list)
	case *array.Dictionary:
		return arrowCell(a.Dictionary(), a.GetValueIndex(i))
	}
	s := arr.ValueStr(i)
	return textCell(s)
}

func intCell(v int64) cell {
	s := strconv.FormatInt(v, 10)
	return cell{text: s, json: json.Number(s)}
}

func uintCell(v uint64) cell {
	s := strconv.FormatUint(v, 10)
	return cell{text: s, json: json.Number(s)}
}

func floatCell(v float64, bits int) cell {
	s := strconv.FormatFloat(v, 'g', -1, bits)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return cell{text: s, json: s}
	}
	return cell{text: s, json: json.Number(s)}
}

func binaryCell(b []byte) cell {
	return textCell(base64.StdEncoding.EncodeToString(b))
}

// nestedCell shows a struct, list or map as JSON in text and CSV too.
func nestedCell(v any) cell {
	b, err := marshalJSON(v)
	if err != nil {
		return cell{text: err.Error(), json: v}
	}
	return cell{text: string(b), json: v}
}

// mapValue is a map as a JSON object when its keys are strings (Delta's usual
// map<string,...>), else as a list of {"key":..., "value":...} entries.
func mapValue(a *array.Map, i int) any {
	start, end := a.ValueOffsets(i)
	keys, items := a.Keys(), a.Items()
	stringKeys := keys.DataType().ID() == arrow.STRING || keys.DataType().ID() == arrow.LARGE_STRING
	if stringKeys {
		obj := make(object, 0, end-start)
		for j := start; j < end; j++ {
			obj = append(obj, member{key: arrowCell(keys, int(j)).text, value: arrowCell(items, int(j)).json})
		}
		return obj
	}
	list := make([]any, 0, end-start)
	for j := start; j < end; j++ {
		list = append(list, object{{"key", arrowCell(keys, int(j)).json}, {"value", arrowCell(items, int(j)).json}})
	}
	return list
}

// formatTime renders an instant as RFC 3339 in UTC (history timestamps, --timestamp).
func formatTime(t time.Time) string {
	return t.UTC().Format(timestampLayout)
}
