package delta

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestConformSlicedNestedInput writes sliced records whose nested types differ from the
// table's only in field names and nullability flags (arrow.ListOf's "item" element, a
// nullable map value, reordered struct fields), which the writer relabels without copying.
func TestConformSlicedNestedInput(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{}},
 {"name":"l","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},
 {"name":"m","type":{"type":"map","keyType":"string","valueType":"long","valueContainsNull":false},"nullable":true,"metadata":{}},
 {"name":"st","type":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":{}},{"name":"y","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	in := arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true}, arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}, arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true})), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	rec := recordFromJSON(t, in, `[
{"id":0,"st":{"x":0,"y":"zero"},"l":[{"a":0,"b":"0"}],"m":[{"key":"k0","value":0}]},
{"id":1,"st":null,"l":[{"a":1,"b":null},null],"m":[]},
{"id":2,"st":{"x":null,"y":"two"},"l":null,"m":null},
{"id":3,"st":{"x":3,"y":null},"l":[],"m":[{"key":"k3","value":3},{"key":"k33","value":33}]},
{"id":4,"st":{"x":4,"y":"four"},"l":[{"a":4,"b":"4"}],"m":[{"key":"k4","value":4}]}]`)
	defer rec.Release()
	sliced := rec.NewSlice(1, 4)
	defer sliced.Release()
	st := mem.New(mem.Config{})
	adds, err := WriteRecords(context.Background(), st, "", sch, nil, []arrow.RecordBatch{sliced}, WriteOptions{Allocator: memory.DefaultAllocator})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := scanAll(t, st, "", sch, nil, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), []string{
		`{"id":1,"l":[{"a":1,"b":null},null],"m":[],"st":null}`,
		`{"id":2,"l":null,"m":null,"st":{"x":null,"y":"two"}}`,
		`{"id":3,"l":[],"m":[{"key":"k3","value":3},{"key":"k33","value":33}],"st":{"x":3,"y":null}}`,
	})
	want := `{"numRecords":3,"minValues":{"id":1,"st":{"x":3,"y":"two"}},"maxValues":{"id":3,"st":{"x":3,"y":"two"}},"nullCount":{"id":0,"l":1,"m":1,"st":{"x":2,"y":2}}}`
	if adds[0].Stats != want {
		t.Errorf("stats:\n got  %s\n want %s", adds[0].Stats, want)
	}
}
