package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// DataType is a Delta (Spark) data type: a *PrimitiveType, *DecimalType, *StructType,
// *ArrayType or *MapType.
type DataType interface {
	// String renders the type as Spark SQL would name it, e.g. "long", "decimal(10,2)",
	// "array<string>", "struct<a:int>".
	String() string
	isDataType()
}

// Primitive type names as they appear in schemaString.
const (
	TypeString       = "string"
	TypeLong         = "long"
	TypeInteger      = "integer"
	TypeShort        = "short"
	TypeByte         = "byte"
	TypeFloat        = "float"
	TypeDouble       = "double"
	TypeBoolean      = "boolean"
	TypeBinary       = "binary"
	TypeDate         = "date"
	TypeTimestamp    = "timestamp"
	TypeTimestampNTZ = "timestamp_ntz"
	// TypeVariant is semi-structured data (variantType feature): read, never written.
	TypeVariant = "variant"
	// TypeVoid is Spark's NullType: a column that is always null. Spark keeps it in the
	// schema and leaves it out of the data files; so do readers and writers here.
	TypeVoid = "void"
)

var primitiveNames = map[string]bool{
	TypeString: true, TypeLong: true, TypeInteger: true, TypeShort: true, TypeByte: true,
	TypeFloat: true, TypeDouble: true, TypeBoolean: true, TypeBinary: true, TypeDate: true,
	TypeTimestamp: true, TypeTimestampNTZ: true, TypeVariant: true, TypeVoid: true,
}

// PrimitiveType is one of the Type* names.
type PrimitiveType struct{ Name string }

func (t *PrimitiveType) String() string { return t.Name }
func (*PrimitiveType) isDataType()      {}

// DecimalType is decimal(precision, scale), precision 1..38.
type DecimalType struct{ Precision, Scale int }

func (t *DecimalType) String() string { return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale) }
func (*DecimalType) isDataType()      {}

// StructField is one named field of a struct. Metadata holds field metadata such as
// delta.identity.* (JSON numbers decode as json.Number) and column mapping ids.
type StructField struct {
	Name     string
	Type     DataType
	Nullable bool
	Metadata map[string]any
}

// collationsKey is the field metadata key under which Delta's collations feature (a
// writer feature) records a string field's collation: {"<name>": "spark.UTF8_LCASE"}, with
// paths such as "<name>.element" for strings inside arrays and maps.
const collationsKey = "__COLLATIONS"

// Collation returns the collation of a string field when it is not the default byte
// order (UTF8_BINARY), as its metadata names it ("spark.UTF8_LCASE", "icu.en_US"), else
// "". Values of such a field compare equal or ordered by the collation in Spark (with
// UTF8_LCASE, 'ABC' = 'abc'), not by their bytes.
func (f *StructField) Collation() string {
	m, ok := f.Metadata[collationsKey].(map[string]any)
	if !ok {
		return ""
	}
	c, _ := m[f.Name].(string)
	if _, name, ok := strings.Cut(c, "."); ok && strings.EqualFold(name, "UTF8_BINARY") || strings.EqualFold(c, "UTF8_BINARY") {
		return ""
	}
	return c
}

// StructType is an ordered list of fields; a table schema is a StructType.
type StructType struct{ Fields []*StructField }

func (t *StructType) String() string {
	parts := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		parts[i] = f.Name + ":" + f.Type.String()
	}
	return "struct<" + strings.Join(parts, ",") + ">"
}
func (*StructType) isDataType() {}

// Field returns the field whose name equals name ignoring case (Delta names are
// case-insensitive), or nil.
func (t *StructType) Field(name string) *StructField {
	for _, f := range t.Fields {
		if strings.EqualFold(f.Name, name) {
			return f
		}
	}
	return nil
}

// FieldIndex is like Field but returns the index, or -1.
func (t *StructType) FieldIndex(name string) int {
	for i, f := range t.Fields {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}

// ArrayType is array<element>.
type ArrayType struct {
	ElementType  DataType
	ContainsNull bool
}

func (t *ArrayType) String() string { return "array<" + t.ElementType.String() + ">" }
func (*ArrayType) isDataType()      {}

// MapType is map<key,value>.
type MapType struct {
	KeyType           DataType
	ValueType         DataType
	ValueContainsNull bool
}

func (t *MapType) String() string {
	return "map<" + t.KeyType.String() + "," + t.ValueType.String() + ">"
}
func (*MapType) isDataType() {}

var decimalRE = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)

// ParsePrimitive parses a primitive or decimal type name ("long", "decimal(10,2)"); the
// aliases "int", "bigint", "smallint", "tinyint", "bool" and bare "decimal" (10,0) are
// accepted as Spark SQL accepts them.
func ParsePrimitive(name string) (DataType, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "int":
		n = TypeInteger
	case "bigint":
		n = TypeLong
	case "smallint":
		n = TypeShort
	case "tinyint":
		n = TypeByte
	case "bool":
		n = TypeBoolean
	case "decimal":
		return &DecimalType{Precision: 10, Scale: 0}, nil
	}
	if primitiveNames[n] {
		return &PrimitiveType{Name: n}, nil
	}
	if m := decimalRE.FindStringSubmatch(n); m != nil {
		p, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		if p < 1 || p > 38 || s > p {
			return nil, fmt.Errorf("decimal(%d,%d): precision must be 1..38 and scale 0..precision", p, s)
		}
		return &DecimalType{Precision: p, Scale: s}, nil
	}
	return nil, fmt.Errorf("unknown data type %q", name)
}

