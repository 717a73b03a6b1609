package keyed

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

var sinkSource = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "op", Type: arrow.BinaryTypes.String},
}, nil)

// change is a MERGE source row: an update or delete of the target row at a place, or
// an insert at an order.
type change struct {
	id    string
	v     int
	op    string // U, D or I
	place Place
	ord   int64
}

func sinkRecord(cs []change) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sinkSource)
	defer b.Release()
	for _, c := range cs {
		b.Field(0).(*array.StringBuilder).Append(c.id)
		b.Field(1).(*array.Int64Builder).Append(int64(c.v))
		b.Field(2).(*array.StringBuilder).Append(c.op)
	}
	return b.NewRecordBatch()
}

// give hands the changes of one pass to the sink: the matched ones with the target rows
// (kept, when rows is set), the inserts with their orders.
func give(t *testing.T, s *Sink, cs []change, rows []arrow.RecordBatch, at map[Place]Ref) {
	t.Helper()
	ctx := context.Background()
	var matched, inserts []change
	for _, c := range cs {
		if c.op == "I" {
			inserts = append(inserts, c)
		} else {
			matched = append(matched, c)
		}
	}
	src := sinkRecord(matched)
	defer src.Release()
	places := make([]Place, len(matched))
	kept := Rows{Recs: rows}
	for i, c := range matched {
		places[i] = c.place
		if rows != nil {
			kept.At = append(kept.At, at[c.place])
		}
	}
	if err := s.Matched(ctx, src, kept, places); err != nil {
		t.Fatal(err)
	}
	ins := sinkRecord(inserts)
	defer ins.Release()
	ords := make([]int64, len(inserts))
	for i, c := range inserts {
		ords[i] = c.ord
	}
	if err := s.Inserts(ctx, ins, ords, nil); err != nil {
		t.Fatal(err)
	}
}

// merged is what a user sees after a sink's commit: the rows (with their identity
// values), the change feed of the commit and its counts.
func merged(t *testing.T, tbl *delta.Table, mr *delta.MergeResult) []string {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := range int(rec.NumRows()) {
			out = append(out, fmt.Sprintf("%s=%d sk=%d", rec.Column(0).(*array.String).Value(i), rec.Column(1).(*array.Int64).Value(i), rec.Column(2).(*array.Int64).Value(i)))
		}
	}
	sc.Release()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	rd, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &mr.Version, EndVersion: &mr.Version})
	if err != nil {
		t.Fatal(err)
	}
	var feed []string
	for rd.Next() {
		rec := rd.RecordBatch()
		typ := rec.Column(rec.Schema().FieldIndices(delta.ChangeTypeColumn)[0])
		for i := range int(rec.NumRows()) {
			feed = append(feed, fmt.Sprintf("%s %s=%d sk=%d", typ.ValueStr(i), rec.Column(0).(*array.String).Value(i), rec.Column(1).(*array.Int64).Value(i), rec.Column(2).(*array.Int64).Value(i)))
		}
	}
	rd.Release()
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(feed)
	out = append(out, feed...)
	return append(out, fmt.Sprintf("committed=%v source=%d inserted=%d updated=%d deleted=%d", mr.Committed,
		mr.NumSourceRows, mr.NumTargetRowsInserted, mr.NumTargetRowsUpdated, mr.NumTargetRowsDeleted))
}

