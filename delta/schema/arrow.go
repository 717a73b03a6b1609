package schema

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// Arrow types used for Delta primitives. Timestamps are microseconds, as Delta stores them;
// "timestamp" is an instant (zone UTC), "timestamp_ntz" a wall-clock time (no zone).
var (
	TimestampUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	TimestampNTZ = &arrow.TimestampType{Unit: arrow.Microsecond}
)

// ArrowSchema maps a Delta table schema to the Arrow schema of the records that the scan
// returns and the writer accepts:
//
//	string→utf8, long→int64, integer→int32, short→int16, byte→int8, double→float64,
//	float→float32, boolean→bool, binary→binary, date→date32,
//	timestamp→timestamp[us, UTC], timestamp_ntz→timestamp[us], decimal(p,s)→decimal128(p,s),
//	struct→struct, array→list (element field "element"), map→map (fields "key"/"value"),
//	variant→Arrow's variant extension type (arrow.parquet.variant; read only).
//
// Field nullability, containsNull and valueContainsNull carry over.
func ArrowSchema(st *StructType) (*arrow.Schema, error) {
	fields, err := ArrowFields(st)
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func ArrowFields(st *StructType) ([]arrow.Field, error) {
	fields := make([]arrow.Field, len(st.Fields))
	for i, f := range st.Fields {
		t, err := ArrowType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		fields[i] = arrow.Field{Name: f.Name, Type: t, Nullable: f.Nullable}
	}
	return fields, nil
}

// ArrowType maps one Delta data type to its Arrow type (see ArrowSchema).
func ArrowType(t DataType) (arrow.DataType, error) {
	switch v := t.(type) {
	case *PrimitiveType:
		switch v.Name {
		case TypeString:
			return arrow.BinaryTypes.String, nil
		case TypeLong:
			return arrow.PrimitiveTypes.Int64, nil
		case TypeInteger:
			return arrow.PrimitiveTypes.Int32, nil
		case TypeShort:
			return arrow.PrimitiveTypes.Int16, nil
		case TypeByte:
			return arrow.PrimitiveTypes.Int8, nil
		case TypeDouble:
			return arrow.PrimitiveTypes.Float64, nil
		case TypeFloat:
			return arrow.PrimitiveTypes.Float32, nil
		case TypeBoolean:
			return arrow.FixedWidthTypes.Boolean, nil
		case TypeBinary:
			return arrow.BinaryTypes.Binary, nil
		case TypeDate:
			return arrow.FixedWidthTypes.Date32, nil
		case TypeTimestamp:
			return TimestampUTC, nil
		case TypeTimestampNTZ:
			return TimestampNTZ, nil
		case TypeVoid:
			return arrow.Null, nil
		case TypeVariant:
			// Arrow's variant extension type (arrow.parquet.variant) over the
			// unshredded struct<metadata: binary, value: binary>.
			return extensions.NewDefaultVariantType(), nil
		}
		return nil, fmt.Errorf("unsupported data type %q", v.Name)
	case *DecimalType:
		if v.Precision < 1 || v.Precision > 38 {
			return nil, fmt.Errorf("unsupported data type %s", v)
		}
		return &arrow.Decimal128Type{Precision: int32(v.Precision), Scale: int32(v.Scale)}, nil
	case *StructType:
		fields, err := ArrowFields(v)
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fields...), nil
	case *ArrayType:
		et, err := ArrowType(v.ElementType)
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: et, Nullable: v.ContainsNull}), nil
	case *MapType:
		kt, err := ArrowType(v.KeyType)
		if err != nil {
			return nil, err
		}
		vt, err := ArrowType(v.ValueType)
		if err != nil {
			return nil, err
		}
		mt := arrow.MapOf(kt, vt)
		mt.SetItemNullable(v.ValueContainsNull)
		return mt, nil
	case nil:
		return nil, fmt.Errorf("missing data type")
	}
	return nil, fmt.Errorf("unsupported data type %T", t)
}

