package expr

import (
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"

	"fmt"
	"math/big"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// Bound is a Predicate resolved against a table schema: columns found, literals
// converted to the columns' types.
type Bound struct {
	kind  boundKind
	terms []*Bound
	path  []string // resolved field names, top-level first
	phys  []string // their physical names (column mapping): how stats and partitionValues name them
	// noStats: the column's type was widened from another kind (typeWidening), so older
	// files' statistics do not compare with its values: never skip by them.
	noStats bool
	typ     dschema.DataType // the column's type
	// collation: the column's collation, when not the byte order (filters refuse it).
	collation string
	op        Op
	vals      []Value
	not       bool
	// For IN lists of strings or integers, the values as a set, so that testing a row
	// costs one lookup instead of a pass over the list (a merge filters by thousands of keys).
	inStrings map[string]struct{}
	inInts    map[int64]struct{}
}

// inSetMin is the IN-list length from which a set is built.
const inSetMin = 8

// buildInSet indexes an IN list whose values are all strings or all integers.
func (b *Bound) buildInSet() {
	if len(b.vals) < inSetMin {
		return
	}
	kind := b.vals[0].kind
	for _, v := range b.vals {
		if v.kind != kind {
			return
		}
	}
	switch kind {
	case vString:
		b.inStrings = make(map[string]struct{}, len(b.vals))
		for _, v := range b.vals {
			b.inStrings[v.s] = struct{}{}
		}
	case vInt:
		b.inInts = make(map[int64]struct{}, len(b.vals))
		for _, v := range b.vals {
			b.inInts[v.i] = struct{}{}
		}
	}
}

type boundKind int

const (
	bAnd boundKind = iota
	bOr
	bCmp
	bIn
	bNull
)

// Truth is a truth value of SQL's three-valued logic: a comparison with null is Unknown.
type Truth int8

// The truth values.
const (
	False Truth = iota
	True
	Unknown
)

// FieldInfo says how a table stores a field: its physical name (how the files' statistics
// and partition values name it) and whether the statistics of all its files compare with
// values of its type. A nil FieldInfo means the field's own name, comparable statistics.
type FieldInfo func(f *dschema.StructField) (physical string, statsComparable bool)

// Bind resolves p against a table schema: every column it names must be in schema
// (nested fields with dots) and every literal must fit its column's type.
func Bind(p Predicate, schema *dschema.StructType, info FieldInfo) (*Bound, error) {
	switch x := p.(type) {
	case *AndPredicate, *OrPredicate:
		b := &Bound{kind: bAnd}
		terms := []Predicate(nil)
		if a, ok := x.(*AndPredicate); ok {
			terms = a.Terms
		} else {
			b.kind = bOr
			terms = x.(*OrPredicate).Terms
		}
		if len(terms) == 0 {
			return nil, fmt.Errorf("empty %s", map[boundKind]string{bAnd: "AND", bOr: "OR"}[b.kind])
		}
		for _, t := range terms {
			bt, err := Bind(t, schema, info)
			if err != nil {
				return nil, err
			}
			b.terms = append(b.terms, bt)
		}
		return b, nil
	case *Comparison:
		b, err := bindColumn(x.Column, schema, info)
		if err != nil {
			return nil, err
		}
		switch x.Op {
		case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		default:
			return nil, fmt.Errorf("unknown operator %q", x.Op)
		}
		if err := b.byteOrder(x.Column); err != nil {
			return nil, err
		}
		b.kind, b.op = bCmp, x.Op
		v, err := literalValue(b.typ, x.Value)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", x.Column, err)
		}
		b.vals = []Value{v}
		return b, nil
	case *InList:
		b, err := bindColumn(x.Column, schema, info)
		if err != nil {
			return nil, err
		}
		if err := b.byteOrder(x.Column); err != nil {
			return nil, err
		}
		b.kind = bIn
		for _, lv := range x.Values {
			v, err := literalValue(b.typ, lv)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", x.Column, err)
			}
			b.vals = append(b.vals, v)
		}
		b.buildInSet()
		return b, nil
	case *NullCheck:
		b, err := bindColumn(x.Column, schema, info)
		if err != nil {
			return nil, err
		}
		b.kind, b.not = bNull, x.Not
		return b, nil
	case nil:
		return nil, fmt.Errorf("nil predicate")
	}
	return nil, fmt.Errorf("unknown predicate %T", p)
}

