package jobs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
)

// BenchmarkKeptRows compares the two ways a batch of an ingest's shape (32768 rows) loses
// the rows a drop expectation marks, one in a thousand: concatenating the runs of kept
// rows (keptParts) and Arrow's filter kernel.
func BenchmarkKeptRows(b *testing.B) {
	st := schemaOf(b, "id bigint", "email string", "quantity int", "amount decimal(10,2)", "sold_at timestamp", "source_file string", "load_timestamp timestamp")
	as, err := delta.ArrowSchema(st)
	if err != nil {
		b.Fatal(err)
	}
	const n = 32768
	bld := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer bld.Release()
	for i := 0; i < n; i++ {
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("c%d@example.com", i))
		bld.Field(2).(*array.Int32Builder).Append(int32(i % 50))
		bld.Field(3).(*array.Decimal128Builder).AppendNull()
		bld.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
		bld.Field(5).(*array.StringBuilder).Append("landing/orders.csv")
		bld.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixMicro()))
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = i%1000 != 7
	}
	b.Run("runs", func(b *testing.B) {
		for range b.N {
			parts, err := keptParts(rec, keep)
			if err != nil {
				b.Fatal(err)
			}
			parts[0].Release()
		}
	})
	b.Run("filter", func(b *testing.B) {
		mask := array.NewBoolean(n, memory.NewBufferBytes(boolBits(keep)), nil, 0)
		defer mask.Release()
		for range b.N {
			out, err := compute.FilterRecordBatch(context.Background(), rec, mask, compute.DefaultFilterOptions())
			if err != nil {
				b.Fatal(err)
			}
			out.Release()
		}
	})
}
