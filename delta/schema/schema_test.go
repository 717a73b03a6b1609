package schema

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const allTypes = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"i","type":"integer","nullable":true,"metadata":{}},
 {"name":"sh","type":"short","nullable":true,"metadata":{}},
 {"name":"by","type":"byte","nullable":true,"metadata":{}},
 {"name":"d","type":"double","nullable":true,"metadata":{}},
 {"name":"f","type":"float","nullable":true,"metadata":{}},
 {"name":"b","type":"boolean","nullable":true,"metadata":{}},
 {"name":"bin","type":"binary","nullable":true,"metadata":{}},
 {"name":"dt","type":"date","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"ntz","type":"timestamp_ntz","nullable":true,"metadata":{}},
 {"name":"dec9","type":"decimal(5,2)","nullable":true,"metadata":{}},
 {"name":"dec18","type":"decimal(18,4)","nullable":true,"metadata":{}},
 {"name":"dec38","type":"decimal(38,10)","nullable":true,"metadata":{}},
 {"name":"st","type":{"type":"struct","fields":[
   {"name":"x","type":"integer","nullable":true,"metadata":{}},
   {"name":"y","type":{"type":"struct","fields":[{"name":"z","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},
  "nullable":true,"metadata":{}},
 {"name":"arr","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}},
 {"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"string","containsNull":true},"valueContainsNull":true},"nullable":true,"metadata":{}},
 {"name":"p_str","type":"string","nullable":true,"metadata":{}},
 {"name":"p_date","type":"date","nullable":true,"metadata":{}},
 {"name":"p_int","type":"integer","nullable":true,"metadata":{}}
]}`

func mustSchema(t testing.TB, s string) *StructType {
	t.Helper()
	st, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMerge(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},{"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	in := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, arrow.Field{Name: "b", Type: arrow.BinaryTypes.String})},
		{Name: "extra", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
	}, nil)
	merged, changed, err := Merge(sch, in)
	if err != nil || !changed {
		t.Fatalf("merge: %v changed=%v", err, changed)
	}
	got, _ := merged.SchemaString()
	want := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},{"name":"st","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"extra","type":"decimal(10,2)","nullable":true,"metadata":{}}]}`
	if got != want {
		t.Errorf("merged:\n got  %s\n want %s", got, want)
	}
	_, _, err = Merge(sch, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil))
	if err == nil || !strings.Contains(err.Error(), "column id: table type long, incoming type string") {
		t.Errorf("conflicting merge error %v", err)
	}
}

func TestArrowSchemaRoundTrip(t *testing.T) {
	sch := mustSchema(t, allTypes)
	as, err := ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := sch.SchemaString()
	b, _ := back.SchemaString()
	if a != b {
		t.Errorf("round trip:\n got  %s\n want %s", b, a)
	}
	for name, want := range map[string]string{
		"ts": "timestamp[us, tz=UTC]", "ntz": "timestamp[us]", "dec38": "decimal(38, 10)", "dt": "date32",
	} {
		f, _ := as.FieldsByName(name)
		if got := f[0].Type.String(); got != want {
			t.Errorf("%s: arrow type %s, want %s", name, got, want)
		}
	}
}

// Spark SQL's type names and aliases parse; bad ones are refused naming them.
func TestParsePrimitive(t *testing.T) {
	for in, want := range map[string]string{
		"int": "integer", "BIGINT": "long", "smallint": "short", "tinyint": "byte", "bool": "boolean",
		"decimal": "decimal(10,0)", "decimal( 12 , 3 )": "decimal(12,3)", "timestamp_ntz": "timestamp_ntz",
	} {
		got, err := ParsePrimitive(in)
		if err != nil || got.String() != want {
			t.Errorf("ParsePrimitive(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"decimal(39,2)", "decimal(4,5)", "varchar(3)"} {
		if _, err := ParsePrimitive(bad); err == nil || !strings.Contains(err.Error(), strings.Fields(strings.ReplaceAll(bad, "(", " "))[0]) {
			t.Errorf("ParsePrimitive(%q): %v, want it refused", bad, err)
		}
	}
}

// A schemaString renders back as it was read; duplicate names (any case) are refused.
func TestParseRoundTrip(t *testing.T) {
	st := mustSchema(t, allTypes)
	back, err := st.SchemaString()
	if err != nil {
		t.Fatal(err)
	}
	if again := mustSchema(t, back); again.String() != st.String() {
		t.Fatalf("round trip: %s, want %s", again, st)
	}
	_, err = Parse(`{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"A","type":"long","nullable":true,"metadata":{}}]}`)
	if err == nil || !strings.Contains(err.Error(), "duplicate field name") {
		t.Fatalf("duplicate names: %v", err)
	}
}

// Relabel renames struct fields at any depth without copying, and leaks nothing.
func TestRelabelDeep(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	inner := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	from := arrow.ListOf(inner)
	b := array.NewListBuilder(mem, inner)
	sb := b.ValueBuilder().(*array.StructBuilder)
	b.Append(true)
	sb.Append(true)
	sb.FieldBuilder(0).(*array.Int64Builder).Append(7)
	arr := b.NewArray()
	b.Release()
	defer arr.Release()
	if !arrow.TypeEqual(arr.DataType(), from) {
		t.Fatalf("built %s", arr.DataType())
	}
	to := arrow.ListOf(arrow.StructOf(arrow.Field{Name: "col-1", Type: arrow.PrimitiveTypes.Int64, Nullable: true}))
	got := Relabel(arr, to)
	defer got.Release()
	if !arrow.TypeEqual(got.DataType(), to) {
		t.Fatalf("relabelled to %s, want %s", got.DataType(), to)
	}
	v := got.(*array.List).ListValues().(*array.Struct).Field(0).(*array.Int64).Value(0)
	if v != 7 {
		t.Fatalf("value %d, want 7", v)
	}
}

// Data of a type a column was widened from (an older schema's rows written into the
// widened table) is cast exactly; a narrowing is still refused.
func TestConformWidens(t *testing.T) {
	table := &StructType{Fields: []*StructField{
		{Name: "qty", Type: &PrimitiveType{Name: TypeLong}, Nullable: true},
		{Name: "amount", Type: &DecimalType{Precision: 14, Scale: 2}, Nullable: true},
	}}
	target, err := ArrowSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	qb := array.NewInt32Builder(memory.DefaultAllocator)
	qb.AppendValues([]int32{7, -2147483648}, nil)
	q := qb.NewArray()
	defer q.Release()
	db := array.NewDecimal128Builder(memory.DefaultAllocator, &arrow.Decimal128Type{Precision: 10, Scale: 2})
	db.Append(decimal128.FromI64(12345))
	db.Append(decimal128.FromI64(-99999999))
	d := db.NewArray()
	defer d.Release()
	in := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
		{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
	}, nil), []arrow.Array{q, d}, 2)
	defer in.Release()
	out, err := Conform(memory.DefaultAllocator, in, table, target)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	qs := out.Column(0).(*array.Int64)
	ds := out.Column(1).(*array.Decimal128)
	if qs.Value(0) != 7 || qs.Value(1) != -2147483648 || ds.ValueStr(0) != "123.45" || ds.ValueStr(1) != "-999999.99" {
		t.Fatalf("widened %v %v", qs, ds)
	}
	narrow := &StructType{Fields: []*StructField{{Name: "qty", Type: &PrimitiveType{Name: TypeShort}, Nullable: true}}}
	nt, _ := ArrowSchema(narrow)
	in2 := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil), []arrow.Array{q}, 2)
	defer in2.Release()
	if _, err := Conform(memory.DefaultAllocator, in2, narrow, nt); err == nil {
		t.Fatal("an int written into a short column was accepted")
	}
}
