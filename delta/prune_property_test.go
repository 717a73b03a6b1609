package delta

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
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

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The pruning property: for random tables whose statistics have the shapes other writers
// give them (float stats printed as doubles, decimals of more than 15 digits printed
// through a double, timestamps truncated to milliseconds toward zero, string maxima cut
// without a tie-breaker) and random predicates, a scan with the predicate (which skips
// files and row groups by those statistics) returns exactly the rows a reference
// evaluation in this test selects from the generated rows; DELETE, UPDATE and MERGE
// (by a clause condition and by keys of every inexact type) change exactly those rows.

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
		for col, v := range vals {
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
	tbl, err := Create(ctx, st, "t", CreateOptions{Schema: sch}, quiet)
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
		rec := pruneRecord(t, asch, rows)
		adds, err := WriteRecords(ctx, st, "t", sch, nil, []arrow.RecordBatch{rec}, WriteOptions{RowGroupSize: 1 << 9})
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

// pruneLit is a literal: its SQL text and the value the reference compares with.
type pruneLit struct {
	text string
	f    float64  // f and d columns: the double nearest the text
	rat  *big.Rat // dec
	ts   int64    // ts
	s    string   // s
}

func pruneLiteral(r *rand.Rand, col string) pruneLit {
	switch col {
	case "f", "d":
		var x float64
		if col == "f" {
			f := oneOf(r, pruneFloats)
			switch r.IntN(4) {
			case 0:
				x, _ = strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64) // "0.234"
			case 1:
				x = float64(f) // 0.23399999737739563
			case 2:
				x = float64(math.Nextafter32(f, float32(math.Inf(1))))
			default:
				x = float64(math.Nextafter32(f, float32(math.Inf(-1))))
			}
		} else {
			x = oneOf(r, pruneDouble)
			switch r.IntN(4) {
			case 2:
				x = math.Nextafter(x, math.Inf(1))
			case 3:
				x = math.Nextafter(x, math.Inf(-1))
			}
		}
		text := strconv.FormatFloat(x, 'g', -1, 64)
		if strings.ContainsAny(text, "e") {
			text = strconv.FormatFloat(x, 'f', -1, 64)
		}
		v, _ := strconv.ParseFloat(text, 64)
		return pruneLit{text: text, f: v}
	case "dec":
		u := oneOf(r, pruneDecs)
		rat := new(big.Rat).SetFrac(big.NewInt(u), big.NewInt(10000))
		if r.IntN(3) == 0 { // between two values of the scale
			rat.Add(rat, big.NewRat(int64(r.IntN(3)-1), 20000))
		}
		return pruneLit{text: rat.FloatString(5), rat: rat}
	case "ts":
		us := oneOf(r, pruneTS) + []int64{0, 0, 1, -1, 1000, -1000}[r.IntN(6)]
		return pruneLit{text: "'" + time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z") + "'", ts: us}
	}
	s := oneOf(r, pruneStrs)
	switch r.IntN(4) {
	case 2:
		if rs := []rune(s); len(rs) > 0 {
			s = string(rs[:len(rs)-1])
		}
	case 3:
		s += "a"
	}
	return pruneLit{text: "'" + strings.ReplaceAll(s, "'", "''") + "'", s: s}
}

// prunePred is a generated predicate: SQL text and a reference evaluation.
type prunePred struct {
	text string
	eval func(row pruneRow) expr.Truth // expr.True, expr.False, expr.Unknown
}

func genPrunePred(r *rand.Rand, depth int) prunePred {
	if depth > 0 && r.IntN(5) < 2 {
		n := 2 + r.IntN(2)
		terms := make([]prunePred, n)
		texts := make([]string, n)
		for i := range terms {
			terms[i] = genPrunePred(r, depth-1)
			texts[i] = "(" + terms[i].text + ")"
		}
		and := r.IntN(2) == 0
		sep := " OR "
		if and {
			sep = " AND "
		}
		k := refOr
		if and {
			k = refAnd
		}
		return prunePred{text: strings.Join(texts, sep), eval: func(row pruneRow) expr.Truth {
			acc := terms[0].eval(row)
			for _, t := range terms[1:] {
				acc = refCombine(k, acc, t.eval(row))
			}
			return acc
		}}
	}
	col := oneOf(r, []string{"f", "d", "dec", "ts", "s"})
	cmp := pruneCompare(col)
	switch r.IntN(10) {
	case 0:
		return prunePred{text: col + " IS NULL", eval: func(row pruneRow) expr.Truth { return refTruth(cmp(row, pruneLit{}) == nil) }}
	case 1:
		return prunePred{text: col + " IS NOT NULL", eval: func(row pruneRow) expr.Truth { return refTruth(cmp(row, pruneLit{}) != nil) }}
	case 2, 3:
		lits := make([]pruneLit, 1+r.IntN(3))
		texts := make([]string, len(lits))
		for i := range lits {
			lits[i] = pruneLiteral(r, col)
			texts[i] = lits[i].text
		}
		return prunePred{text: col + " IN (" + strings.Join(texts, ", ") + ")", eval: func(row pruneRow) expr.Truth {
			for _, l := range lits {
				c := cmp(row, l)
				if c == nil {
					return expr.Unknown
				}
				if *c == 0 {
					return expr.True
				}
			}
			return expr.False
		}}
	}
	op := oneOf(r, []expr.Op{expr.OpEq, expr.OpNe, expr.OpLt, expr.OpLe, expr.OpGt, expr.OpGe})
	lit := pruneLiteral(r, col)
	return prunePred{text: col + " " + string(op) + " " + lit.text, eval: func(row pruneRow) expr.Truth {
		c := cmp(row, lit)
		if c == nil {
			return expr.Unknown
		}
		return refCompare(op, *c)
	}}
}

// pruneCompare returns the reference comparison of a row's column with a literal (nil
// when the row's value is null): floats widened to double, as Spark compares a float
// column with a decimal literal; decimals exactly; timestamps by microsecond; strings by
// bytes.
func pruneCompare(col string) func(row pruneRow, l pruneLit) *int {
	res := func(c int) *int { return &c }
	return func(row pruneRow, l pruneLit) *int {
		switch col {
		case "f":
			if row.f == nil {
				return nil
			}
			return res(refCmpFloat(float64(*row.f), l.f))
		case "d":
			if row.d == nil {
				return nil
			}
			return res(refCmpFloat(*row.d, l.f))
		case "dec":
			if row.dec == nil {
				return nil
			}
			if l.rat == nil {
				return res(0)
			}
			return res(new(big.Rat).SetFrac(big.NewInt(*row.dec), big.NewInt(10000)).Cmp(l.rat))
		case "ts":
			if row.ts == nil {
				return nil
			}
			return res(cmp.Compare(*row.ts, l.ts))
		}
		if row.s == nil {
			return nil
		}
		return res(strings.Compare(*row.s, l.s))
	}
}

// tableIDs reads the ids (and marks) of the table's rows, optionally filtered.
func tableIDs(t testing.TB, st objectstore.Store, where expr.Predicate) (ids []int64, marked []int64) {
	ids, marked, _ = tableScan(t, st, where)
	return ids, marked
}

// tableScan also returns how many files (and row groups) the scan skipped.
func tableScan(t testing.TB, st objectstore.Store, where expr.Predicate) (ids []int64, marked []int64, skipped int) {
	ctx := context.Background()
	tbl, err := Open(ctx, st, "t", quiet)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, ScanOptions{Filter: where, Columns: []string{"id", "mark"}, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ReadAll(sc)
	stats := sc.Stats()
	skipped = stats.FilesPruned + stats.RowGroupsPruned
	sc.Release()
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		idc, mk := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int32)
		for i := range int(rec.NumRows()) {
			ids = append(ids, idc.Value(i))
			if mk.IsValid(i) && mk.Value(i) == 1 {
				marked = append(marked, idc.Value(i))
			}
		}
		rec.Release()
	}
	slices.Sort(ids)
	slices.Sort(marked)
	return ids, marked, skipped
}

