package jobs

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// BenchmarkFactLoadKeying keys a first load of facts against a dimension of keys with
// 3 versions each (the first load: every fact looked up), and then re-keys after a late
// event touching 1% of the keys, and reports the peak heap. Run it with
//
//	go test ./jobs -run xxx -bench FactLoadKeying -benchtime 1x
func BenchmarkFactLoadKeying(b *testing.B) {
	for _, size := range [][2]int{{1_000_000, 100_000}, {4_000_000, 400_000}} {
		facts, keys := size[0], size[1]
		b.Run(fmt.Sprintf("facts=%d/keys=%d", facts, keys), func(b *testing.B) {
			var peak uint64
			b.StopTimer()
			for range b.N {
				env, load := factBenchSetup(b, facts, keys)
				runtime.GC()
				stop := sampleHeap(&peak)
				b.StartTimer()
				if _, err := load.Run(context.Background(), env); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				stop()
			}
			b.StartTimer()
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(facts)*float64(b.N)/b.Elapsed().Seconds(), "facts/s")
		})
	}
}

// BenchmarkFactLoadRekey measures the run after a change of 1% of the dimension's keys
// (their middle version updated in place: the change feed shows their ranges, so the
// facts of those keys in that range are looked up again).
func BenchmarkFactLoadRekey(b *testing.B) {
	const facts, keys = 1_000_000, 100_000
	b.StopTimer()
	for range b.N {
		env, load := factBenchSetup(b, facts, keys)
		ctx := context.Background()
		if _, err := load.Run(ctx, env); err != nil {
			b.Fatal(err)
		}
		tbl, err := env.openTable(ctx, env.Tables["sales.customer"])
		if err != nil {
			b.Fatal(err)
		}
		var ids []any
		for i := 0; i < keys; i += 100 {
			ids = append(ids, fmt.Sprintf("C%07d", i))
		}
		mid := time.Date(2026, 1, 11, 0, 0, 0, 0, time.UTC)
		if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.And(expr.In("customer_id", ids...), expr.Eq("city", "city1")), Set: map[string]any{"valid_to": mid}}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := load.Run(ctx, env)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		b.Log(res.Notes)
	}
	b.StartTimer()
}

// factBenchSetup writes, on local disk, a dimension of keys customers with 3 versions
// each (valid from day 0, 10 and 20) and a source of facts spread over 30 days.
func factBenchSetup(b *testing.B, facts, keys int) (*Env, *FactLoad) {
	store, err := fs.New(fs.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	staging, dim := customerTables(b)
	raw, factTbl := salesTables(b)
	env := newTestEnv(store, &testClock{t: d1}, staging, dim, raw, factTbl)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(decl *Table, fill func(bl *array.RecordBuilder, from, to int), n int) {
		tbl, err := env.openOrCreate(ctx, decl)
		if err != nil {
			b.Fatal(err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		as, err := delta.ArrowSchema(snap.Schema())
		if err != nil {
			b.Fatal(err)
		}
		var recs []arrow.RecordBatch
		for from := 0; from < n; from += 1 << 16 {
			bl := array.NewRecordBuilder(memory.DefaultAllocator, as)
			fill(bl, from, min(n, from+1<<16))
			recs = append(recs, bl.NewRecordBatch())
			bl.Release()
		}
		adds, err := delta.WriteRecords(ctx, tbl.Store(), tbl.Root(), snap.Schema(), nil, recs, delta.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
		tx.AddFiles(adds...)
		if _, err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	ts := func(t time.Time) arrow.Timestamp { return arrow.Timestamp(t.UnixMicro()) }
	// customer_sk, customer_id, name, city, valid_from, valid_to, is_current
	write(dim, func(bl *array.RecordBuilder, from, to int) {
		for i := from; i < to; i++ {
			for v := range 3 {
				bl.Field(0).(*array.Int64Builder).Append(int64(3*i + v + 1))
				bl.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("C%07d", i))
				bl.Field(2).(*array.StringBuilder).Append("name")
				bl.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("city%d", v))
				bl.Field(4).(*array.TimestampBuilder).Append(ts(base.AddDate(0, 0, 10*v)))
				end := base.AddDate(0, 0, 10*v+10)
				if v == 2 {
					end = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
				}
				bl.Field(5).(*array.TimestampBuilder).Append(ts(end))
				bl.Field(6).(*array.BooleanBuilder).Append(v == 2)
			}
		}
	}, keys)
	// sale_id, customer_id, amount, sold_at
	write(raw, func(bl *array.RecordBuilder, from, to int) {
		for i := from; i < to; i++ {
			bl.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("S%09d", i))
			bl.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("C%07d", (i*7919)%keys))
			bl.Field(2).(*array.Int64Builder).Append(int64(i % 1000))
			bl.Field(3).(*array.TimestampBuilder).Append(ts(base.Add(time.Duration(i%(30*24*60)) * time.Minute)))
		}
	}, facts)
	return env, NewFactLoad("sales", factConfig(true, ""))
}
