package arrowx

import (
	"context"
	"strconv"
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

// SettleNullCounts leaves no count unknown in a slice of a column with nulls, nor in a
// struct's field that is one, and the counts are the nulls there are: later NullN calls,
// from any goroutine, only read.
func TestSettleNullCounts(t *testing.T) {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	for i := range 100 {
		if i%3 == 0 {
			ib.AppendNull()
		} else {
			ib.Append(int64(i))
		}
	}
	whole := ib.NewArray()
	defer whole.Release()
	slice, field := array.NewSlice(whole, 10, 40), array.NewSlice(whole, 10, 40)
	defer slice.Release()
	defer field.Release()
	st, err := array.NewStructArray([]arrow.Array{field}, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Release()
	if slice.Data().NullN() != array.UnknownNullCount || st.Data().Children()[0].NullN() != array.UnknownNullCount {
		t.Fatal("the slices' null counts are known already: the test shows nothing")
	}
	SettleNullCounts([]arrow.Array{slice, st, nil})
	// Rows 10..39: the multiples of 3 among them, 12 to 39, are null.
	if got := slice.Data().NullN(); got != 10 {
		t.Errorf("the slice's null count is %d, want 10", got)
	}
	if got := st.Data().Children()[0].NullN(); got != 10 {
		t.Errorf("the struct field's null count is %d, want 10", got)
	}
}

// A large gather of a record that holds one array in two columns, a slice whose null
// count is unknown, copies its columns on several goroutines (with -race: no goroutine
// writes the count another reads) and gathers the same rows into both.
func TestGatherOneArrayInTwoColumns(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	n := 2*parallelGatherRows + 20
	for i := range n {
		if i%5 == 0 {
			b.AppendNull()
		} else {
			b.Append(strconv.Itoa(i))
		}
	}
	whole := b.NewArray()
	defer whole.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	// (rounds: the race detector sees a race of two goroutines only when their
	// accesses fall close enough in time; one round shows it one time in five)
	for round := range 20 {
		col := array.NewSlice(whole, int64(1+round), int64(n))
		rec := array.NewRecordBatch(sc, []arrow.Array{col, col}, int64(col.Len()))
		rows := make([]int32, 0, col.Len()/2)
		for i := col.Len() - 1; i >= 0; i -= 2 {
			rows = append(rows, int32(i))
		}
		got, err := Gather(context.Background(), memory.DefaultAllocator, rec, rows)
		if err != nil {
			t.Fatal(err)
		}
		for c := range 2 {
			g := got.Column(c).(*array.String)
			for j, r := range rows {
				if g.IsNull(j) != col.IsNull(int(r)) || g.IsValid(j) && g.Value(j) != col.(*array.String).Value(int(r)) {
					t.Fatalf("round %d: column %d row %d: %v, want row %d of the source", round, c, j, g.ValueStr(j), r)
				}
			}
		}
		got.Release()
		rec.Release()
		col.Release()
	}
}
