package jobs

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// BenchmarkHeldRowCost measures, per keyed stage, the heap a run in memory takes at its
// peak (live data: the collector runs often while it is measured) per row of its batch,
// next to what the stage's estimate said its live pass held once its input was read
// (heldAfterRead). A budget is spent well when the estimate covers the peak (held/peak
// about 1): below, a run over its budget would not go to spill files in time; far above,
// it goes there when memory would have held it.
//
//	go test ./jobs -run xxx -bench HeldRowCost -benchtime 1x
func BenchmarkHeldRowCost(b *testing.B) {
	for _, n := range []int{100_000, 400_000} {
		for _, c := range heldCases {
			b.Run(fmt.Sprintf("%s/rows=%d", c.name, n), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					run := c.setup(b, n)
					var held, rows int64
					was := heldAfterRead
					heldAfterRead = func(_ string, h, r int64) { held, rows = h, r }
					gc := debug.SetGCPercent(10)
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					var peak uint64
					stop := sampleHeap(&peak)
					b.StartTimer()
					res := run()
					b.StopTimer()
					stop()
					debug.SetGCPercent(gc)
					heldAfterRead = was
					if rows == 0 {
						b.Fatalf("no estimate (notes %q)", res.Notes)
					}
					live := float64(peak - min(peak, ms.HeapAlloc))
					b.ReportMetric(live/float64(rows), "peak-B/row")
					b.ReportMetric(float64(held)/float64(rows), "held-B/row")
					b.ReportMetric(float64(held)/live, "held/peak")
				}
			})
		}
	}
}

// heldCase is a keyed stage's run on n rows, set up (not measured) on local disk.
type heldCase struct {
	name  string
	setup func(b *testing.B, n int) (run func() Result)
}

var heldCases = []heldCase{
	{"scd2_merge change feed", func(b *testing.B, n int) func() Result { return heldSCD(b, n, true, false) }},
	{"scd2_merge snapshot", func(b *testing.B, n int) func() Result { return heldSCD(b, n, false, false) }},
	{"scd1_merge change feed", func(b *testing.B, n int) func() Result { return heldSCD(b, n, true, true) }},
	{"upsert", func(b *testing.B, n int) func() Result { return heldIngest(b, n, "upsert", "") }},
	{"upsert sequence_by", func(b *testing.B, n int) func() Result { return heldIngest(b, n, "upsert", "updated_at") }},
	{"snapshot", func(b *testing.B, n int) func() Result { return heldIngest(b, n, "snapshot", "") }},
	{"first snapshot", func(b *testing.B, n int) func() Result { return heldIngest(b, n, "first", "") }},
}

func heldStore(b *testing.B) objectstore.Store {
	s, err := fs.New(fs.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// heldSCD: a dimension (or current-state table) of n customers, then the day's full
// extract of them, every tenth moved, merged from the staging table's change feed (or
// its snapshot).
func heldSCD(b *testing.B, n int, changes, scd1 bool) func() Result {
	staging, dim := customerTables(b)
	if !changes {
		staging.Properties = nil
	}
	clock := &testClock{t: d1}
	target := dim
	if scd1 {
		target = &Table{Name: "current.customer", Path: "current/customer",
			Schema: schemaOf(b, "customer_id string", "name string", "city string", "updated_at timestamp"), Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
	}
	env := newTestEnv(heldStore(b), clock, staging, target)
	env.MemoryBudget = 64 << 30
	var stage Stage
	if scd1 {
		stage = NewSCD1Merge("merge", &SCD1Config{Source: staging.Name, SourceChanges: changes, Target: target.Name, Keys: []string{"customer_id"}, SequenceBy: "updated_at"})
	} else {
		cfg := scd2Config()
		cfg.SourceChanges = changes
		stage = NewSCD2Merge("merge", cfg)
	}
	all, same, moved := make([]int, n), make([]int, 0, n), make([]int, 0, n/10+1)
	for k := range n {
		all[k] = k
		if k%10 == 1 {
			moved = append(moved, k)
		} else {
			same = append(same, k)
		}
	}
	appendCustomers(b, env, staging, all, "Seattle", d1)
	if _, err := stage.Run(b.Context(), env); err != nil {
		b.Fatal(err)
	}
	clock.t = d2
	if !changes { // the day's snapshot replaces the last
		tbl, err := env.openTable(b.Context(), staging)
		if err != nil {
			b.Fatal(err)
		}
		snap, err := tbl.Snapshot(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "DELETE"})
		tx.RemoveAdds(snap.Files()...)
		if _, err := tx.Commit(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	appendCustomers(b, env, staging, same, "Seattle", d2)
	appendCustomers(b, env, staging, moved, "Portland", d2)
	return func() Result {
		res, err := stage.Run(b.Context(), env)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
}

// heldIngest: a keyed table of n rows, then a file of n rows, every tenth changed and
// one in a hundred new, loaded in mode (first: the first snapshot, into an empty table).
func heldIngest(b *testing.B, n int, mode, seq string) func() Result {
	tbl := &Table{Name: "bronze.customers", Path: "bronze/customers",
		Schema:     schemaOf(b, "id string", "city string", "op string", "updated_at timestamp", "source_file string", "load_timestamp timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
	store := heldStore(b)
	landing := heldStore(b)
	clock := &testClock{t: t0}
	env := newTestEnv(store, clock, tbl)
	env.OpenLocation = func(_ context.Context, loc string) (objectstore.Store, string, error) {
		return landing, strings.TrimPrefix(loc, "/"), nil
	}
	env.MemoryBudget = 64 << 30
	m := mode
	if mode == "first" {
		m = "snapshot"
	}
	stage := NewIngest("ingest", &IngestConfig{Source: "/c/*.csv", Target: tbl.Name, Mode: m, Keys: []string{"id"}, SequenceBy: seq})
	file := func(name string, day int) {
		var sb strings.Builder
		sb.WriteString("id,city,op,updated_at\n")
		for k := range n + day*n/100 {
			city := k % 1000
			if day == 1 && k%10 == 1 {
				city++
			}
			fmt.Fprintf(&sb, "C%08d,city %d,U,2026-01-%02dT08:00:00Z\n", k, city, 14+day)
		}
		if err := landing.Put(b.Context(), "c/"+name, strings.NewReader(sb.String()), int64(sb.Len())); err != nil {
			b.Fatal(err)
		}
	}
	if mode != "first" {
		file("day1.csv", 0)
		if _, err := stage.Run(b.Context(), env); err != nil {
			b.Fatal(err)
		}
		clock.Advance(time.Hour)
		file("day2.csv", 1)
	} else {
		file("day1.csv", 0)
	}
	return func() Result {
		res, err := stage.Run(b.Context(), env)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
}