func bindColumn(name string, schema *dschema.StructType, info FieldInfo) (*Bound, error) {
	parts := strings.Split(name, ".")
	if schema.Field(name) != nil {
		parts = []string{name} // a top-level name containing dots
	}
	st := schema
	b := &Bound{}
	for i, p := range parts {
		if st == nil {
			return nil, fmt.Errorf("column %s: %s is not a struct", name, strings.Join(parts[:i], "."))
		}
		f := st.Field(p)
		if f == nil {
			return nil, fmt.Errorf("column %s is not in the table schema", name)
		}
		b.path = append(b.path, f.Name)
		phys, comparable := f.Name, true
		if info != nil {
			phys, comparable = info(f)
		}
		b.phys = append(b.phys, phys)
		b.typ = f.Type
		b.collation = f.Collation()
		b.noStats = !comparable
		st, _ = f.Type.(*dschema.StructType)
	}
	switch b.typ.(type) {
	case *dschema.ArrayType, *dschema.MapType, *dschema.StructType:
		return nil, fmt.Errorf("column %s has type %s, which predicates cannot compare", name, b.typ)
	}
	return b, nil
}

// byteOrder refuses a comparison with a column of a collation other than the byte order:
// Spark compares its values by the collation ('ABC' = 'abc' under UTF8_LCASE), which
// this evaluation (by bytes, as are the statistics that skip files) does not.
func (b *Bound) byteOrder(column string) error {
	if b.collation == "" {
		return nil
	}
	return fmt.Errorf("column %s has collation %s: comparisons with it are not supported (they would compare bytes, where Spark compares by the collation); filter on another column, or test it for NULL", column, b.collation)
}

// Columns lists the top-level columns the predicate reads.
func (b *Bound) Columns() []string {
	var out []string
	seen := map[string]bool{}
	var walk func(*Bound)
	walk = func(p *Bound) {
		if len(p.path) > 0 && !seen[strings.ToLower(p.path[0])] {
			seen[strings.ToLower(p.path[0])] = true
			out = append(out, p.path[0])
		}
		for _, t := range p.terms {
			walk(t)
		}
	}
	walk(b)
	return out
}

// test applies a leaf predicate to one value (null: vNull kind).
func (b *Bound) test(v Value) Truth {
	if b.kind == bNull {
		return boolTri((v.kind == vNull) != b.not)
	}
	if v.kind == vNull {
		return Unknown
	}
	if b.kind == bIn {
		switch {
		case b.inStrings != nil && v.kind == vString:
			_, ok := b.inStrings[v.s]
			return boolTri(ok)
		case b.inInts != nil && v.kind == vInt:
			_, ok := b.inInts[v.i]
			return boolTri(ok)
		}
		for _, w := range b.vals {
			if Compare(v, w) == 0 {
				return True
			}
		}
		return False
	}
	return opTri(b.op, Compare(v, b.vals[0]))
}

func boolTri(b bool) Truth {
	if b {
		return True
	}
	return False
}

// KeptRows evaluates the predicate on every row of rec (whose columns include all the
// predicate's top-level columns, in the table's Arrow types) and returns the indices of
// the rows where it is true, or all=true when every row is.
func (b *Bound) KeptRows(rec arrow.RecordBatch) (rows []int32, all bool, err error) {
	res, err := b.Eval(rec, int(rec.NumRows()))
	if err != nil {
		return nil, false, err
	}
	rows = make([]int32, 0, len(res))
	for i, r := range res {
		if r == True {
			rows = append(rows, int32(i))
		}
	}
	return rows, len(rows) == len(res), nil
}

// Eval evaluates the predicate on the first n rows of rec (whose columns include all the
// predicate's top-level columns, in the table's Arrow types), one truth value per row.
func (b *Bound) Eval(rec arrow.RecordBatch, n int) ([]Truth, error) {
	switch b.kind {
	case bAnd, bOr:
		var acc []Truth
		for _, t := range b.terms {
			r, err := t.Eval(rec, n)
			if err != nil {
				return nil, err
			}
			if acc == nil {
				acc = r
				continue
			}
			for i := range acc {
				acc[i] = combine(b.kind, acc[i], r[i])
			}
		}
		return acc, nil
	}
	arr, valid, err := resolveColumn(rec, b.path)
	if err != nil {
		return nil, err
	}
	if out, ok := b.evalFast(arr, valid); ok {
		return out, nil
	}
	if out, ok := b.evalVector(arr, valid); ok {
		return out, nil
	}
	get, err := ValueGetter(arr)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", strings.Join(b.path, "."), err)
	}
	out := make([]Truth, n)
	for i := range out {
		v := Value{}
		if arr.IsValid(i) && (valid == nil || valid[i]) {
			v = get(i)
		}
		out[i] = b.test(v)
	}
	return out, nil
}

