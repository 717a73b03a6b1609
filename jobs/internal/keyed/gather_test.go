package keyed

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Own copies a slice of a larger record into buffers of its own, and takes a record
// that owns its buffers as it is.
func TestOwn(t *testing.T) {
	var rows [][2]any
	for i := range 1000 {
		rows = append(rows, [2]any{fmt.Sprintf("key-%04d", i), i})
	}
	whole := testRecord(0, rows...)
	defer whole.Release()
	slice := whole.NewSlice(10, 20)
	defer slice.Release()
	own, err := Own(slice)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Release()
	if got, want := rowsOf(own), rowsOf(slice); !slices.Equal(got, want) {
		t.Fatalf("owned rows %v, want %v", got, want)
	}
	for i, c := range own.Columns() {
		if c.Data().Offset() != 0 {
			t.Errorf("column %d still has offset %d", i, c.Data().Offset())
		}
		if n, whole := c.Data().(*array.Data).SizeInBytes(), whole.Column(i).Data().(*array.Data).SizeInBytes(); n*10 > whole {
			t.Errorf("column %d holds %d bytes of the whole record's %d", i, n, whole)
		}
	}
	same, err := Own(whole)
	if err != nil {
		t.Fatal(err)
	}
	defer same.Release()
	if same != whole {
		t.Error("a record owning its buffers was copied")
	}
}

// GatherOne gives the rows refs name, in their order, whether they come in long runs
// of one record (a gather per run) or hop from record to record (one gather from the
// records concatenated).
func TestGatherOne(t *testing.T) {
	var recs []arrow.RecordBatch
	var all []string
	for r := range 4 {
		var rows [][2]any
		for i := range 100 {
			rows = append(rows, [2]any{fmt.Sprintf("k%d-%03d", r, i), r*1000 + i})
		}
		rec := testRecord(int64(r*100), rows...)
		defer rec.Release()
		recs = append(recs, rec)
		all = append(all, rowsOf(rec)...)
	}
	runs := []Ref{{2, 5}, {2, 6}, {2, 7}, {0, 99}, {3, 0}, {3, 1}}
	var hops []Ref
	for i := range 100 {
		hops = append(hops, Ref{Rec: int32(i % 4), Row: int32(99 - i)})
	}
	for name, refs := range map[string][]Ref{"runs": runs, "hops": hops} {
		got, err := GatherOne(context.Background(), recs, refs)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range refs {
			want = append(want, all[int(r.Rec)*100+int(r.Row)])
		}
		if g := rowsOf(got); !slices.Equal(g, want) {
			t.Errorf("%s: got %v, want %v", name, g, want)
		}
		got.Release()
	}
	if got, err := GatherOne(context.Background(), recs, nil); got != nil || err != nil {
		t.Errorf("no refs: got %v, %v", got, err)
	}
}
