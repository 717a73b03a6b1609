package jobs

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// BenchmarkSCD2TableSize merges the same 20,000-event change feed batch into customer
// dimensions of growing size and reports the heap at its largest during the merge
// (peak-heap-MB): it should follow the batch, not the dimension. Run it with
//
//	go test ./jobs -run xxx -bench SCD2TableSize -benchtime 1x
func BenchmarkSCD2TableSize(b *testing.B) {
	for _, n := range []int{250_000, 1_000_000, 4_000_000, 16_000_000} {
		b.Run(fmt.Sprintf("dimension=%d", n), func(b *testing.B) {
			var peak uint64
			b.StopTimer()
			for range b.N {
				env, stage, staging := scd2BenchSetup(b, n)
				// The batch: 20,000 keys spread over the whole dimension move city.
				var keys []int
				for i := 0; i < n; i += n / 20_000 {
					keys = append(keys, i)
				}
				appendCustomers(b, env, staging, keys, "Portland", d2)
				runtime.GC()
				stop := sampleHeap(&peak)
				b.StartTimer()
				if _, err := stage.Run(context.Background(), env); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				stop()
			}
			b.StartTimer()
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// scd2BenchSetup builds, on local disk, a staging table with the change feed holding n
// customers and a dimension merged from it.
func scd2BenchSetup(b *testing.B, n int) (*Env, *SCD2Merge, *Table) {
	store, err := fs.New(fs.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	staging, dim := customerTables(b)
	clock := &testClock{t: d1}
	env := newTestEnv(store, clock, staging, dim)
	keys := make([]int, n)
	for i := range keys {
		keys[i] = i
	}
	appendCustomers(b, env, staging, keys, "Seattle", d1)
	stage := NewSCD2Merge("merge", scd2Config())
	if _, err := stage.Run(context.Background(), env); err != nil {
		b.Fatal(err)
	}
	clock.t = d2
	return env, stage, staging
}

// appendCustomers commits one row per key to the staging table.
func appendCustomers(b testing.TB, env *Env, staging *Table, keys []int, city string, at time.Time) {
	ctx := context.Background()
	tbl, err := env.openOrCreate(ctx, staging)
	if err != nil {
		b.Fatal(err)
	}
	as, err := delta.ArrowSchema(staging.Schema)
	if err != nil {
		b.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for lo := 0; lo < len(keys); lo += 65536 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
		for _, k := range keys[lo:min(lo+65536, len(keys))] {
			rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("C%08d", k))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("customer %d", k))
			rb.Field(2).(*array.StringBuilder).Append(city)
			rb.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMicro()))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: recs}); err != nil {
		b.Fatal(err)
	}
}

// sampleHeap records into peak the largest heap in use (live and not yet collected
// objects) until stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			*peak = max(*peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
