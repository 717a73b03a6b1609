package delta

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The change lane writes what it is sent, in order; after a batch fails, sending
// returns that failure, later batches are dropped (and released), and stop reports it.
func TestChangeLane(t *testing.T) {
	ctx := context.Background()
	sch, err := ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := Create(ctx, mem.New(mem.Config{}), "t", CreateOptions{Schema: sch, Properties: map[string]string{PropEnableChangeDataFeed: "true"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	ids := func(vals ...int64) arrow.RecordBatch {
		b := array.NewInt64Builder(alloc)
		defer b.Release()
		b.AppendValues(vals, nil)
		a := b.NewArray()
		defer a.Release()
		return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{a}, int64(len(vals)))
	}
	// A null id cannot be written to the non-nullable column: the change writer fails.
	bad := func() arrow.RecordBatch {
		b := array.NewInt64Builder(alloc)
		defer b.Release()
		b.AppendNull()
		a := b.NewArray()
		defer a.Release()
		return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil), []arrow.Array{a}, 1)
	}

	t.Run("writes in order", func(t *testing.T) {
		w, err := newRewriter(snap)
		if err != nil {
			t.Fatal(err)
		}
		m := &merger{w: w}
		m.startChanges(ctx)
		for i := int64(0); i < 20; i++ {
			r := ids(2*i, 2*i+1)
			if err := m.writeChanges(r, ChangeInsert); err != nil {
				t.Fatal(err)
			}
			r.Release()
		}
		if err := m.stopChanges(); err != nil {
			t.Fatal(err)
		}
		if m.changeRowsSent != 40 || w.cdcRows != 40 {
			t.Errorf("sent %d, written %d change rows; want 40", m.changeRowsSent, w.cdcRows)
		}
		_, cdcs, err := w.finish(ctx)
		if err != nil || len(cdcs) != 1 {
			t.Fatalf("finish: %d change files, %v", len(cdcs), err)
		}
		recs := readChangeFile(t, snap, cdcs[0])
		var got []int64
		for _, r := range recs {
			got = append(got, r.Column(0).(*array.Int64).Int64Values()...)
			r.Release()
		}
		for i, v := range got {
			if v != int64(i) {
				t.Fatalf("change rows out of order: %v", got)
			}
		}
	})

	t.Run("failure", func(t *testing.T) {
		w, err := newRewriter(snap)
		if err != nil {
			t.Fatal(err)
		}
		defer w.abort()
		m := &merger{w: w}
		m.startChanges(ctx)
		b := bad()
		if err := m.writeChanges(b, ChangeInsert); err != nil {
			t.Fatalf("first send: %v (the failure comes later)", err)
		}
		b.Release()
		var sendErr error
		for i := 0; i < 100 && sendErr == nil; i++ { // until the lane has failed
			r := ids(1)
			sendErr = m.writeChanges(r, ChangeInsert)
			r.Release()
		}
		if sendErr == nil {
			t.Error("sending never reported the failed batch")
		}
		if err := m.stopChanges(); err == nil {
			t.Error("stop: no error after a failed batch")
		}
	})
}

// readChangeFile reads a change data file of snap's table whole.
func readChangeFile(t *testing.T, snap *Snapshot, c *CDC) []arrow.RecordBatch {
	t.Helper()
	cs := ChangeDataSchema(snap.Schema())
	sc, err := Scan(context.Background(), snap.Table().Store(), snap.Table().Root(), cs, nil, []*Add{{Path: c.Path, Size: c.Size}}, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	recs, err := ReadAll(sc)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
