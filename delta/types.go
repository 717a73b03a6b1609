package delta

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta/schema"
)

// The type system lives in package delta/schema; these names are delta's own for its
// callers, which use schemas and tables together.

type (
	DataType      = schema.DataType
	PrimitiveType = schema.PrimitiveType
	DecimalType   = schema.DecimalType
	StructField   = schema.StructField
	StructType    = schema.StructType
	ArrayType     = schema.ArrayType
	MapType       = schema.MapType
)

// Primitive type names as they appear in schemaString.
const (
	TypeString       = schema.TypeString
	TypeLong         = schema.TypeLong
	TypeInteger      = schema.TypeInteger
	TypeShort        = schema.TypeShort
	TypeByte         = schema.TypeByte
	TypeFloat        = schema.TypeFloat
	TypeDouble       = schema.TypeDouble
	TypeBoolean      = schema.TypeBoolean
	TypeBinary       = schema.TypeBinary
	TypeDate         = schema.TypeDate
	TypeTimestamp    = schema.TypeTimestamp
	TypeTimestampNTZ = schema.TypeTimestampNTZ
	TypeVariant      = schema.TypeVariant
	TypeVoid         = schema.TypeVoid
)

// ParsePrimitive is schema.ParsePrimitive.
func ParsePrimitive(name string) (DataType, error) { return schema.ParsePrimitive(name) }

// ParseSchema is schema.Parse.
func ParseSchema(s string) (*StructType, error) { return schema.Parse(s) }

// ArrowSchema is schema.ArrowSchema.
func ArrowSchema(st *StructType) (*arrow.Schema, error) { return schema.ArrowSchema(st) }

// ArrowType is schema.ArrowType.
func ArrowType(t DataType) (arrow.DataType, error) { return schema.ArrowType(t) }

// SchemaFromArrow is schema.FromArrow.
func SchemaFromArrow(s *arrow.Schema) (*StructType, error) { return schema.FromArrow(s) }

// DataTypeFromArrow is schema.DataTypeFromArrow.
func DataTypeFromArrow(t arrow.DataType) (DataType, error) { return schema.DataTypeFromArrow(t) }

// MergeSchema is schema.Merge.
func MergeSchema(table *StructType, incoming *arrow.Schema) (*StructType, bool, error) {
	return schema.Merge(table, incoming)
}
