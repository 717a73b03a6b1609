package schema

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Conform enforces the table schema on an incoming record and returns a record whose
// schema is exactly target (the table's Arrow schema), column for column:
//   - columns are matched by name ignoring case; order does not matter;
//   - a column the table lacks is an error (schema evolution is opt-in: Merge first);
//   - a missing nullable column is filled with nulls; a missing non-nullable one is an error;
//   - types must match (nested field names and nullability flags may differ; timestamps of
//     any unit or zone are converted to microseconds; a type the column's widens, as
//     CanWiden says, is cast); otherwise the error names the column and both types;
//   - a non-nullable column (or nested field) holding nulls is an error naming it.
//
// The caller releases the result.
func Conform(mem memory.Allocator, rec arrow.RecordBatch, table *StructType, target *arrow.Schema) (arrow.RecordBatch, error) {
	in := rec.Schema()
	used := make([]bool, in.NumFields())
	cols := make([]arrow.Array, len(table.Fields))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range table.Fields {
		idx := -1
		for j, inf := range in.Fields() {
			if strings.EqualFold(inf.Name, f.Name) {
				idx = j
				break
			}
		}
		tf := target.Field(i)
		if idx < 0 {
			if !f.Nullable {
				return nil, fmt.Errorf("column %s (%s, not nullable) is missing from the written data", f.Name, f.Type)
			}
			cols[i] = array.MakeArrayOfNull(mem, tf.Type, int(rec.NumRows()))
			continue
		}
		used[idx] = true
		c, err := ConformArray(mem, rec.Column(idx), tf.Type, f.Name, f.Type)
		if err != nil {
			return nil, err
		}
		cols[i] = c
		if err := checkNotNull(c, f.Name, f.Nullable, f.Type, nil); err != nil {
			return nil, err
		}
	}
	for j, u := range used {
		if !u {
			inf := in.Field(j)
			dt, err := DataTypeFromArrow(inf.Type)
			name := inf.Type.String()
			if err == nil {
				name = dt.String()
			}
			return nil, fmt.Errorf("column %s (%s) is not in the table schema (enable schema evolution to add it)", inf.Name, name)
		}
	}
	return array.NewRecordBatch(target, cols, rec.NumRows()), nil
}

// ConformArray relabels or converts arr to the target Arrow type; column and dt name the
// column and its Delta type for errors.
func ConformArray(mem memory.Allocator, arr arrow.Array, target arrow.DataType, column string, dt DataType) (arrow.Array, error) {
	src := arr.DataType()
	if arrow.TypeEqual(src, target) {
		arr.Retain()
		return arr, nil
	}
	mismatch := func() error {
		got := src.String()
		if d, err := DataTypeFromArrow(src); err == nil {
			got = d.String()
		}
		return fmt.Errorf("column %s: table type %s, written type %s", column, dt, got)
	}
	if from, err := DataTypeFromArrow(src); err == nil && CanWiden(from, dt) {
		return Cast(mem, arr, target) // data of a column's type before it was widened
	}
	switch t := target.(type) {
	case *arrow.TimestampType:
		s, ok := src.(*arrow.TimestampType)
		if !ok || (s.TimeZone == "") != (t.TimeZone == "") {
			return nil, mismatch()
		}
		return convertTimestamp(mem, arr.(*array.Timestamp), s.Unit, t), nil
	case *arrow.StructType:
		s, ok := src.(*arrow.StructType)
		sdt, _ := dt.(*StructType)
		if !ok || sdt == nil {
			return nil, mismatch()
		}
		return conformStruct(mem, arr.(*array.Struct), s, t, column, sdt)
	case *arrow.MapType:
		mdt, _ := dt.(*MapType)
		if _, ok := src.(*arrow.MapType); !ok || mdt == nil {
			return nil, mismatch()
		}
		return conformMap(mem, arr.(*array.Map), t, column, mdt)
	case *arrow.ListType:
		adt, _ := dt.(*ArrayType)
		if _, ok := src.(*arrow.ListType); !ok || adt == nil {
			return nil, mismatch()
		}
		return conformList(mem, arr.(*array.List), t, column, adt)
	}
	return nil, mismatch()
}

// conformStruct conforms a struct's fields (of type s) to the table's struct type
// (target, Delta type dt), found by name (case-insensitively): a nullable field the
// data lacks is all nulls; a field the table lacks is an error.
func conformStruct(mem memory.Allocator, sa *array.Struct, s, target *arrow.StructType, column string, dt *StructType) (arrow.Array, error) {
	children := make([]arrow.Array, target.NumFields())
	defer arrowx.ReleaseArrays(children)
	used := make([]bool, s.NumFields())
	for i, tf := range target.Fields() {
		idx := -1
		for j, sf := range s.Fields() {
			if strings.EqualFold(sf.Name, tf.Name) {
				idx = j
			}
		}
		sub := column + "." + tf.Name
		if idx < 0 {
			if !tf.Nullable {
				return nil, fmt.Errorf("column %s (%s, not nullable) is missing from the written data", sub, dt.Fields[i].Type)
			}
			children[i] = array.MakeArrayOfNull(mem, tf.Type, sa.Len())
			continue
		}
		used[idx] = true
		c, err := ConformArray(mem, sa.Field(idx), tf.Type, sub, dt.Fields[i].Type)
		if err != nil {
			return nil, err
		}
		children[i] = c
	}
	for j, u := range used {
		if !u {
			return nil, fmt.Errorf("column %s.%s is not in the table schema", column, s.Field(j).Name)
		}
	}
	return rebuild(sa, target, children), nil
}

