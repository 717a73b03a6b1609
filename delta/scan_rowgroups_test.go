package delta_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A filter prunes row groups of files with deletion vectors too, and with FilesOnly and
// RowGroups a scan returns every row of the row groups it reads with its place in its
// file: the index among the rows the vector keeps, as a scan of the whole file gives.
// ScanWithRowIDs, which prunes so, gives a filter's rows the row ids a whole read does.
func TestScanRowGroupsWithDeletionVectors(t *testing.T) {
	ctx := context.Background()
	sch, err := delta.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	asch, _ := delta.ArrowSchema(sch)
	c := newTestClock()
	tbl, err := delta.Create(ctx, mem.New(mem.Config{Now: c.Now}), "warehouse/t", delta.CreateOptions{
		Schema: sch, Properties: map[string]string{delta.PropEnableDeletionVectors: "true", delta.PropEnableRowTracking: "true"}, Name: "t",
	}, testOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000              // one file of ids 0..n-1 in many row groups
	var recs []arrow.RecordBatch // (a row group closes between records)
	for lo := 0; lo < n; lo += 1000 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		for i := lo; i < lo+1000; i++ {
			rb.Field(0).(*array.Int64Builder).Append(int64(i))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprint("row ", i))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: recs, Write: delta.WriteOptions{RowGroupSize: 4 << 10}}); err != nil {
		t.Fatal(err)
	}
	// A deletion vector over rows all through the file.
	rng := rand.New(rand.NewPCG(7, 9))
	deleted := map[int64]bool{}
	var ids []any
	for range 2000 {
		id := rng.Int64N(n)
		deleted[id] = true
		ids = append(ids, id)
	}
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.In("id", ids...)}); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Files()) != 1 || snap.Files()[0].DeletionVector == nil {
		t.Fatalf("want one file with a deletion vector, have %d files", len(snap.Files()))
	}
	// Each id's place: its index among the rows the vector keeps.
	place := map[int64]int64{}
	for id := int64(0); id < n; id++ {
		if !deleted[id] {
			place[id] = int64(len(place))
		}
	}
	// Two ranges far apart: the row groups between them are pruned.
	where, err := expr.Parse("(id >= 3000 AND id < 3100) OR (id >= 15000 AND id < 15050)")
	if err != nil {
		t.Fatal(err)
	}
	inRange := func(id int64) bool { return id >= 3000 && id < 3100 || id >= 15000 && id < 15050 }

	for _, ahead := range []bool{false, true} {
		sc, err := snap.Scan(ctx, delta.ScanOptions{Filter: where, FilesOnly: true, RowGroups: true, BatchSize: 333, ReadAhead: ahead})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		for sc.Next() {
			r := sc.RecordBatch()
			_, first, ok := sc.Position()
			if !ok {
				t.Fatal("Position did not answer with FilesOnly and RowGroups")
			}
			col := r.Column(0).(*array.Int64)
			for i := range col.Len() {
				id := col.Value(i)
				if deleted[id] {
					t.Fatalf("id %d, deleted, was returned", id)
				}
				if want := place[id]; first+int64(i) != want {
					t.Fatalf("read ahead %v: id %d at place %d, want %d", ahead, id, first+int64(i), want)
				}
				seen[id] = true
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		st := sc.Stats()
		sc.Release()
		if st.RowGroupsPruned == 0 || len(seen) >= len(place)/2 {
			t.Fatalf("read ahead %v: %d rows read, %d row groups pruned; want most row groups pruned", ahead, len(seen), st.RowGroupsPruned)
		}
		for id := range place {
			if inRange(id) && !seen[id] {
				t.Fatalf("read ahead %v: id %d, in the filter's ranges, was not returned", ahead, id)
			}
		}
	}

	// Picked, the row groups read on several goroutines: the rows the steps keep of
	// those a whole read returns, each at its place, in file order.
	keepBy := func(col string, keep func(arrow.Array, int) bool) delta.PickStep {
		return delta.PickStep{Columns: []string{col}, Keep: func(rec arrow.RecordBatch) ([]int32, error) {
			c := rec.Column(rec.Schema().FieldIndices(col)[0])
			var rows []int32
			for r := range c.Len() {
				if keep(c, r) {
					rows = append(rows, int32(r))
				}
			}
			return rows, nil
		}}
	}
	byID := func(c arrow.Array, r int) bool { return c.(*array.Int64).Value(r)%3 != 0 }
	byS := func(c arrow.Array, r int) bool { v := c.(*array.String).Value(r); return v[len(v)-1] != '7' }
	for _, filter := range []expr.Predicate{nil, where} {
		for _, ahead := range []bool{false, true} {
			var want []int64
			opts := delta.ScanOptions{Filter: filter, FilesOnly: true, RowGroups: true, BatchSize: 333, ReadAhead: ahead}
			sc, err := snap.Scan(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			for sc.Next() {
				r := sc.RecordBatch()
				for i := range int(r.NumRows()) {
					if byID(r.Column(0), i) && byS(r.Column(1), i) {
						want = append(want, r.Column(0).(*array.Int64).Value(i))
					}
				}
			}
			sc.Release()
			opts.Pick = []delta.PickStep{keepBy("id", byID), keepBy("s", byS)}
			if sc, err = snap.Scan(ctx, opts); err != nil {
				t.Fatal(err)
			}
			var got []int64
			for sc.Next() {
				r, rows := sc.RecordBatch(), sc.Rows()
				for i := range int(r.NumRows()) {
					id := r.Column(0).(*array.Int64).Value(i)
					if rows[i] != place[id] || r.Column(1).(*array.String).Value(i) != fmt.Sprint("row ", id) {
						t.Fatalf("picked id %d (%s) at place %d, want %d", id, r.Column(1).(*array.String).Value(i), rows[i], place[id])
					}
					got = append(got, id)
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			sc.Release()
			if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("filter %v, read ahead %v: picked %d ids, want %d", filter != nil, ahead, len(got), len(want))
			}
		}
	}

	// Without FilesOnly the filter's rows exactly, the vector's rows left out.
	sc, err := snap.Scan(ctx, delta.ScanOptions{Filter: where, BatchSize: 333})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var got int
	for sc.Next() {
		col := sc.RecordBatch().Column(0).(*array.Int64)
		for i := range col.Len() {
			if id := col.Value(i); deleted[id] || !inRange(id) {
				t.Fatalf("filtered scan returned id %d", id)
			}
			got++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	want := 0
	for id := range place {
		if inRange(id) {
			want++
		}
	}
	if st := sc.Stats(); got != want || st.RowGroupsPruned == 0 {
		t.Fatalf("filtered scan: %d rows (want %d), %d row groups pruned", got, want, st.RowGroupsPruned)
	}
	// Row ids: the filtered read's are the whole read's.
	rowIDs := func(where expr.Predicate) map[int64]int64 {
		t.Helper()
		rdr, err := snap.ScanWithRowIDs(ctx, delta.ScanOptions{Columns: []string{"id"}, Filter: where, BatchSize: 333})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		out := map[int64]int64{}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			ids, rid := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
			for i := range ids.Len() {
				out[ids.Value(i)] = rid.Value(i)
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	all, some := rowIDs(nil), rowIDs(where)
	if len(some) != want {
		t.Fatalf("row ids of the filter's rows: %d rows, want %d", len(some), want)
	}
	for id, rid := range some {
		if all[id] != rid {
			t.Fatalf("id %d: row id %d filtered, %d read whole", id, rid, all[id])
		}
	}
}
