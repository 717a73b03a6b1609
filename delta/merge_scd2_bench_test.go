package delta_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The shape of the scd2_merge stage's MERGE in the scd2 benchmark case: a dimension of
// scd2BenchRows rows in one file (change data feed on, identity surrogate key), and a
// source of ~10.5% closed versions (matched on customer_id, valid_from: update) plus
// ~11% new versions (not matched: insert), NullSafe keys.
const scd2BenchRows = 1_000_000

const scd2BenchSchema = `{"type":"struct","fields":[
 {"name":"customer_sk","type":"long","nullable":false,"metadata":{"delta.identity.start":1,"delta.identity.step":1,"delta.identity.allowExplicitInsert":false}},
 {"name":"customer_id","type":"string","nullable":true,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"city","type":"string","nullable":true,"metadata":{}},
 {"name":"segment","type":"string","nullable":true,"metadata":{}},
 {"name":"valid_from","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"valid_to","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"is_current","type":"boolean","nullable":true,"metadata":{}}]}`

var (
	scd2BenchOnce  sync.Once
	scd2BenchStore *mem.Store
	scd2Day1       = time.Date(2026, 1, 14, 8, 0, 0, 0, time.UTC)
	scd2Day2       = time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
)

func scd2BenchID(i int) string { return "C" + strconv.Itoa(10_000_000 + i)[1:] }

// scd2BenchBase is the dimension: one file of scd2BenchRows current rows.
func scd2BenchBase(b *testing.B) *mem.Store {
	scd2BenchOnce.Do(func() {
		ctx := context.Background()
		sch, err := delta.ParseSchema(scd2BenchSchema)
		if err != nil {
			b.Fatal(err)
		}
		st := mem.New(mem.Config{})
		tbl, err := delta.Create(ctx, st, "wh/dim", delta.CreateOptions{Schema: sch,
			Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}, delta.Options{})
		if err != nil {
			b.Fatal(err)
		}
		snap, _ := tbl.Snapshot(ctx)
		as, _ := delta.ArrowSchema(sch)
		w, err := snap.NewDataWriter(delta.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for lo := 0; lo < scd2BenchRows; lo += 65536 {
			rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
			for i := lo; i < min(lo+65536, scd2BenchRows); i++ {
				rb.Field(0).(*array.Int64Builder).Append(int64(i + 1))
				rb.Field(1).(*array.StringBuilder).Append(scd2BenchID(i))
				rb.Field(2).(*array.StringBuilder).Append("customer " + strconv.Itoa(i))
				rb.Field(3).(*array.StringBuilder).Append("city-" + strconv.Itoa(i%1000))
				if i%2000 == 0 {
					rb.Field(4).AppendNull()
				} else {
					rb.Field(4).(*array.StringBuilder).Append("seg-" + strconv.Itoa(i%7))
				}
				rb.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(scd2Day1.UnixMicro()))
				rb.Field(6).AppendNull()
				rb.Field(7).(*array.BooleanBuilder).Append(true)
			}
			rec := rb.NewRecordBatch()
			rb.Release()
			err := w.Write(ctx, rec)
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
		adds, err := w.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{})
		tx.AddFiles(adds...)
		if _, err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		scd2BenchStore = st
	})
	if scd2BenchStore == nil {
		b.Fatal("no bench dimension")
	}
	return scd2BenchStore
}

// scd2BenchSource is the MERGE source the stage builds: closed old versions (update),
// then new versions (insert).
func scd2BenchSource() (arrow.RecordBatch, int, int) {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "customer_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "segment", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "valid_from", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "valid_to", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "is_current", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "_scd_action", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	add := func(i int, city string, from time.Time, to *time.Time, current bool, action string) {
		b.Field(0).(*array.StringBuilder).Append(scd2BenchID(i))
		b.Field(1).(*array.StringBuilder).Append("customer " + strconv.Itoa(i))
		b.Field(2).(*array.StringBuilder).Append(city)
		b.Field(3).(*array.StringBuilder).Append("seg-" + strconv.Itoa(i%7))
		b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(from.UnixMicro()))
		if to == nil {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(to.UnixMicro()))
		}
		b.Field(6).(*array.BooleanBuilder).Append(current)
		b.Field(7).(*array.StringBuilder).Append(action)
	}
	updates, inserts := 0, 0
	changed := func(i int) bool { return i%10 == 1 || i%200 == 5 || i%2000 == 0 }
	for i := 0; i < scd2BenchRows; i++ {
		if changed(i) {
			add(i, "city-"+strconv.Itoa(i%1000), scd2Day1, &scd2Day2, false, "update")
			updates++
		}
	}
	for i := 0; i < scd2BenchRows+scd2BenchRows/100; i++ {
		if i >= scd2BenchRows || (changed(i) && i%200 != 5) {
			add(i, "city-"+strconv.Itoa(i%1000+1), scd2Day2, nil, true, "insert")
			inserts++
		}
	}
	return b.NewRecordBatch(), updates, inserts
}

// BenchmarkMergeSCD2 is the scd2_merge stage's MERGE alone (see scd2BenchBase).
func BenchmarkMergeSCD2(b *testing.B) {
	base := scd2BenchBase(b)
	src, updates, inserts := scd2BenchSource()
	defer src.Release()
	ctx := context.Background()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st := copyStore(b, base, "", func(string) bool { return true })
		tbl, err := delta.Open(ctx, st, "wh/dim", delta.Options{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		cpu0 := cpuTime()
		b.StartTimer()
		res, err := tbl.Merge(ctx, delta.MergeOptions{
			Source:   []arrow.RecordBatch{src},
			On:       []string{"customer_id", "valid_from"},
			NullSafe: true,
			WhenMatched: []delta.MergeClause{
				{Cond: expr.Eq("source._scd_action", "delete"), Action: delta.MergeDelete},
				{Action: delta.MergeUpdate},
			},
			WhenNotMatched: []delta.MergeClause{
				{Cond: expr.Ne("source._scd_action", "delete"), Action: delta.MergeInsert},
			},
		})
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if err != nil {
			b.Fatal(err)
		}
		if res.NumTargetRowsUpdated != int64(updates) || res.NumTargetRowsInserted != int64(inserts) {
			b.Fatalf("updated %d, inserted %d rows; want %d, %d", res.NumTargetRowsUpdated, res.NumTargetRowsInserted, updates, inserts)
		}
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
