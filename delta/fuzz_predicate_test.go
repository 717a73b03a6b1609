package delta

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

const fuzzPredicateSchema = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"d","type":"date","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"amt","type":"decimal(10,2)","nullable":true,"metadata":{}},
 {"name":"x","type":"double","nullable":true,"metadata":{}},
 {"name":"b","type":"boolean","nullable":true,"metadata":{}},
 {"name":"n","type":"integer","nullable":true,"metadata":{}},
 {"name":"p","type":"string","nullable":true,"metadata":{}}]}`

// predicateTable writes 4 files (partitioned by p, several row groups each) whose
// values sit where pruning is easy to get wrong: sub-millisecond timestamps (stats keep
// milliseconds), strings longer than the stats prefix, NaN and infinities, nulls.
func predicateTable(t testing.TB) *Snapshot {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	sch := mustSchema(t, fuzzPredicateSchema)
	tbl, err := Create(ctx, st, "t", CreateOptions{Schema: sch, PartitionColumns: []string{"p"}}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	asch, err := ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	doubles := []float64{0, -0.0, 1.5, -2.25, math.NaN(), math.Inf(1), math.Inf(-1), 1e308, 5e-324}
	b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	defer b.Release()
	for i := range 400 {
		b.Field(0).(*array.Int64Builder).Append(int64(i*7%400) - 100)
		if i%11 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%c%s-%03d", 'a'+rune(i%5), strings.Repeat("z", i%3*20), i))
		}
		ts := base.Add(time.Duration(i) * 37 * time.Hour).Add(time.Duration(i%4) * 250 * time.Microsecond)
		if i%13 == 0 {
			b.Field(2).AppendNull()
			b.Field(3).AppendNull()
		} else {
			b.Field(2).(*array.Date32Builder).Append(arrow.Date32FromTime(ts))
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
		}
		b.Field(4).(*array.Decimal128Builder).Append(decimalOf(int64(i*131%2001) - 1000))
		if i%17 == 0 {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.Float64Builder).Append(doubles[i%len(doubles)] * float64(1+i%3))
		}
		if i%7 == 0 {
			b.Field(6).AppendNull()
		} else {
			b.Field(6).(*array.BooleanBuilder).Append(i%3 == 0)
		}
		if i%5 == 0 {
			b.Field(7).AppendNull()
		} else {
			b.Field(7).(*array.Int32Builder).Append(int32(i%9 - 4))
		}
		if i%9 == 0 {
			b.Field(8).AppendNull()
		} else {
			b.Field(8).(*array.StringBuilder).Append([]string{"a", "b", "c"}[i%3])
		}
		if i%100 == 99 {
			rec := b.NewRecordBatch()
			adds, err := WriteRecords(ctx, st, "t", sch, []string{"p"}, []arrow.RecordBatch{rec}, WriteOptions{RowGroupSize: 2 << 10})
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tx := tbl.NewTransaction(snap, TxOptions{})
			tx.AddFiles(adds...)
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func rowStrings(rec arrow.RecordBatch, rows []int32) []string {
	var out []string
	for _, r := range rows {
		var vals []string
		for _, c := range rec.Columns() {
			if c.IsNull(int(r)) {
				vals = append(vals, "null")
			} else {
				vals = append(vals, c.ValueStr(int(r)))
			}
		}
		out = append(out, strings.Join(vals, "|"))
	}
	return out
}

func allRows(n int64) []int32 {
	rows := make([]int32, n)
	for i := range rows {
		rows[i] = int32(i)
	}
	return rows
}

// FuzzParsePredicate parses the input as a --where predicate. What parses prints back
// as text that parses to the same predicate; bound to a table, a scan with it (which
// prunes files and row groups by stats) returns exactly the rows the predicate holds
// for when evaluated on every row.
func FuzzParsePredicate(f *testing.F) {
	snap := predicateTable(f)
	ctx := context.Background()
	sc, err := snap.Scan(ctx, ScanOptions{})
	if err != nil {
		f.Fatal(err)
	}
	every, err := ReadAll(sc)
	sc.Release()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, where string) {
		if len(where) > 4096 {
			return
		}
		testenv.MaxAlloc(t, fuzzAllocLimit, func() {
			p, err := expr.Parse(where)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "parse predicate") {
					t.Fatalf("expr.Parse(%q): error %q does not say what failed", where, err)
				}
				return
			}
			text := p.String()
			p2, err := expr.Parse(text)
			if err != nil {
				t.Fatalf("%q prints as %q, which does not parse: %v", where, text, err)
			}
			if again := p2.String(); again != text {
				t.Fatalf("%q prints as %q, which prints as %q", where, text, again)
			}
			bound, bindErr := bindPredicate(p, snap.Schema())
			sc, err := snap.Scan(ctx, ScanOptions{Filter: p, BatchSize: 37})
			if (err == nil) != (bindErr == nil) {
				t.Fatalf("%q: Scan error %v, bind error %v", where, err, bindErr)
			}
			if err != nil {
				return
			}
			var got []string
			for sc.Next() {
				rec := sc.RecordBatch()
				got = append(got, rowStrings(rec, allRows(rec.NumRows()))...)
			}
			scanErr := sc.Err()
			sc.Release()
			var want []string
			var evalErr error
			for _, rec := range every {
				rows, all, err := bound.KeptRows(rec)
				if err != nil {
					evalErr = err
					break
				}
				if all {
					rows = allRows(rec.NumRows())
				}
				want = append(want, rowStrings(rec, rows)...)
			}
			if (scanErr == nil) != (evalErr == nil) {
				t.Fatalf("%q: scan error %v, evaluation error %v", where, scanErr, evalErr)
			}
			slices.Sort(got)
			slices.Sort(want)
			if scanErr == nil && !slices.Equal(got, want) {
				t.Fatalf("%q: the scan returns %d rows, evaluating every row gives %d\nonly in scan: %q\nonly in evaluation: %q",
					where, len(got), len(want), minus(got, want), minus(want, got))
			}
		})
	})
}

// minus returns the elements of a (sorted) not in b (sorted), at most 5.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found && len(out) < 5 {
			out = append(out, x)
		}
	}
	return out
}
