package decode

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
)

// arrowSchema maps the declared schema to Arrow exactly as delta.ArrowSchema does
// (timestamp → timestamp[us, UTC], timestamp_ntz → timestamp[us], date → date32,
// decimal(p,s) → decimal128(p,s), long/integer/short/byte → int64/32/16/8).
// TODO: call delta.ArrowSchema once delta/arrow_schema.go is committed.
func arrowSchema(st *delta.StructType) (*arrow.Schema, error) {
	fields, err := arrowFields(st)
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func arrowFields(st *delta.StructType) ([]arrow.Field, error) {
	fields := make([]arrow.Field, len(st.Fields))
	seen := map[string]bool{}
	for i, f := range st.Fields {
		k := strings.ToLower(f.Name)
		if seen[k] {
			return nil, fmt.Errorf("schema: duplicate column %s (names are case-insensitive)", f.Name)
		}
		seen[k] = true
		t, err := arrowType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		fields[i] = arrow.Field{Name: f.Name, Type: t, Nullable: f.Nullable}
	}
	return fields, nil
}

func arrowType(t delta.DataType) (arrow.DataType, error) {
	switch v := t.(type) {
	case *delta.PrimitiveType:
		switch v.Name {
		case delta.TypeString:
			return arrow.BinaryTypes.String, nil
		case delta.TypeBinary:
			return arrow.BinaryTypes.Binary, nil
		case delta.TypeLong:
			return arrow.PrimitiveTypes.Int64, nil
		case delta.TypeInteger:
			return arrow.PrimitiveTypes.Int32, nil
		case delta.TypeShort:
			return arrow.PrimitiveTypes.Int16, nil
		case delta.TypeByte:
			return arrow.PrimitiveTypes.Int8, nil
		case delta.TypeDouble:
			return arrow.PrimitiveTypes.Float64, nil
		case delta.TypeFloat:
			return arrow.PrimitiveTypes.Float32, nil
		case delta.TypeBoolean:
			return arrow.FixedWidthTypes.Boolean, nil
		case delta.TypeDate:
			return arrow.FixedWidthTypes.Date32, nil
		case delta.TypeTimestamp:
			return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
		case delta.TypeTimestampNTZ:
			return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
		}
		return nil, fmt.Errorf("unsupported data type %q", v.Name)
	case *delta.DecimalType:
		if v.Precision < 1 || v.Precision > 38 || v.Scale < 0 || v.Scale > v.Precision {
			return nil, fmt.Errorf("unsupported data type %s", v)
		}
		return &arrow.Decimal128Type{Precision: int32(v.Precision), Scale: int32(v.Scale)}, nil
	case *delta.StructType:
		fields, err := arrowFields(v)
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fields...), nil
	case *delta.ArrayType:
		et, err := arrowType(v.ElementType)
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: et, Nullable: v.ContainsNull}), nil
	case *delta.MapType:
		kt, err := arrowType(v.KeyType)
		if err != nil {
			return nil, err
		}
		vt, err := arrowType(v.ValueType)
		if err != nil {
			return nil, err
		}
		mt := arrow.MapOf(kt, vt)
		mt.SetItemNullable(v.ValueContainsNull)
		return mt, nil
	}
	return nil, fmt.Errorf("unsupported data type %v", t)
}
