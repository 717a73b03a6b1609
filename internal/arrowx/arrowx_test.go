package arrowx

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func ints(mem memory.Allocator, vs ...int32) arrow.Array {
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.AppendValues(vs, nil)
	return b.NewArray()
}

// Concat keeps the rows in order and leaks nothing; IntGetter reads every width.
func TestConcatAndIntGetter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int32}}, nil)
	var recs []arrow.RecordBatch
	for _, vs := range [][]int32{{1, 2}, {}, {3}} {
		a := ints(mem, vs...)
		recs = append(recs, array.NewRecordBatch(schema, []arrow.Array{a}, int64(len(vs))))
		a.Release()
	}
	all, err := Concat(mem, recs)
	if err != nil {
		t.Fatal(err)
	}
	ReleaseRecords(recs)
	get, ok := IntGetter(all.Column(0))
	if !ok || all.NumRows() != 3 || get(0) != 1 || get(2) != 3 {
		t.Fatalf("concatenation %v", all)
	}
	all.Release()
	if _, ok := IntGetter(array.NewNull(1)); ok {
		t.Fatal("IntGetter of a null array")
	}
}