// Parse parses a schemaString.
func Parse(s string) (*StructType, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	t, err := dataTypeFromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	st, ok := t.(*StructType)
	if !ok {
		return nil, fmt.Errorf("parse schema: top-level type is %s, want struct", t)
	}
	return st, nil
}

func dataTypeFromJSON(raw any) (DataType, error) {
	switch v := raw.(type) {
	case string:
		return ParsePrimitive(v)
	case map[string]any:
		kind, _ := v["type"].(string)
		switch kind {
		case "struct":
			fields, _ := v["fields"].([]any)
			st := &StructType{Fields: make([]*StructField, 0, len(fields))}
			seen := map[string]bool{}
			for i, fr := range fields {
				fm, ok := fr.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("field %d: not an object", i)
				}
				name, _ := fm["name"].(string)
				if name == "" {
					return nil, fmt.Errorf("field %d: missing name", i)
				}
				if seen[strings.ToLower(name)] {
					return nil, fmt.Errorf("duplicate field name %q (names are case-insensitive)", name)
				}
				seen[strings.ToLower(name)] = true
				ft, err := dataTypeFromJSON(fm["type"])
				if err != nil {
					return nil, fmt.Errorf("field %q: %w", name, err)
				}
				nullable, _ := fm["nullable"].(bool)
				md, _ := fm["metadata"].(map[string]any)
				if md == nil {
					md = map[string]any{}
				}
				st.Fields = append(st.Fields, &StructField{Name: name, Type: ft, Nullable: nullable, Metadata: md})
			}
			return st, nil
		case "array":
			et, err := dataTypeFromJSON(v["elementType"])
			if err != nil {
				return nil, fmt.Errorf("array element: %w", err)
			}
			cn, _ := v["containsNull"].(bool)
			return &ArrayType{ElementType: et, ContainsNull: cn}, nil
		case "map":
			kt, err := dataTypeFromJSON(v["keyType"])
			if err != nil {
				return nil, fmt.Errorf("map key: %w", err)
			}
			vt, err := dataTypeFromJSON(v["valueType"])
			if err != nil {
				return nil, fmt.Errorf("map value: %w", err)
			}
			vcn, _ := v["valueContainsNull"].(bool)
			return &MapType{KeyType: kt, ValueType: vt, ValueContainsNull: vcn}, nil
		default:
			return nil, fmt.Errorf("unknown complex type %q", kind)
		}
	default:
		return nil, fmt.Errorf("unexpected type value %v", raw)
	}
}

// MarshalJSON renders the struct in schemaString form (key order as Spark writes it).
func (t *StructType) MarshalJSON() ([]byte, error) { return marshalType(t) }

// SchemaString renders the schema as the text stored in metaData.schemaString.
func (t *StructType) SchemaString() (string, error) {
	b, err := marshalType(t)
	return string(b), err
}

func marshalType(t DataType) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeType(&buf, t); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeType(buf *bytes.Buffer, t DataType) error {
	writeJSON := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf.Write(b)
		return nil
	}
	switch v := t.(type) {
	case *PrimitiveType, *DecimalType:
		return writeJSON(v.String())
	case *StructType:
		buf.WriteString(`{"type":"struct","fields":[`)
		for i, f := range v.Fields {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(`{"name":`)
			if err := writeJSON(f.Name); err != nil {
				return err
			}
			buf.WriteString(`,"type":`)
			if err := writeType(buf, f.Type); err != nil {
				return err
			}
			buf.WriteString(`,"nullable":`)
			buf.WriteString(strconv.FormatBool(f.Nullable))
			buf.WriteString(`,"metadata":`)
			md := f.Metadata
			if md == nil {
				md = map[string]any{}
			}
			if err := writeJSON(md); err != nil {
				return err
			}
			buf.WriteByte('}')
		}
		buf.WriteString(`]}`)
	case *ArrayType:
		buf.WriteString(`{"type":"array","elementType":`)
		if err := writeType(buf, v.ElementType); err != nil {
			return err
		}
		buf.WriteString(`,"containsNull":` + strconv.FormatBool(v.ContainsNull) + `}`)
	case *MapType:
		buf.WriteString(`{"type":"map","keyType":`)
		if err := writeType(buf, v.KeyType); err != nil {
			return err
		}
		buf.WriteString(`,"valueType":`)
		if err := writeType(buf, v.ValueType); err != nil {
			return err
		}
		buf.WriteString(`,"valueContainsNull":` + strconv.FormatBool(v.ValueContainsNull) + `}`)
	default:
		return fmt.Errorf("unknown data type %T", t)
	}
	return nil
}
