package schema

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Cast converts an array read from a data file to the table's Arrow type. It is
// lenient where files written by other engines differ from the table schema in ways the
// protocol allows: INT96 (nanosecond) and millisecond timestamps, zone labels, widened
// integers and floats, decimals stored with another precision or scale, strings read as
// binary, struct fields in another order or missing (schema evolution: nulls), list and
// map field names of legacy encodings, nullability flags, and all-null columns.
func Cast(mem memory.Allocator, arr arrow.Array, target arrow.DataType) (arrow.Array, error) {
	src := arr.DataType()
	if arrow.TypeEqual(src, target) {
		arr.Retain()
		return arr, nil
	}
	if src.ID() == arrow.NULL {
		return array.MakeArrayOfNull(mem, target, arr.Len()), nil
	}
	fail := func() (arrow.Array, error) {
		return nil, fmt.Errorf("cannot read %s as %s", src, target)
	}
	switch t := target.(type) {
	case *extensions.VariantType:
		return castVariant(mem, arr, t)
	case *arrow.TimestampType:
		if d, ok := arr.(*array.Date32); ok && t.TimeZone == "" {
			return widenDate(mem, d, t), nil // a date column widened to timestamp_ntz
		}
		s, ok := src.(*arrow.TimestampType)
		if !ok {
			return fail()
		}
		return convertTimestamp(mem, arr.(*array.Timestamp), s.Unit, t), nil
	case *arrow.Int64Type, *arrow.Int32Type, *arrow.Int16Type, *arrow.Int8Type:
		return castInts(mem, arr, target)
	case *arrow.Float64Type:
		if a, ok := arr.(*array.Float32); ok {
			return widenFloat32(mem, a), nil
		}
		return castInts(mem, arr, target)
	case *arrow.StringType, *arrow.BinaryType:
		switch src.ID() {
		case arrow.STRING, arrow.BINARY:
			return relabel(arr, target), nil
		}
		return fail()
	case *arrow.Date32Type:
		return fail()
	case *arrow.Decimal128Type:
		return castDecimal(mem, arr, t)
	case *arrow.StructType:
		if s, ok := arr.(*array.Struct); ok {
			return castStruct(mem, s, t)
		}
	case *arrow.MapType:
		if m, ok := arr.(*array.Map); ok {
			return castMap(mem, m, t)
		}
	case *arrow.ListType:
		if l, ok := arr.(*array.List); ok {
			return castList(mem, l, t)
		}
	}
	return fail()
}

// relabel reuses arr's buffers under another, layout-compatible type.
func relabel(arr arrow.Array, target arrow.DataType) arrow.Array {
	d := arr.Data()
	nd := array.NewData(target, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd)
}

// castInts widens integers (files written before a type change, or with a narrower
// physical type) to the target integer or float type.
func castInts(mem memory.Allocator, arr arrow.Array, target arrow.DataType) (arrow.Array, error) {
	get, ok := arrowx.IntGetter(arr)
	if !ok {
		return nil, fmt.Errorf("cannot read %s as %s", arr.DataType(), target)
	}
	b := array.NewBuilder(mem, target)
	defer b.Release()
	b.Reserve(arr.Len())
	for i := 0; i < arr.Len(); i++ {
		if arr.IsNull(i) {
			b.AppendNull()
			continue
		}
		v := get(i)
		switch bb := b.(type) {
		case *array.Int64Builder:
			bb.Append(v)
		case *array.Int32Builder:
			bb.Append(int32(v))
		case *array.Int16Builder:
			bb.Append(int16(v))
		case *array.Int8Builder:
			bb.Append(int8(v))
		case *array.Float64Builder:
			bb.Append(float64(v))
		}
	}
	return b.NewArray(), nil
}

// widenFloat32 converts float32 values to float64.
func widenFloat32(mem memory.Allocator, a *array.Float32) arrow.Array {
	b := array.NewFloat64Builder(mem)
	defer b.Release()
	b.Reserve(a.Len())
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(float64(a.Value(i)))
		}
	}
	return b.NewArray()
}

// castStruct casts a struct's fields to target's, found by name (case-insensitively);
// a field the file lacks is all nulls.
func castStruct(mem memory.Allocator, s *array.Struct, target *arrow.StructType) (arrow.Array, error) {
	st := s.DataType().(*arrow.StructType)
	children := make([]arrow.Array, target.NumFields())
	defer arrowx.ReleaseArrays(children)
	for i, tf := range target.Fields() {
		idx := -1
		for j, sf := range st.Fields() {
			if strings.EqualFold(sf.Name, tf.Name) {
				idx = j
				break
			}
		}
		if idx < 0 {
			children[i] = array.MakeArrayOfNull(mem, tf.Type, s.Len())
			continue
		}
		c, err := Cast(mem, s.Field(idx), tf.Type)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", tf.Name, err)
		}
		children[i] = c
	}
	return rebuild(s, target, children), nil
}

// castMap casts a map's keys and values to target's.
func castMap(mem memory.Allocator, m *array.Map, target *arrow.MapType) (arrow.Array, error) {
	k, err := Cast(mem, m.Keys(), target.KeyType())
	if err != nil {
		return nil, fmt.Errorf("map key: %w", err)
	}
	defer k.Release()
	v, err := Cast(mem, m.Items(), target.ItemType())
	if err != nil {
		return nil, fmt.Errorf("map value: %w", err)
	}
	defer v.Release()
	return rebuildMap(m, target, k, v), nil
}