// FromArrow maps an Arrow schema back to a Delta schema (the inverse of ArrowSchema).
// Besides the types ArrowSchema produces it accepts the common Arrow equivalents: large and
// view strings/binaries, timestamps of any unit (a zone makes it "timestamp", none
// "timestamp_ntz"), large and fixed-size lists, and dictionary-encoded values.
func FromArrow(s *arrow.Schema) (*StructType, error) {
	st := &StructType{Fields: make([]*StructField, 0, s.NumFields())}
	seen := map[string]bool{}
	for _, f := range s.Fields() {
		low := strings.ToLower(f.Name)
		if seen[low] {
			return nil, fmt.Errorf("duplicate column name %q (names are case-insensitive)", f.Name)
		}
		seen[low] = true
		t, err := DataTypeFromArrow(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		st.Fields = append(st.Fields, &StructField{Name: f.Name, Type: t, Nullable: f.Nullable, Metadata: map[string]any{}})
	}
	return st, nil
}

// DataTypeFromArrow maps one Arrow type to a Delta data type (see FromArrow).
func DataTypeFromArrow(t arrow.DataType) (DataType, error) {
	prim := func(n string) (DataType, error) { return &PrimitiveType{Name: n}, nil }
	switch v := t.(type) {
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return prim(TypeString)
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return prim(TypeBinary)
	case *arrow.Int64Type:
		return prim(TypeLong)
	case *arrow.Int32Type:
		return prim(TypeInteger)
	case *arrow.Int16Type:
		return prim(TypeShort)
	case *arrow.Int8Type:
		return prim(TypeByte)
	case *arrow.Float64Type:
		return prim(TypeDouble)
	case *arrow.Float32Type:
		return prim(TypeFloat)
	case *arrow.BooleanType:
		return prim(TypeBoolean)
	case *arrow.NullType:
		return prim(TypeVoid)
	case *arrow.Date32Type, *arrow.Date64Type:
		return prim(TypeDate)
	case *arrow.TimestampType:
		if v.TimeZone == "" {
			return prim(TypeTimestampNTZ)
		}
		return prim(TypeTimestamp)
	case *arrow.Decimal128Type:
		return &DecimalType{Precision: int(v.Precision), Scale: int(v.Scale)}, nil
	case *arrow.Decimal256Type:
		if v.Precision > 38 {
			return nil, fmt.Errorf("decimal precision %d exceeds 38", v.Precision)
		}
		return &DecimalType{Precision: int(v.Precision), Scale: int(v.Scale)}, nil
	case *arrow.DictionaryType:
		return DataTypeFromArrow(v.ValueType)
	case *extensions.VariantType:
		return prim(TypeVariant)
	case *arrow.StructType:
		inner, err := FromArrow(arrow.NewSchema(v.Fields(), nil))
		if err != nil {
			return nil, err
		}
		return inner, nil
	case *arrow.MapType:
		kt, err := DataTypeFromArrow(v.KeyType())
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		vt, err := DataTypeFromArrow(v.ItemType())
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return &MapType{KeyType: kt, ValueType: vt, ValueContainsNull: v.ItemField().Nullable}, nil
	case arrow.ListLikeType:
		ef := v.ElemField()
		et, err := DataTypeFromArrow(ef.Type)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return &ArrayType{ElementType: et, ContainsNull: ef.Nullable}, nil
	}
	return nil, fmt.Errorf("arrow type %s has no Delta equivalent", t)
}

// Merge implements opt-in schema evolution: it returns the table schema with every
// column of incoming that the table lacks appended, as nullable, in incoming's order
// (nested struct fields are merged the same way). Columns present in both must have the
// same type. The table schema is not modified. The caller commits the result as new
// metaData; changed reports whether anything was added.
func Merge(table *StructType, incoming *arrow.Schema) (merged *StructType, changed bool, err error) {
	in, err := FromArrow(incoming)
	if err != nil {
		return nil, false, err
	}
	return mergeStruct(table, in, "")
}

func mergeStruct(table, in *StructType, prefix string) (*StructType, bool, error) {
	out := &StructType{Fields: make([]*StructField, 0, len(table.Fields))}
	changed := false
	for _, f := range table.Fields {
		nf := *f
		if g := in.Field(f.Name); g != nil {
			ts, tok := f.Type.(*StructType)
			is, iok := g.Type.(*StructType)
			switch {
			case tok && iok:
				m, c, err := mergeStruct(ts, is, prefix+f.Name+".")
				if err != nil {
					return nil, false, err
				}
				nf.Type, changed = m, changed || c
			case !sameType(f.Type, g.Type):
				return nil, false, fmt.Errorf("column %s%s: table type %s, incoming type %s", prefix, f.Name, f.Type, g.Type)
			}
		}
		out.Fields = append(out.Fields, &nf)
	}
	for _, g := range in.Fields {
		if table.Field(g.Name) != nil {
			continue
		}
		nf := *g
		nf.Nullable = true
		out.Fields = append(out.Fields, &nf)
		changed = true
	}
	return out, changed, nil
}

// sameType reports whether two Delta types are equal, ignoring nullability flags.
func sameType(a, b DataType) bool {
	return a.String() == b.String()
}
