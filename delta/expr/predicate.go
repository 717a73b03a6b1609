package expr

import (
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"

	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Predicate is a simple row condition: comparisons of a column with literals combined
// with AND and OR. Scans use it to skip files (by partition values and min/max/nullCount
// stats) and then apply it to every row, so results are exact. Build one with Eq, Ne, Lt,
// Le, Gt, Ge, In, IsNull, IsNotNull, And and Or, or parse one with Parse.
type Predicate interface {
	// String renders the predicate in the SQL subset Parse reads.
	String() string
	isPredicate()
}

// Op is a comparison operator.
type Op string

// Comparison operators.
const (
	OpEq Op = "="
	OpNe Op = "!="
	OpLt Op = "<"
	OpLe Op = "<="
	OpGt Op = ">"
	OpGe Op = ">="
)

// Comparison is `column op literal`. Column may name a nested struct field with dots
// ("address.city"). Value is a Go literal: a string, bool, any integer or float type,
// *big.Rat, or time.Time; strings are also parsed as the column's type ("2024-01-31" for
// a date, "12.50" for a decimal).
type Comparison struct {
	Column string
	Op     Op
	Value  any
}

// InList is `column IN (values...)`.
type InList struct {
	Column string
	Values []any
}

// NullCheck is `column IS NULL` or, with Not, `column IS NOT NULL`.
type NullCheck struct {
	Column string
	Not    bool
}

// AndPredicate is true when every term is true.
type AndPredicate struct{ Terms []Predicate }

// OrPredicate is true when any term is true.
type OrPredicate struct{ Terms []Predicate }

func (*Comparison) isPredicate()   {}
func (*InList) isPredicate()       {}
func (*NullCheck) isPredicate()    {}
func (*AndPredicate) isPredicate() {}
func (*OrPredicate) isPredicate()  {}

// Eq is column = v.
func Eq(column string, v any) Predicate { return &Comparison{column, OpEq, v} }

// Ne is column != v.
func Ne(column string, v any) Predicate { return &Comparison{column, OpNe, v} }

// Lt is column < v.
func Lt(column string, v any) Predicate { return &Comparison{column, OpLt, v} }

// Le is column <= v.
func Le(column string, v any) Predicate { return &Comparison{column, OpLe, v} }

// Gt is column > v.
func Gt(column string, v any) Predicate { return &Comparison{column, OpGt, v} }

// Ge is column >= v.
func Ge(column string, v any) Predicate { return &Comparison{column, OpGe, v} }

// In is column IN (vs...).
func In(column string, vs ...any) Predicate { return &InList{column, vs} }

// IsNull is column IS NULL.
func IsNull(column string) Predicate { return &NullCheck{Column: column} }

// IsNotNull is column IS NOT NULL.
func IsNotNull(column string) Predicate { return &NullCheck{Column: column, Not: true} }

// And is the conjunction of ps.
func And(ps ...Predicate) Predicate { return &AndPredicate{ps} }

// Or is the disjunction of ps.
func Or(ps ...Predicate) Predicate { return &OrPredicate{ps} }

func (c *Comparison) String() string {
	return quoteIdent(c.Column) + " " + string(c.Op) + " " + literalSQL(c.Value)
}

func (p *InList) String() string {
	parts := make([]string, len(p.Values))
	for i, v := range p.Values {
		parts[i] = literalSQL(v)
	}
	return quoteIdent(p.Column) + " IN (" + strings.Join(parts, ", ") + ")"
}

func (p *NullCheck) String() string {
	if p.Not {
		return quoteIdent(p.Column) + " IS NOT NULL"
	}
	return quoteIdent(p.Column) + " IS NULL"
}

func (p *AndPredicate) String() string { return joinTerms(p.Terms, " AND ") }
func (p *OrPredicate) String() string  { return joinTerms(p.Terms, " OR ") }

func joinTerms(ts []Predicate, sep string) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
		switch t.(type) {
		case *AndPredicate, *OrPredicate:
			parts[i] = "(" + parts[i] + ")"
		}
	}
	return strings.Join(parts, sep)
}

// quoteIdent writes a column name as Parse reads it back: bare when it lexes as
// one identifier (a letter or _ first, then letters, digits, _ and .) and is no keyword,
// else in backquotes.
func quoteIdent(s string) string {
	plain := s != "" && !predicateKeywords[strings.ToUpper(s)]
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && (r == '.' || r >= '0' && r <= '9')) {
			plain = false
		}
	}
	if plain {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// predicateKeywords are the words Parse gives a meaning.
var predicateKeywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IS": true, "NULL": true, "IN": true, "BETWEEN": true,
	"TRUE": true, "FALSE": true, "DATE": true, "TIMESTAMP": true, "TIMESTAMP_NTZ": true,
}