// castList casts a list's elements to target's.
func castList(mem memory.Allocator, l *array.List, target *arrow.ListType) (arrow.Array, error) {
	vals, err := Cast(mem, l.ListValues(), target.Elem())
	if err != nil {
		return nil, fmt.Errorf("array element: %w", err)
	}
	defer vals.Release()
	return rebuild(l, target, []arrow.Array{vals}), nil
}

// castDecimal reads decimals stored with another precision or scale (or as a plain
// integer column, or as decimal256) as the target decimal128.
func castDecimal(mem memory.Allocator, arr arrow.Array, t *arrow.Decimal128Type) (arrow.Array, error) {
	var get func(int) *big.Int
	var srcScale int32
	switch a := arr.(type) {
	case *array.Decimal128:
		srcScale = a.DataType().(*arrow.Decimal128Type).Scale
		if srcScale == t.Scale {
			return relabel(arr, t), nil
		}
		get = func(i int) *big.Int { return a.Value(i).BigInt() }
	case *array.Decimal256:
		srcScale = a.DataType().(*arrow.Decimal256Type).Scale
		get = func(i int) *big.Int { return a.Value(i).BigInt() }
	default:
		g, ok := arrowx.IntGetter(arr)
		if !ok {
			return nil, fmt.Errorf("cannot read %s as %s", arr.DataType(), t)
		}
		get = func(i int) *big.Int { return big.NewInt(g(i)) }
	}
	b := array.NewDecimal128Builder(mem, t)
	defer b.Release()
	b.Reserve(arr.Len())
	ten := big.NewInt(10)
	for i := 0; i < arr.Len(); i++ {
		if arr.IsNull(i) {
			b.AppendNull()
			continue
		}
		v := get(i)
		if d := t.Scale - srcScale; d > 0 {
			v.Mul(v, new(big.Int).Exp(ten, big.NewInt(int64(d)), nil))
		} else if d < 0 {
			v.Quo(v, new(big.Int).Exp(ten, big.NewInt(int64(-d)), nil))
		}
		b.Append(decimal128.FromBigInt(v))
	}
	return b.NewArray(), nil
}

// castVariant reads a variant column (the Parquet Variant logical type, which Arrow
// reads as its variant extension type) as the table's: the same unshredded storage up to
// nullability. A shredded variant (a typed_value field) is refused rather than read
// without the values shredded out of it.
func castVariant(mem memory.Allocator, arr arrow.Array, t *extensions.VariantType) (arrow.Array, error) {
	ext, ok := arr.(array.ExtensionArray)
	if !ok || !extensions.IsVariantExtensionName(ext.ExtensionType().ExtensionName()) {
		return nil, fmt.Errorf("cannot read %s as variant: the file does not annotate it as a Variant", arr.DataType())
	}
	st, ok := ext.Storage().(*array.Struct)
	if !ok {
		return nil, fmt.Errorf("cannot read variant stored as %s", ext.Storage().DataType())
	}
	if _, shredded := st.DataType().(*arrow.StructType).FieldIdx("typed_value"); shredded {
		return nil, errors.New("unsupported table feature: variantShredding (a shredded variant)")
	}
	storage, err := Cast(mem, st, t.StorageType())
	if err != nil {
		return nil, fmt.Errorf("variant: %w", err)
	}
	defer storage.Release()
	return array.NewExtensionArrayWithStorage(t, storage), nil
}

// Relabel reuses arr's buffers under target, a type of the same layout whose names may
// differ at any depth (struct field names, a list's element name): nothing is copied.
func Relabel(arr arrow.Array, target arrow.DataType) arrow.Array {
	if arrow.TypeEqual(arr.DataType(), target, arrow.CheckMetadata()) {
		arr.Retain()
		return arr
	}
	d := relabelData(arr.Data(), target)
	defer d.Release()
	return array.MakeFromData(d)
}

func relabelData(d arrow.ArrayData, target arrow.DataType) arrow.ArrayData {
	children := d.Children()
	var sub []arrow.ArrayData
	switch t := target.(type) {
	case *arrow.StructType:
		sub = make([]arrow.ArrayData, len(children))
		for i, c := range children {
			sub[i] = relabelData(c, t.Field(i).Type)
		}
	case *arrow.MapType:
		sub = []arrow.ArrayData{relabelData(children[0], t.Elem())}
	case *arrow.ListType:
		sub = []arrow.ArrayData{relabelData(children[0], t.Elem())}
	default:
		return array.NewData(target, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	}
	out := array.NewData(target, d.Len(), d.Buffers(), sub, d.NullN(), d.Offset())
	for _, c := range sub {
		c.Release()
	}
	return out
}

// widenDate reads dates as timestamps without a zone (midnight of each date), as a
// column widened from date to timestamp_ntz reads its older files.
func widenDate(mem memory.Allocator, a *array.Date32, t *arrow.TimestampType) arrow.Array {
	per := int64(86400)
	switch t.Unit {
	case arrow.Millisecond:
		per *= 1e3
	case arrow.Microsecond:
		per *= 1e6
	case arrow.Nanosecond:
		per *= 1e9
	}
	b := array.NewTimestampBuilder(mem, t)
	defer b.Release()
	b.Reserve(a.Len())
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(arrow.Timestamp(int64(a.Value(i)) * per))
	}
	return b.NewArray()
}
