package delta

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestNoLeaks writes and scans (with partitions, a filter that gathers rows, and
// projection) through a checked allocator: every Arrow buffer must be released.
func TestNoLeaks(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	ctx := context.Background()
	sch := mustSchema(t, allTypesSchema)
	asch, _ := ArrowSchema(sch)
	rec := recordFromJSON(t, asch, allTypesRows)
	defer rec.Release()
	st := mem.New(mem.Config{})
	parts := []string{"p_str", "p_date", "p_int"}
	adds, err := WriteRecords(ctx, st, "", sch, parts, []arrow.RecordBatch{rec, rec}, WriteOptions{Allocator: alloc})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []ScanOptions{
		{Allocator: alloc},
		{Allocator: alloc, Filter: expr.Or(expr.Eq("id", 1), expr.Eq("id", 4)), Columns: []string{"m", "p_str", "st"}},
		{Allocator: alloc, Columns: []string{"p_int"}, BatchSize: 1},
	} {
		sc, err := Scan(ctx, st, "", sch, parts, adds, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sc.Next() {
			n += int(sc.RecordBatch().NumRows())
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sc.Release()
		if n == 0 {
			t.Errorf("scan %+v returned no rows", opts)
		}
	}
}
