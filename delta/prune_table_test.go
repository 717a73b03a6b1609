package delta

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The tables of the pruning property test (prune_property_test.go): random rows in
// files whose statistics have the shapes other writers give them.

const skipPropSchema = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"f","type":"float","nullable":true,"metadata":{}},
 {"name":"d","type":"double","nullable":true,"metadata":{}},
 {"name":"dec","type":"decimal(20,4)","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"mark","type":"integer","nullable":true,"metadata":{}}]}`

// pruneRow is one generated row; a nil pointer is null.
type pruneRow struct {
	id  int64
	f   *float32
	d   *float64
	dec *int64 // unscaled, scale 4
	ts  *int64 // microseconds
	s   *string
}

var (
	pruneFloats = []float32{0.234, 0.1, -0.5, 1.0 / 3, 100.25, -7.3, 0, 3.4e10, 1e-7, 16777217}
	pruneDouble = []float64{0.1, 0.2, 0.30000000000000004, -1.5, 1e300, 5e-324, 2.5, 1.0 / 3, -0.0}
	pruneDecs   = []int64{123456789012345678, 123456789012345679, 123456789012345677, -1, 0, 5, 999999999999999999, -123456789012345678, 10000}
	pruneTS     = []int64{-1_000_500, -1, 0, 999, 1000, 1001, 1_700_000_000_123_456, 1_700_000_000_123_999, 1_700_000_000_124_000, -86_400_000_000_321}
	pruneStrs   = []string{"a", "abc", "abcdefghij", "abcdefghijk", "abd", "b", "zz", "é", "ab\u00ff",
		strings.Repeat("x", 40) + "a", strings.Repeat("x", 40) + "b", strings.Repeat("x", 33), ""}
)

func oneOf[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// genPruneRows makes the rows of one file: each column draws from a few values of its
// pool, so files differ in range and pruning has something to skip.
func genPruneRows(r *rand.Rand, nextID *int64) []pruneRow {
	sub := func(n int) []int {
		k := 1 + r.IntN(3)
		out := make([]int, k)
		for i := range out {
			out[i] = r.IntN(n)
		}
		return out
	}
	fi, di, ci, ti, si := sub(len(pruneFloats)), sub(len(pruneDouble)), sub(len(pruneDecs)), sub(len(pruneTS)), sub(len(pruneStrs))
	rows := make([]pruneRow, 5+r.IntN(30))
	for i := range rows {
		*nextID++
		row := pruneRow{id: *nextID}
		if r.IntN(8) > 0 {
			v := pruneFloats[oneOf(r, fi)]
			row.f = &v
		}
		if r.IntN(8) > 0 {
			v := pruneDouble[oneOf(r, di)]
			row.d = &v
		}
		if r.IntN(8) > 0 {
			v := pruneDecs[oneOf(r, ci)]
			row.dec = &v
		}
		if r.IntN(8) > 0 {
			v := pruneTS[oneOf(r, ti)]
			row.ts = &v
		}
		if r.IntN(8) > 0 {
			v := pruneStrs[oneOf(r, si)]
			row.s = &v
		}
		rows[i] = row
	}
	return rows
}

// sortedPruneRows is a copy of rows in the order of a random column (nulls first).
func sortedPruneRows(r *rand.Rand, rows []pruneRow) []pruneRow {
	out := slices.Clone(rows)
	col := r.IntN(5)
	slices.SortStableFunc(out, func(a, b pruneRow) int {
		switch col {
		case 0:
			return cmpPtr(a.f, b.f)
		case 1:
			return cmpPtr(a.d, b.d)
		case 2:
			return cmpPtr(a.dec, b.dec)
		case 3:
			return cmpPtr(a.ts, b.ts)
		}
		return cmpPtr(a.s, b.s)
	})
	return out
}

func cmpPtr[T cmp.Ordered](a, b *T) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}

func pruneRecord(t testing.TB, asch *arrow.Schema, rows []pruneRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	defer b.Release()
	for _, row := range rows {
		b.Field(0).(*array.Int64Builder).Append(row.id)
		if row.f == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Float32Builder).Append(*row.f)
		}
		if row.d == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(*row.d)
		}
		if row.dec == nil {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Decimal128Builder).Append(decimal128.FromI64(*row.dec))
		}
		if row.ts == nil {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(*row.ts))
		}
		if row.s == nil {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.StringBuilder).Append(*row.s)
		}
		b.Field(6).AppendNull()
	}
	return b.NewRecordBatch()
}

