package delta_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// rtBenchFiles x rtBenchPerFile target rows; rtBenchChanged of them change, every 10th
// row of every file (the case where a rewrite copies the most rows per changed one).
const (
	rtBenchFiles   = 20
	rtBenchPerFile = 10_000
	rtBenchChanged = rtBenchFiles * rtBenchPerFile / 10
)

var (
	rtBenchMu     sync.Mutex
	rtBenchTables = map[string]*mem.Store{}
)

// rtBenchBase is the 200,000-row table of 20 files of 10,000 consecutive ids, with
// row tracking or not, deletion vectors on or not (built once per kind).
func rtBenchBase(b *testing.B, tracked, dv bool) *mem.Store {
	key := fmt.Sprint(tracked, dv)
	rtBenchMu.Lock()
	defer rtBenchMu.Unlock()
	if st, ok := rtBenchTables[key]; ok {
		return st
	}
	ctx := context.Background()
	st := mem.New(mem.Config{})
	props := map[string]string{delta.PropEnableDeletionVectors: fmt.Sprint(dv)}
	if tracked {
		props[delta.PropEnableRowTracking] = "true"
	}
	tbl, err := delta.Create(ctx, st, "wh/bench", delta.CreateOptions{Schema: testSchema(), Properties: props}, delta.Options{})
	if err != nil {
		b.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	for f := 0; f < rtBenchFiles; f++ {
		ids := make([]int64, rtBenchPerFile)
		for i := range ids {
			ids[i] = int64(f*rtBenchPerFile + i)
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
	rtBenchTables[key] = st
	return st
}

// rtBenchPositions gives the matches of src (ids in its first column) by position, with
// the target rows (FileMatches.Rows), as the keyed stages give them after their scan.
func rtBenchPositions(b *testing.B, snap *delta.Snapshot, src arrow.RecordBatch) *delta.MergePositions {
	ctx := context.Background()
	byID := map[int64]int32{}
	ids := src.Column(0).(*array.Int64)
	for i := range ids.Len() {
		byID[ids.Value(i)] = int32(i)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Release()
	pos := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	for sc.Next() {
		file, first, _ := sc.Position()
		rec := sc.RecordBatch()
		col := rec.Column(0).(*array.Int64)
		var idx []int32
		for i := range col.Len() {
			s, hit := byID[col.Value(i)]
			if !hit {
				continue
			}
			fm := pos.Files[file.Path]
			if fm == nil {
				fm = &delta.FileMatches{}
				pos.Files[file.Path] = fm
			}
			fm.Target, fm.Source = append(fm.Target, first+int64(i)), append(fm.Source, s)
			idx = append(idx, int32(i))
		}
		if len(idx) > 0 {
			rows, err := arrowx.GatherRows(ctx, rec, idx)
			if err != nil {
				b.Fatal(err)
			}
			pos.Files[file.Path].Rows = append(pos.Files[file.Path].Rows, rows)
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return pos
}

// BenchmarkMergeRowTracking updates every 10th row of a 200,000-row table, on a plain
// table and on one with row tracking, with deletion vectors off and on, by key (Merge)
// and by given positions and rows (MergeInParts, as the keyed stages merge). A
// row-tracking MERGE reads the files it rewrites to carry the row ids (no splice of
// the changed columns, no use of the given rows), and writes two columns more.
func BenchmarkMergeRowTracking(b *testing.B) {
	ids := make([]int64, rtBenchChanged)
	for i := range ids {
		ids[i] = int64(i * 10)
	}
	src := benchRecord(ids, "v1", true)
	defer src.Release()
	for _, by := range []string{"key", "positions"} {
		for _, dv := range []bool{false, true} {
			for _, tracked := range []bool{false, true} {
				b.Run(fmt.Sprintf("by=%s/dv=%v/rowTracking=%v", by, dv, tracked), func(b *testing.B) {
					base := rtBenchBase(b, tracked, dv)
					ctx := context.Background()
					var cpu time.Duration
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						st := copyStore(b, base, "", func(string) bool { return true })
						tbl, err := delta.Open(ctx, st, "wh/bench", delta.Options{})
						if err != nil {
							b.Fatal(err)
						}
						opts := delta.MergeOptions{On: []string{"id"},
							WhenMatched: []delta.MergeClause{{Action: delta.MergeUpdate}}, WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}}
						var pos *delta.MergePositions
						if by == "positions" {
							snap, err := tbl.Snapshot(ctx)
							if err != nil {
								b.Fatal(err)
							}
							pos = rtBenchPositions(b, snap, src)
							opts.Tx = tbl.NewTransaction(snap, delta.TxOptions{})
						} else {
							opts.Source = []arrow.RecordBatch{src}
						}
						runtime.GC()
						cpu0 := cpuTime()
						b.StartTimer()
						var res *delta.MergeResult
						if by == "key" {
							res, err = tbl.Merge(ctx, opts)
						} else {
							var mp *delta.MergeInParts
							if mp, err = tbl.NewMergeInParts(opts); err == nil {
								if err = mp.Merge(ctx, []arrow.RecordBatch{src}, pos); err == nil {
									res, err = mp.Commit(ctx)
								}
							}
						}
						b.StopTimer()
						cpu += cpuTime() - cpu0
						if err != nil {
							b.Fatal(err)
						}
						if res.NumTargetRowsUpdated != rtBenchChanged {
							b.Fatalf("updated %d rows", res.NumTargetRowsUpdated)
						}
						b.StartTimer()
					}
					b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
				})
			}
		}
	}
}
