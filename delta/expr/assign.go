package expr

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// ColumnRef names a column as the value of an assignment (UPDATE SET x = y, MERGE UPDATE
// SET x = source.y). Make one with Col.
type ColumnRef struct{ Name string }

// Col refers to a column in an assignment. In UPDATE it names a table column; in MERGE
// it is "source.<col>" or "target.<col>".
func Col(name string) ColumnRef { return ColumnRef{Name: name} }

// ExprFunc computes the new values of a column for the rows being updated. rows holds
// those rows: in UPDATE the table's columns, in MERGE the columns "source.<col>" and
// "target.<col>" of each matched pair. It returns one value per row (any Arrow type the
// column accepts: integer widths and timestamp units are converted); the caller
// releases it.
type ExprFunc func(rows arrow.RecordBatch) (arrow.Array, error)

// Assign builds the new values of field f (Arrow type at) for the n rows of view
// from an assignment value: a ColumnRef, an ExprFunc, or a literal (nil for null; the
// literal forms Predicate accepts: Go numbers, strings, bools, time.Time, *big.Rat).
func Assign(mem memory.Allocator, view arrow.RecordBatch, f *dschema.StructField, at arrow.DataType, v any) (arrow.Array, error) {
	n := int(view.NumRows())
	var arr arrow.Array
	switch x := v.(type) {
	case ColumnRef:
		c, _, err := resolveColumn(view, []string{x.Name})
		if err != nil {
			return nil, fmt.Errorf("set %s = %s: no such column", f.Name, x.Name)
		}
		c.Retain()
		arr = c
	case ExprFunc:
		c, err := x(view)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", f.Name, err)
		}
		if c.Len() != n {
			c.Release()
			return nil, fmt.Errorf("set %s: expression returned %d values for %d rows", f.Name, c.Len(), n)
		}
		arr = c
	case func(arrow.RecordBatch) (arrow.Array, error):
		return Assign(mem, view, f, at, ExprFunc(x))
	case nil:
		if !f.Nullable {
			return nil, fmt.Errorf("set %s = NULL: the column is not nullable", f.Name)
		}
		return array.MakeArrayOfNull(mem, at, n), nil
	default:
		val, err := literalValue(f.Type, v)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", f.Name, err)
		}
		b := array.NewBuilder(mem, at)
		defer b.Release()
		b.Reserve(n)
		for i := 0; i < n; i++ {
			if err := AppendValue(b, val); err != nil {
				return nil, fmt.Errorf("set %s: %w", f.Name, err)
			}
		}
		return b.NewArray(), nil
	}
	defer arr.Release()
	out, err := dschema.ConformArray(mem, arr, at, f.Name, f.Type)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", f.Name, err)
	}
	if !f.Nullable && out.NullN() > 0 {
		out.Release()
		return nil, fmt.Errorf("set %s: null value in a non-nullable column", f.Name)
	}
	return out, nil
}

// AssignmentString renders an assignment for operationParameters.
func AssignmentString(v any) string {
	switch x := v.(type) {
	case ColumnRef:
		return x.Name
	case ExprFunc, func(arrow.RecordBatch) (arrow.Array, error):
		return "<expression>"
	}
	return literalSQL(v)
}

// CheckSet resolves the columns of a SET map against the table schema.
func CheckSet(set map[string]any, schema *dschema.StructType) (map[string]any, error) {
	out := make(map[string]any, len(set))
	for k, v := range set {
		f := schema.Field(k)
		if f == nil {
			return nil, fmt.Errorf("set %s: no such column in the table", k)
		}
		if _, dup := out[strings.ToLower(f.Name)]; dup {
			return nil, fmt.Errorf("set %s: column assigned twice", k)
		}
		out[strings.ToLower(f.Name)] = v
	}
	return out, nil
}
