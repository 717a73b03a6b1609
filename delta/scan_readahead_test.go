package delta

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A scan that reads ahead returns what a plain one returns, filtered or not, and ends
// with the same stats.
func TestScanReadAheadSameRecords(t *testing.T) {
	st, sch, adds, _ := pruneTable(t)
	for _, where := range []string{"", "id >= 250", "country = 'FR' AND name IS NOT NULL"} {
		t.Run(where, func(t *testing.T) {
			opts := ScanOptions{BatchSize: 37}
			if where != "" {
				p, err := expr.Parse(where)
				if err != nil {
					t.Fatal(err)
				}
				opts.Filter = p
			}
			want, wantStats := scanAll(t, st, "t", sch, []string{"country"}, adds, opts)
			opts.ReadAhead = true
			got, gotStats := scanAll(t, st, "t", sch, []string{"country"}, adds, opts)
			if len(got) == 0 || len(got) != len(want) {
				t.Fatalf("%d records read ahead, %d plainly", len(got), len(want))
			}
			diffRows(t, rowSet(t, got), rowSet(t, want))
			if gotStats != wantStats {
				t.Errorf("stats read ahead %+v, plainly %+v", gotStats, wantStats)
			}
		})
	}
}

// Releasing a scan that reads ahead stops its goroutine; a cancelled context ends it
// with the context's error.
func TestScanReadAheadStops(t *testing.T) {
	st, sch, adds, _ := pruneTable(t)
	checkScanStops(t, st, sch, adds, ScanOptions{BatchSize: 10, ReadAhead: true})
}

// Releasing a picking scan (its row groups read on several goroutines) stops them too.
func TestScanPickStops(t *testing.T) {
	st, sch, adds, _ := pruneTable(t)
	all := func(rec arrow.RecordBatch) ([]int32, error) {
		rows := make([]int32, rec.NumRows())
		for r := range rows {
			rows[r] = int32(r)
		}
		return rows, nil
	}
	for _, ahead := range []bool{false, true} {
		checkScanStops(t, st, sch, adds, ScanOptions{BatchSize: 10, ReadAhead: ahead, FilesOnly: true,
			Pick: []PickStep{{Columns: []string{"id"}, Keep: all}}})
	}
}

// checkScanStops checks that releasing 20 scans made with opts leaves no goroutine
// behind, and that a cancelled context ends a scan with the context's error.
func checkScanStops(t *testing.T, st objectstore.Store, sch *StructType, adds []*Add, opts ScanOptions) {
	t.Helper()
	before := runtime.NumGoroutine()
	for range 20 {
		sc, err := Scan(context.Background(), st, "t", sch, []string{"country"}, adds, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !sc.Next() || sc.RecordBatch().NumRows() != 10 {
			t.Fatalf("first record: %v", sc.Err())
		}
		sc.Release()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after releasing 20 scans (%+v), %d before", n, opts, before)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc, err := Scan(ctx, st, "t", sch, []string{"country"}, adds, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	rows := 0
	for sc.Next() {
		rows += int(sc.RecordBatch().NumRows())
		if rows == 50 {
			cancel()
		}
	}
	if !errors.Is(sc.Err(), context.Canceled) || rows >= 1200 {
		t.Errorf("after cancelling: %d rows, err %v; want context.Canceled before the end", rows, sc.Err())
	}
}

// With FilesOnly a filter only skips files: every row of a file read comes back, and
// Position places each record's rows in their file. Without it, rows are filtered and
// Position does not answer.
func TestScanPositionFilesOnly(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	st := mem.New(mem.Config{})
	var adds []*Add
	for f := range 3 { // file f holds ids f*5000 .. f*5000+4999 in several row groups
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		for i := range 5000 {
			rb.Field(0).(*array.Int64Builder).Append(int64(f*5000 + i))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprint(i))
		}
		rec := rb.NewRecordBatch()
		rb.Release()
		a, err := WriteRecords(ctx, st, "", sch, nil, []arrow.RecordBatch{rec}, WriteOptions{RowGroupSize: 8 << 10})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, a...)
	}
	p, _ := expr.Parse("id >= 6000 AND id < 6100")
	for _, ahead := range []bool{false, true} {
		sc, err := Scan(ctx, st, "", sch, nil, adds, ScanOptions{Filter: p, FilesOnly: true, BatchSize: 777, ReadAhead: ahead})
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for sc.Next() {
			rec := sc.RecordBatch()
			file, first, ok := sc.Position()
			if !ok || file != adds[1] {
				t.Fatalf("Position = %v, %d, %v; want the second file", file, first, ok)
			}
			ids := rec.Column(0).(*array.Int64)
			for i := range ids.Len() {
				if want := 5000 + first + int64(i); ids.Value(i) != want {
					t.Fatalf("row %d of the record at %d: id %d, want %d", i, first, ids.Value(i), want)
				}
			}
			rows += ids.Len()
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if stats := sc.Stats(); rows != 5000 || stats.FilesPruned != 2 || stats.RowGroupsPruned != 0 {
			t.Errorf("read ahead %v: %d rows, stats %+v; want the 5000 rows of the one file that may match", ahead, rows, stats)
		}
		sc.Release()
	}
	sc, err := Scan(ctx, st, "", sch, nil, adds, ScanOptions{Filter: p})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	if !sc.Next() || sc.RecordBatch().NumRows() != 100 {
		t.Fatalf("filtered scan: %v", sc.Err())
	}
	if _, _, ok := sc.Position(); ok {
		t.Error("Position answered for filtered rows")
	}
}
