package delta_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

const (
	benchFiles   = 100
	benchPerFile = 10_000 // 1,000,000 target rows
	benchChanged = 100_000
)

// benchRecord builds rows id in ids with name "n<id>-<tag>" and part "p".
func benchRecord(ids []int64, tag string, withOp bool) arrow.RecordBatch {
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "part", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	if withOp {
		fields = append(fields, arrow.Field{Name: "op", Type: arrow.BinaryTypes.String})
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d-%s", id, tag))
		b.Field(2).(*array.StringBuilder).Append("p")
		if withOp {
			b.Field(3).(*array.StringBuilder).Append("U")
		}
	}
	return b.NewRecordBatch()
}

var (
	benchOnce  sync.Once
	benchStore *mem.Store
)

// benchBase is a 1,000,000-row table of 100 files of 10,000 consecutive ids.
func benchBase(b *testing.B) *mem.Store {
	benchOnce.Do(func() {
		ctx := context.Background()
		st := mem.New(mem.Config{})
		tbl, err := delta.Create(ctx, st, "wh/bench", delta.CreateOptions{Schema: testSchema()}, delta.Options{})
		if err != nil {
			b.Fatal(err)
		}
		snap, _ := tbl.Snapshot(ctx)
		tx := tbl.NewTransaction(snap, delta.TxOptions{})
		for f := 0; f < benchFiles; f++ {
			ids := make([]int64, benchPerFile)
			for i := range ids {
				ids[i] = int64(f*benchPerFile + i)
			}
			rec := benchRecord(ids, "v0", false)
			adds, err := delta.WriteRecords(ctx, st, tbl.Root(), snap.Schema(), nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
			tx.AddFiles(adds...)
		}
		if _, err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		benchStore = st
	})
	if benchStore == nil {
		b.Fatal("no bench table")
	}
	return benchStore
}

// BenchmarkMerge merges 100,000 changed rows into the 1,000,000-row table: "clustered"
// changes every row of 10% of the files, "spread" every 10th row of every file. It
// reports the peak heap in use during the merge.
func BenchmarkMerge(b *testing.B) {
	for _, layout := range []string{"clustered", "spread"} {
		b.Run(layout, func(b *testing.B) {
			base := benchBase(b)
			ids := make([]int64, benchChanged)
			for i := range ids {
				if layout == "clustered" {
					ids[i] = int64(i)
				} else {
					ids[i] = int64(i * 10)
				}
			}
			src := benchRecord(ids, "v1", true)
			defer src.Release()
			ctx := context.Background()
			var peak uint64
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				st := copyStore(b, base, "", func(string) bool { return true })
				tbl, err := delta.Open(ctx, st, "wh/bench", delta.Options{})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				stop := sampleHeap(&peak)
				cpu0 := cpuTime()
				b.StartTimer()
				res, err := tbl.Merge(ctx, delta.MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"},
					WhenMatched: []delta.MergeClause{{Action: delta.MergeUpdate}}, WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}})
				b.StopTimer()
				cpu += cpuTime() - cpu0
				stop()
				if err != nil {
					b.Fatal(err)
				}
				if res.NumTargetRowsUpdated != benchChanged {
					b.Fatalf("updated %d rows", res.NumTargetRowsUpdated)
				}
				b.ReportMetric(float64(res.NumTargetFilesRemoved), "files-rewritten")
				b.StartTimer()
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op") // robust to a loaded machine
		})
	}
}

// sampleHeap records the largest heap in use (HeapInuse: object bytes plus unused bytes
// of in-use spans) until stop is called; runtime/metrics reads it without stopping the
// world.
func sampleHeap(peak *uint64) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
		for !done.Load() {
			metrics.Read(samples)
			if v := samples[0].Value.Uint64() + samples[1].Value.Uint64(); v > *peak {
				*peak = v
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() { done.Store(true); wg.Wait() }
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