// evalFast evaluates a comparison with one literal directly over the values of the
// common column types (no per-row boxing); ok is false when it does not apply.
func (b *Bound) evalFast(arr arrow.Array, valid []bool) ([]Truth, bool) {
	if b.kind != bCmp || valid != nil {
		return nil, false
	}
	lit := b.vals[0]
	switch a := arr.(type) {
	case *array.Int64:
		if lit.kind == vInt {
			return cmpSlice(arr, a.Int64Values(), lit.i, b.op), true
		}
	case *array.Int32:
		if lit.kind == vInt {
			return cmpSlice(arr, a.Int32Values(), lit.i, b.op), true
		}
	case *array.Date32:
		if lit.kind == vInt {
			return cmpSlice(arr, a.Date32Values(), lit.i, b.op), true
		}
	case *array.Timestamp:
		if lit.kind == vInt {
			return cmpSlice(arr, a.TimestampValues(), lit.i, b.op), true
		}
	case *array.Float64:
		if lit.kind == vFloat && lit.f == lit.f {
			out := make([]Truth, a.Len())
			for i, v := range a.Float64Values() {
				out[i] = opTri(b.op, cmpFloat(v, lit.f))
			}
			nullsToTri(arr, out)
			return out, true
		}
	case *array.String:
		if lit.kind == vString {
			out := make([]Truth, a.Len())
			for i := range out {
				out[i] = opTri(b.op, strings.Compare(a.Value(i), lit.s))
			}
			nullsToTri(arr, out)
			return out, true
		}
	}
	return nil, false
}

func cmpSlice[T ~int32 | ~int64](arr arrow.Array, vals []T, lit int64, op Op) []Truth {
	out := make([]Truth, len(vals))
	for i, v := range vals {
		out[i] = opTri(op, cmp3(int64(v), lit))
	}
	nullsToTri(arr, out)
	return out
}

func nullsToTri(arr arrow.Array, out []Truth) {
	if arr.NullN() == 0 {
		return
	}
	for i := range out {
		if arr.IsNull(i) {
			out[i] = Unknown
		}
	}
}

// opTri turns a three-way comparison into the operator's truth value.
func opTri(op Op, c int) Truth {
	switch op {
	case OpEq:
		return boolTri(c == 0)
	case OpNe:
		return boolTri(c != 0)
	case OpLt:
		return boolTri(c < 0)
	case OpLe:
		return boolTri(c <= 0)
	case OpGt:
		return boolTri(c > 0)
	}
	return boolTri(c >= 0)
}

func combine(k boundKind, a, b Truth) Truth {
	if k == bAnd {
		switch {
		case a == False || b == False:
			return False
		case a == True && b == True:
			return True
		}
		return Unknown
	}
	switch {
	case a == True || b == True:
		return True
	case a == False && b == False:
		return False
	}
	return Unknown
}

// resolveColumn finds the array for a (possibly nested) column path in rec, with the
// validity of its enclosing structs (nil when they have no nulls).
func resolveColumn(rec arrow.RecordBatch, path []string) (arrow.Array, []bool, error) {
	var arr arrow.Array
	for i, f := range rec.Schema().Fields() {
		if strings.EqualFold(f.Name, path[0]) {
			arr = rec.Column(i)
		}
	}
	if arr == nil {
		return nil, nil, fmt.Errorf("column %s missing from the scanned batch", path[0])
	}
	var valid []bool
	for _, p := range path[1:] {
		st := arr.(*array.Struct)
		if st.NullN() > 0 {
			nv := make([]bool, st.Len())
			for i := range nv {
				nv[i] = st.IsValid(i) && (valid == nil || valid[i])
			}
			valid = nv
		}
		idx := -1
		for j, f := range st.DataType().(*arrow.StructType).Fields() {
			if strings.EqualFold(f.Name, p) {
				idx = j
			}
		}
		arr = st.Field(idx)
	}
	return arr, valid, nil
}

// ValueGetter reads the row values of an array.
func ValueGetter(arr arrow.Array) (func(int) Value, error) {
	if g, ok := arrowx.IntGetter(arr); ok {
		return func(i int) Value { return Value{kind: vInt, i: g(i)} }, nil
	}
	switch a := arr.(type) {
	case *array.Null: // a void column: every value is null
		return func(int) Value { return Value{} }, nil
	case *array.String:
		return func(i int) Value { return Value{kind: vString, s: a.Value(i)} }, nil
	case *array.Binary:
		return func(i int) Value { return Value{kind: vString, s: string(a.Value(i))} }, nil
	case *array.Float64:
		return func(i int) Value { return Value{kind: vFloat, f: a.Value(i)} }, nil
	case *array.Float32:
		return func(i int) Value { return Value{kind: vFloat, f: float64(a.Value(i))} }, nil
	case *array.Boolean:
		return func(i int) Value { return Value{kind: vBool, b: a.Value(i)} }, nil
	case *array.Date32:
		return func(i int) Value { return Value{kind: vInt, i: int64(a.Value(i))} }, nil
	case *array.Timestamp:
		return func(i int) Value { return Value{kind: vInt, i: int64(a.Value(i))} }, nil
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
		return func(i int) Value {
			return Value{kind: vDecimal, r: new(big.Rat).SetFrac(a.Value(i).BigInt(), den)}
		}, nil
	}
	return nil, fmt.Errorf("cannot compare values of type %s", arr.DataType())
}