// A direct sink (one pass) and a parted one (several passes, each giving its changes in
// any order) commit the same MERGE: the same rows, identity values in the inserts'
// order, change feed and counts; with the target rows kept (deletion vectors: the MERGE
// takes them instead of reading the files) and without.
func TestSinkDirectAndPartedCommitTheSame(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(fmt.Sprintf("deletion vectors=%v", dv), func(t *testing.T) {
			props := map[string]string{delta.PropEnableChangeDataFeed: "true"}
			if dv {
				props[delta.PropEnableDeletionVectors] = "true"
			}
			files := [][][2]any{{{"a", 1}, {"b", 2}, {"c", 3}}, {{"d", 4}, {"e", 5}}, {{"f", 6}}}
			changes := []change{
				{id: "b", v: 20, op: "U"}, {id: "x", v: 100, op: "I", ord: 7},
				{id: "e", op: "D"}, {id: "y", v: 101, op: "I", ord: 3},
				{id: "a", v: 10, op: "U"}, {id: "z", v: 102, op: "I", ord: 5},
				{id: "f", v: 60, op: "U"},
			}
			var results [][]string
			// Direct, direct flushed before its commit, parted.
			for k, passes := range [][][]int{{{0, 1, 2, 3, 4, 5, 6}}, {{0, 1, 2, 3, 4, 5, 6}}, {{6, 1}, {0, 4}, {5, 2, 3}}} {
				tbl, snap := testTable(t, props, files...)
				var rows []arrow.RecordBatch
				at, placeOf := map[Place]Ref{}, map[string]Place{}
				err := NewTarget(snap, TargetSpec{}).Each(context.Background(), 0, Ranges, func(tr TargetRecord) error {
					tr.Rec.Retain()
					rows = append(rows, tr.Rec)
					for i := range int(tr.Rec.NumRows()) {
						at[tr.Place(i)] = Ref{Rec: int32(len(rows) - 1), Row: int32(i)}
						placeOf[tr.Rec.Column(0).(*array.String).Value(i)] = tr.Place(i)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				for i := range changes {
					changes[i].place = placeOf[changes[i].id]
				}
				table, err := delta.ArrowSchema(snap.Schema())
				if err != nil {
					t.Fatal(err)
				}
				tx := tbl.NewTransaction(snap, delta.TxOptions{})
				mp, err := tbl.NewMergeInParts(delta.MergeOptions{
					On:             []string{"id"},
					WhenMatched:    []delta.MergeClause{{Cond: expr.Eq("source.op", "D"), Action: delta.MergeDelete}, {Action: delta.MergeUpdate}},
					WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
					Tx:             tx, Txn: &delta.Txn{AppID: "test", Version: 1},
				})
				if err != nil {
					t.Fatal(err)
				}
				dir, err := NewDir(t.TempDir(), 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				parts := 0
				s, err := NewSink(SinkOptions{Merge: mp, Snap: snap, Source: sinkSource, Table: table,
					Parted: len(passes) > 1, Dir: dir, Limit: 40, OnPart: func(n int) { parts = n }})
				if err != nil {
					t.Fatal(err)
				}
				for _, pass := range passes {
					var cs []change
					for _, i := range pass {
						cs = append(cs, changes[i])
					}
					give(t, s, cs, rows, at)
				}
				if k == 1 {
					if err := s.Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
					late := sinkRecord(changes[1:2])
					if err := s.Inserts(context.Background(), late, []int64{1}, nil); err == nil {
						t.Error("rows added to a direct sink after its flush were taken")
					}
					late.Release()
				}
				mr, err := s.Commit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				s.Release()
				arrowx.ReleaseRecords(rows)
				dir.Remove()
				if len(passes) > 1 && parts < 3 {
					t.Errorf("a parted sink of a 40-byte limit merged in %d parts", parts)
				}
				results = append(results, merged(t, tbl, mr))
			}
			if !slices.Equal(results[0], results[1]) {
				t.Errorf("direct:\n%v\nflushed first:\n%v", results[0], results[1])
			}
			if !slices.Equal(results[0], results[2]) {
				t.Errorf("direct:\n%v\nparted:\n%v", results[0], results[2])
			}
			want := []string{"a=10 sk=1", "b=20 sk=2", "c=3 sk=3", "d=4 sk=4", "f=60 sk=6", "x=100 sk=3", "y=101 sk=1", "z=102 sk=2"} // (the rows written first gave their sk themselves)
			if got := results[0][:len(want)]; !slices.Equal(got, want) {
				t.Errorf("rows %v, want %v (identity values in the inserts' order: y, z, x)", got, want)
			}
		})
	}
}