// foreignStats rewrites a stats string the way other writers shape it.
func foreignStats(t testing.TB, r *rand.Rand, stats string) string {
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(stats))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("stats %s: %v", stats, err)
	}
	for _, side := range []string{"minValues", "maxValues"} {
		vals, _ := m[side].(map[string]any)
		// In column order: the draws below must not follow the map's random order, or a
		// seed would not make the same table twice.
		for _, col := range slices.Sorted(maps.Keys(vals)) {
			v := vals[col]
			text := fmt.Sprint(v)
			switch col {
			case "f": // the float32 printed as the double it widens to
				if r.IntN(2) == 0 {
					f, _ := strconv.ParseFloat(text, 32)
					vals[col] = json.Number(strconv.FormatFloat(f, 'g', -1, 64))
				}
			case "dec": // through a double
				if r.IntN(2) == 0 {
					rat, _ := new(big.Rat).SetString(text)
					f, _ := rat.Float64()
					vals[col] = json.Number(strconv.FormatFloat(f, 'g', -1, 64))
				}
			case "ts": // milliseconds, truncated toward zero
				if r.IntN(2) == 0 {
					ts, err := time.Parse(time.RFC3339Nano, text)
					if err != nil {
						t.Fatalf("stat %s: %v", text, err)
					}
					us := ts.UnixMicro()
					vals[col] = time.UnixMilli(us / 1000).UTC().Format("2006-01-02T15:04:05.000Z07:00")
				}
			case "s": // a prefix, with no tie-breaker after it
				if r.IntN(2) == 0 {
					s := v.(string)
					runes := []rune(s)
					if n := 1 + r.IntN(4); n < len(runes) {
						vals[col] = string(runes[:n])
					}
				}
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// skipPropTable writes a table of several files (each with foreign-shaped stats) into a
// new store and returns the store and the rows.
func skipPropTable(t testing.TB, r *rand.Rand) (objectstore.Store, []pruneRow) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	sch := mustSchema(t, skipPropSchema)
	var props map[string]string
	if r.IntN(2) == 0 {
		// DELETE, UPDATE and MERGE mark rows: a later scan skips row groups of files
		// whose vectors index rows by their place in the whole file.
		props = map[string]string{PropEnableDeletionVectors: "true"}
	}
	tbl, err := Create(ctx, st, "t", CreateOptions{Schema: sch, Properties: props}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	asch, err := ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	var all []pruneRow
	var nextID int64
	for range 3 + r.IntN(4) {
		rows := genPruneRows(r, &nextID)
		all = append(all, rows...)
		if r.IntN(2) == 0 {
			// In the order of one column (ids stay as drawn), so that a file's row
			// groups hold ranges apart, as a table laid out by that column does.
			rows = sortedPruneRows(r, rows)
		}
		rec := pruneRecord(t, asch, rows)
		// Written as records of a few rows each: a row group ends at a record once it
		// holds 512 bytes, so a file has several, each with its own statistics.
		var recs []arrow.RecordBatch
		for lo := int64(0); lo < rec.NumRows(); {
			hi := min(rec.NumRows(), lo+1+int64(r.IntN(8)))
			recs = append(recs, rec.NewSlice(lo, hi))
			lo = hi
		}
		adds, err := WriteRecords(ctx, st, "t", sch, nil, recs, WriteOptions{RowGroupSize: 1 << 9})
		for _, s := range recs {
			s.Release()
		}
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range adds {
			a.Stats = foreignStats(t, r, a.Stats)
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
	return st, all
}