// conformMap conforms a map's keys and values to the table's map type.
func conformMap(mem memory.Allocator, m *array.Map, target *arrow.MapType, column string, dt *MapType) (arrow.Array, error) {
	k, err := ConformArray(mem, m.Keys(), target.KeyType(), column+".key", dt.KeyType)
	if err != nil {
		return nil, err
	}
	defer k.Release()
	v, err := ConformArray(mem, m.Items(), target.ItemType(), column+".value", dt.ValueType)
	if err != nil {
		return nil, err
	}
	defer v.Release()
	return rebuildMap(m, target, k, v), nil
}

// conformList conforms a list's elements to the table's array type.
func conformList(mem memory.Allocator, l *array.List, target *arrow.ListType, column string, dt *ArrayType) (arrow.Array, error) {
	vals, err := ConformArray(mem, l.ListValues(), target.Elem(), column+".element", dt.ElementType)
	if err != nil {
		return nil, err
	}
	defer vals.Release()
	return rebuild(l, target, []arrow.Array{vals}), nil
}

// rebuild makes an array of type target from arr's own buffers (validity, offsets) and
// new children. List children are the unsliced ListValues, so the parent's offset still
// applies; struct children come from Field(), already sliced to the parent's range, so a
// sliced struct is rebuilt at offset 0 with its validity copied.
func rebuild(arr arrow.Array, target arrow.DataType, children []arrow.Array) arrow.Array {
	d := arr.Data()
	cd := make([]arrow.ArrayData, len(children))
	for i, c := range children {
		cd[i] = c.Data()
	}
	if _, ok := target.(*arrow.StructType); ok && d.Offset() != 0 {
		return rebuildStructAtZero(arr, target, children)
	}
	nd := array.NewData(target, d.Len(), d.Buffers(), cd, d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd)
}

// rebuildMap makes a map array of type target from arr's offsets and validity and new
// (unsliced) keys and items.
func rebuildMap(arr arrow.Array, target *arrow.MapType, keys, items arrow.Array) arrow.Array {
	entries := array.NewData(target.Elem(), keys.Len(), []*memory.Buffer{nil}, []arrow.ArrayData{keys.Data(), items.Data()}, 0, 0)
	defer entries.Release()
	d := arr.Data()
	out := array.NewData(target, d.Len(), d.Buffers(), []arrow.ArrayData{entries}, d.NullN(), d.Offset())
	defer out.Release()
	return array.MakeFromData(out)
}

func rebuildStructAtZero(arr arrow.Array, target arrow.DataType, children []arrow.Array) arrow.Array {
	st := target.(*arrow.StructType)
	var bitmap *memory.Buffer
	if arr.NullN() > 0 {
		bitmap = memory.NewResizableBuffer(memory.DefaultAllocator)
		bitmap.Resize((arr.Len() + 7) / 8)
		bs := bitmap.Bytes()
		for i := range bs {
			bs[i] = 0
		}
		for i := 0; i < arr.Len(); i++ {
			if arr.IsValid(i) {
				bs[i/8] |= 1 << (i % 8)
			}
		}
		defer bitmap.Release()
	}
	out, err := array.NewStructArrayWithFieldsAndNulls(children, st.Fields(), bitmap, arr.NullN(), 0)
	if err != nil {
		panic(fmt.Sprintf("delta: rebuild struct: %v", err))
	}
	return out
}

func convertTimestamp(mem memory.Allocator, a *array.Timestamp, from arrow.TimeUnit, to *arrow.TimestampType) arrow.Array {
	b := array.NewTimestampBuilder(mem, to)
	defer b.Release()
	b.Reserve(a.Len())
	mul, div := unitFactor(from, to.Unit)
	vals := a.TimestampValues()
	for i, v := range vals {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		x := int64(v) * mul
		if div > 1 {
			x = floorDiv(int64(v), div)
		}
		b.Append(arrow.Timestamp(x))
	}
	return b.NewArray()
}

// unitFactor gives the multiplier or divisor converting from one time unit to another.
func unitFactor(from, to arrow.TimeUnit) (mul, div int64) {
	f := from.Multiplier().Nanoseconds()
	t := to.Multiplier().Nanoseconds()
	if f >= t {
		return f / t, 1
	}
	return 1, t / f
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// checkNotNull rejects nulls in a non-nullable column or nested struct field. parentValid,
// when not nil, marks rows whose enclosing structs are all non-null.
func checkNotNull(arr arrow.Array, column string, nullable bool, dt DataType, parentValid []bool) error {
	nulls := 0
	if !nullable && arr.NullN() > 0 {
		for i := 0; i < arr.Len(); i++ {
			if arr.IsNull(i) && (parentValid == nil || parentValid[i]) {
				nulls++
			}
		}
		if nulls > 0 {
			return fmt.Errorf("column %s is not nullable but the written data has %d null values", column, nulls)
		}
	}
	st, ok := dt.(*StructType)
	if !ok {
		return nil
	}
	sa := arr.(*array.Struct)
	valid := parentValid
	if sa.NullN() > 0 {
		valid = make([]bool, sa.Len())
		for i := range valid {
			valid[i] = sa.IsValid(i) && (parentValid == nil || parentValid[i])
		}
	}
	for i, f := range st.Fields {
		if err := checkNotNull(sa.Field(i), column+"."+f.Name, f.Nullable, f.Type, valid); err != nil {
			return err
		}
	}
	return nil
}