func idsWhere(rows []pruneRow, keep func(pruneRow) bool) []int64 {
	var out []int64
	for _, row := range rows {
		if keep(row) {
			out = append(out, row.id)
		}
	}
	slices.Sort(out)
	return out
}

func copyStore(t testing.TB, from objectstore.Store) objectstore.Store {
	ctx := context.Background()
	to := mem.New(mem.Config{})
	infos, err := from.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		b, err := readAllKey(ctx, from, info.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := to.Put(ctx, info.Key, strings.NewReader(string(b)), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func readAllKey(ctx context.Context, st objectstore.Store, key string) ([]byte, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := rc.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return []byte(sb.String()), nil
}

func TestPruningMatchesReference(t *testing.T) {
	const tables, predsPerTable, dmlPerTable = 30, 40, 2
	ctx := context.Background()
	sch := mustSchema(t, skipPropSchema)
	asch, err := ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	var scans, pruned, dmls int
	for ti := range tables {
		r := rand.New(rand.NewPCG(uint64(ti), 0x9e3779b97f4a7c15))
		st, rows := skipPropTable(t, r)
		for pi := range predsPerTable {
			gp := genPrunePred(r, 2)
			p, err := expr.Parse(gp.text)
			if err != nil {
				t.Fatalf("table %d: %q does not parse: %v", ti, gp.text, err)
			}
			want := idsWhere(rows, func(row pruneRow) bool { return gp.eval(row) == expr.True })
			got, _, skipped := tableScan(t, st, p)
			scans++
			pruned += skipped
			if !slices.Equal(got, want) {
				t.Fatalf("table %d, predicate %d: table show --where %q returned ids %v, want %v", ti, pi, gp.text, got, want)
			}
			if pi >= dmlPerTable {
				continue
			}
			// DELETE, UPDATE and MERGE with the same condition, each on a copy.
			keepWant := idsWhere(rows, func(row pruneRow) bool { return gp.eval(row) != expr.True })
			allIDs := idsWhere(rows, func(pruneRow) bool { return true })

			del := copyStore(t, st)
			tbl, err := Open(ctx, del, "t", quiet)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Delete(ctx, DeleteOptions{Where: p}); err != nil {
				t.Fatalf("DELETE WHERE %s: %v", gp.text, err)
			}
			if got, _ := tableIDs(t, del, nil); !slices.Equal(got, keepWant) {
				t.Fatalf("table %d: DELETE WHERE %s left ids %v, want %v", ti, gp.text, got, keepWant)
			}

			upd := copyStore(t, st)
			if tbl, err = Open(ctx, upd, "t", quiet); err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Update(ctx, UpdateOptions{Where: p, Set: map[string]any{"mark": int32(1)}}); err != nil {
				t.Fatalf("UPDATE WHERE %s: %v", gp.text, err)
			}
			if got, marked := tableIDs(t, upd, nil); !slices.Equal(got, allIDs) || !slices.Equal(marked, want) {
				t.Fatalf("table %d: UPDATE SET mark = 1 WHERE %s marked %v (rows %v), want %v", ti, gp.text, marked, got, want)
			}

			// MERGE ... WHEN MATCHED AND target.<cond> THEN DELETE, every row matched.
			mp, err := expr.Parse(prefixColumns(gp.text))
			if err != nil {
				t.Fatalf("%q: %v", prefixColumns(gp.text), err)
			}
			mrg := copyStore(t, st)
			if tbl, err = Open(ctx, mrg, "t", quiet); err != nil {
				t.Fatal(err)
			}
			src := pruneRecord(t, asch, rows)
			_, err = tbl.Merge(ctx, MergeOptions{Source: []arrow.RecordBatch{src}, On: []string{"id"},
				WhenMatched: []MergeClause{{Cond: mp, Action: MergeDelete}}})
			src.Release()
			if err != nil {
				t.Fatalf("MERGE WHEN MATCHED AND %s THEN DELETE: %v", mp, err)
			}
			if got, _ := tableIDs(t, mrg, nil); !slices.Equal(got, keepWant) {
				t.Fatalf("table %d: MERGE WHEN MATCHED AND %s THEN DELETE left ids %v, want %v", ti, mp, got, keepWant)
			}
			dmls += 3
		}
		// MERGE ON each inexact column: the source holds some of the table's key values
		// (and some it lacks); matched rows are deleted.
		for _, key := range []string{"f", "d", "dec", "ts", "s"} {
			cmp := pruneCompare(key)
			var src []pruneRow
			for _, row := range rows {
				if r.IntN(6) != 0 || cmp(row, pruneLit{}) == nil {
					continue
				}
				dup := false
				for _, s := range src {
					if pruneKeyEqual(key, s, row) {
						dup = true
						break
					}
				}
				if !dup {
					src = append(src, row)
				}
			}
			extra := genPruneRows(r, new(int64))
			for _, row := range extra {
				if cmp(row, pruneLit{}) == nil {
					continue
				}
				dup := false
				for _, s := range src {
					if pruneKeyEqual(key, s, row) {
						dup = true
						break
					}
				}
				if !dup {
					src = append(src, row)
				}
			}
			want := idsWhere(rows, func(row pruneRow) bool {
				for _, s := range src {
					if pruneKeyEqual(key, s, row) {
						return false
					}
				}
				return true
			})
			mrg := copyStore(t, st)
			tbl, err := Open(ctx, mrg, "t", quiet)
			if err != nil {
				t.Fatal(err)
			}
			rec := pruneRecord(t, asch, src)
			_, err = tbl.Merge(ctx, MergeOptions{Source: []arrow.RecordBatch{rec}, On: []string{key},
				WhenMatched: []MergeClause{{Action: MergeDelete}}})
			rec.Release()
			if err != nil {
				t.Fatalf("MERGE ON %s: %v", key, err)
			}
			if got, _ := tableIDs(t, mrg, nil); !slices.Equal(got, want) {
				t.Fatalf("table %d: MERGE ON %s WHEN MATCHED THEN DELETE left ids %v, want %v", ti, key, got, want)
			}
			dmls++
		}
	}
	if scans < 1000 || pruned < scans/4 {
		t.Fatalf("%d predicates checked, %d files or row groups skipped: the test no longer exercises pruning", scans, pruned)
	}
	t.Logf("%d predicates scanned (%d files or row groups skipped), %d DELETE/UPDATE/MERGE runs", scans, pruned, dmls)
}

// pruneKeyEqual: the rows' key values are equal and not null.
func pruneKeyEqual(key string, a, b pruneRow) bool {
	switch key {
	case "f":
		return a.f != nil && b.f != nil && *a.f == *b.f
	case "d":
		return a.d != nil && b.d != nil && *a.d == *b.d
	case "dec":
		return a.dec != nil && b.dec != nil && *a.dec == *b.dec
	case "ts":
		return a.ts != nil && b.ts != nil && *a.ts == *b.ts
	}
	return a.s != nil && b.s != nil && *a.s == *b.s
}

// prefixColumns names the generated predicate's columns as the MERGE target's.
func prefixColumns(text string) string {
	var b strings.Builder
	inQuote := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\'' {
			inQuote = !inQuote
		}
		if !inQuote && (i == 0 || !isIdentByte(text[i-1])) && c >= 'a' && c <= 'z' {
			j := i
			for j < len(text) && isIdentByte(text[j]) {
				j++
			}
			word := text[i:j]
			switch word {
			case "f", "d", "dec", "ts", "s":
				b.WriteString("target." + word)
				i = j - 1
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.'
}

// The reference's three-valued logic, written apart from the package's.
const (
	refAnd = iota
	refOr
)

func refCombine(k int, a, b expr.Truth) expr.Truth {
	decides, other := expr.False, expr.True // AND
	if k == refOr {
		decides, other = expr.True, expr.False
	}
	switch {
	case a == decides || b == decides:
		return decides
	case a == other && b == other:
		return other
	}
	return expr.Unknown
}

func refTruth(b bool) expr.Truth {
	if b {
		return expr.True
	}
	return expr.False
}

func refCompare(op expr.Op, c int) expr.Truth {
	switch op {
	case expr.OpEq:
		return refTruth(c == 0)
	case expr.OpNe:
		return refTruth(c != 0)
	case expr.OpLt:
		return refTruth(c < 0)
	case expr.OpLe:
		return refTruth(c <= 0)
	case expr.OpGt:
		return refTruth(c > 0)
	}
	return refTruth(c >= 0)
}

// refCmpFloat orders doubles as Spark does: NaN above everything, equal to itself.
func refCmpFloat(a, b float64) int {
	switch an, bn := math.IsNaN(a), math.IsNaN(b); {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}
