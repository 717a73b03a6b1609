package rowtext

import (
	"cmp"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Key is one row's value of an order column: null, a number (integers, dates and
// timestamps as their integers, decimals as their value), or text.
type Key struct {
	null bool
	num  float64
	i    int64
	text string
	kind int // 0 integer, 1 float, 2 text
}

// KeyAt returns row i's Key.
func KeyAt(arr arrow.Array, i int) Key {
	if arr.IsNull(i) {
		return Key{null: true}
	}
	switch a := arr.(type) {
	case *array.Int8:
		return Key{i: int64(a.Value(i))}
	case *array.Int16:
		return Key{i: int64(a.Value(i))}
	case *array.Int32:
		return Key{i: int64(a.Value(i))}
	case *array.Int64:
		return Key{i: a.Value(i)}
	case *array.Date32:
		return Key{i: int64(a.Value(i))}
	case *array.Timestamp:
		return Key{i: int64(a.Value(i))}
	case *array.Boolean:
		return Key{i: int64(rank(a.Value(i)))}
	case *array.Float32:
		return Key{num: float64(a.Value(i)), kind: 1}
	case *array.Float64:
		return Key{num: a.Value(i), kind: 1}
	case *array.Decimal128:
		return Key{num: a.Value(i).ToFloat64(a.DataType().(*arrow.Decimal128Type).Scale), kind: 1}
	}
	return Key{text: arr.ValueStr(i), kind: 2}
}

// Compare orders two keys ascending, nulls first.
func Compare(a, b Key) int {
	switch {
	case a.null || b.null:
		return cmp.Compare(rank(!a.null), rank(!b.null))
	case a.kind == 0 && b.kind == 0:
		return cmp.Compare(a.i, b.i)
	case a.kind == 2 || b.kind == 2:
		return strings.Compare(a.text, b.text)
	}
	return cmp.Compare(a.num, b.num)
}

func rank(b bool) int {
	if b {
		return 1
	}
	return 0
}
