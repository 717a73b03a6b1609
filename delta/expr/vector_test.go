package expr

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// TestEvalVectorMatchesRows: the whole-array paths (IS [NOT] NULL, decimals against
// exact literals) answer as the per-row path does, NULLs included, for random values and
// literals (some not exact at the column's scale: those take the per-row path).
func TestEvalVectorMatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	schema := &dschema.StructType{Fields: []*dschema.StructField{{Name: "d", Type: &dschema.DecimalType{Precision: 10, Scale: 2}, Nullable: true}}}
	at := &arrow.Decimal128Type{Precision: 10, Scale: 2}
	bld := array.NewDecimal128Builder(memory.DefaultAllocator, at)
	defer bld.Release()
	for i := 0; i < 2000; i++ {
		if rng.IntN(10) == 0 {
			bld.AppendNull()
			continue
		}
		bld.Append(decimal128.FromI64(rng.Int64N(20001) - 10000))
	}
	arr := bld.NewArray()
	defer arr.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "d", Type: at, Nullable: true}}, nil), []arrow.Array{arr}, int64(arr.Len()))
	defer rec.Release()
	var preds []string
	for _, op := range []string{"=", "!=", "<", "<=", ">", ">="} {
		for _, lit := range []string{"0", "-5", "12.5", "-99.99", "3.141", "100", "0.01", "-0.015"} {
			preds = append(preds, fmt.Sprintf("d %s %s", op, lit))
		}
	}
	preds = append(preds, "d IS NULL", "d IS NOT NULL", "d >= 0 AND d < 50.5", "d IS NULL OR d < -10")
	for _, ps := range preds {
		p, err := Parse(ps)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Bind(p, schema, nil)
		if err != nil {
			t.Fatalf("%s: %v", ps, err)
		}
		got, err := b.Eval(rec, arr.Len())
		if err != nil {
			t.Fatal(err)
		}
		get, err := ValueGetter(arr)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			v := Value{}
			if arr.IsValid(i) {
				v = get(i)
			}
			if want := rowTruth(b, v); got[i] != want {
				t.Fatalf("%s on row %d (%v): vector %d, per row %d", ps, i, arr.ValueStr(i), got[i], want)
			}
		}
	}
}

// rowTruth is the per-row answer of a bound predicate over one column's value.
func rowTruth(b *Bound, v Value) Truth {
	switch b.kind {
	case bAnd, bOr:
		acc := rowTruth(b.terms[0], v)
		for _, t := range b.terms[1:] {
			acc = combine(b.kind, acc, rowTruth(t, v))
		}
		return acc
	}
	return b.test(v)
}

// A void column's array has no validity bitmap; IS NULL holds for every row of it, IS
// NOT NULL for none.
func TestEvalVectorVoidColumn(t *testing.T) {
	schema := &dschema.StructType{Fields: []*dschema.StructField{{Name: "v", Type: &dschema.PrimitiveType{Name: dschema.TypeVoid}, Nullable: true}}}
	arr := array.NewNull(3)
	defer arr.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.Null, Nullable: true}}, nil), []arrow.Array{arr}, 3)
	defer rec.Release()
	for ps, want := range map[string]Truth{"v IS NULL": True, "v IS NOT NULL": False} {
		p, err := Parse(ps)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Bind(p, schema, nil)
		if err != nil {
			t.Fatalf("%s: %v", ps, err)
		}
		got, err := b.Eval(rec, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if g != want {
				t.Errorf("%s on row %d: %d, want %d", ps, i, g, want)
			}
		}
	}
}