func literalSQL(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'"
	case time.Time:
		return "'" + x.UTC().Format(time.RFC3339Nano) + "'"
	case *big.Rat:
		return ratSQL(x)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// ratSQL writes a rational as a decimal number Parse reads back: exactly when
// its denominator is a product of 2s and 5s (every number Parse makes), else
// rounded to 30 decimal places.
func ratSQL(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	d := new(big.Int).Set(r.Denom())
	places := 0
	for _, f := range []int64{2, 5} {
		n, m := 0, new(big.Int)
		for q := big.NewInt(f); ; n++ {
			if m.Mod(d, q); m.Sign() != 0 {
				break
			}
			d.Quo(d, q)
		}
		places = max(places, n)
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		places = 30
	}
	return r.FloatString(places)
}

// literalValue converts a predicate literal to a value of the column's type.
func literalValue(dt dschema.DataType, v any) (Value, error) {
	switch x := v.(type) {
	case nil:
		return Value{}, fmt.Errorf("NULL literal: use IS NULL")
	case string:
		return parseTyped(dt, x, true)
	case time.Time:
		switch t := dt.(type) {
		case *dschema.PrimitiveType:
			switch t.Name {
			case dschema.TypeDate:
				y, m, d := x.Date()
				return Value{kind: vInt, i: time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400}, nil
			case dschema.TypeTimestamp:
				return Value{kind: vInt, i: x.UnixMicro()}, nil
			case dschema.TypeTimestampNTZ:
				y, mo, d := x.Date()
				h, mi, s := x.Clock()
				return Value{kind: vInt, i: time.Date(y, mo, d, h, mi, s, x.Nanosecond(), time.UTC).UnixMicro()}, nil
			}
		}
	case bool:
		if p, ok := dt.(*dschema.PrimitiveType); ok && p.Name == dschema.TypeBoolean {
			return Value{kind: vBool, b: x}, nil
		}
	case *big.Rat:
		return numericLiteral(dt, Value{kind: vDecimal, r: x})
	case float64:
		return numericLiteral(dt, Value{kind: vFloat, f: x})
	case float32:
		return numericLiteral(dt, Value{kind: vFloat, f: float64(x)})
	case int:
		return numericLiteral(dt, Value{kind: vInt, i: int64(x)})
	case int64:
		return numericLiteral(dt, Value{kind: vInt, i: x})
	case int32:
		return numericLiteral(dt, Value{kind: vInt, i: int64(x)})
	case int16:
		return numericLiteral(dt, Value{kind: vInt, i: int64(x)})
	case int8:
		return numericLiteral(dt, Value{kind: vInt, i: int64(x)})
	case uint32:
		return numericLiteral(dt, Value{kind: vInt, i: int64(x)})
	}
	return Value{}, fmt.Errorf("literal %v (%T) does not fit type %s", v, v, dt)
}

func numericLiteral(dt dschema.DataType, v Value) (Value, error) {
	switch t := dt.(type) {
	case *dschema.DecimalType:
		return Value{kind: vDecimal, r: v.rat()}, nil
	case *dschema.PrimitiveType:
		switch t.Name {
		case dschema.TypeFloat, dschema.TypeDouble:
			return Value{kind: vFloat, f: v.num()}, nil
		case dschema.TypeLong, dschema.TypeInteger, dschema.TypeShort, dschema.TypeByte:
			if v.kind == vDecimal && v.r.IsInt() && v.r.Num().IsInt64() {
				return Value{kind: vInt, i: v.r.Num().Int64()}, nil
			}
			return v, nil
		}
	}
	return Value{}, fmt.Errorf("numeric literal %s does not fit type %s", v.rat().RatString(), dt)
}

// Rename rebuilds a predicate with every column name mapped by f.
func Rename(p Predicate, f func(string) string) Predicate {
	switch x := p.(type) {
	case *Comparison:
		return &Comparison{Column: f(x.Column), Op: x.Op, Value: x.Value}
	case *InList:
		return &InList{Column: f(x.Column), Values: x.Values}
	case *NullCheck:
		return &NullCheck{Column: f(x.Column), Not: x.Not}
	case *AndPredicate:
		ts := make([]Predicate, len(x.Terms))
		for i, t := range x.Terms {
			ts[i] = Rename(t, f)
		}
		return &AndPredicate{ts}
	case *OrPredicate:
		ts := make([]Predicate, len(x.Terms))
		for i, t := range x.Terms {
			ts[i] = Rename(t, f)
		}
		return &OrPredicate{ts}
	}
	return p
}
