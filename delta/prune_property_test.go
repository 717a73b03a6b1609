package delta

import (
	"cmp"
	"context"
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

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
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
		r := rand.New(rand.NewPCG(testenv.PropertySeed(uint64(ti)), 0x9e3779b97f4a7c15))
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
			// The rows left, read through another predicate (pruning files and row
			// groups of files the DELETE may have marked rows in).
			gp2 := genPrunePred(r, 2)
			p2, err := expr.Parse(gp2.text)
			if err != nil {
				t.Fatalf("%q: %v", gp2.text, err)
			}
			want2 := idsWhere(rows, func(row pruneRow) bool { return gp.eval(row) != expr.True && gp2.eval(row) == expr.True })
			if got, _, _ := tableScan(t, del, p2); !slices.Equal(got, want2) {
				t.Fatalf("table %d: after DELETE WHERE %s, --where %s returned ids %v, want %v", ti, gp.text, gp2.text, got, want2)
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
			if got, _, _ := tableScan(t, upd, p2); !slices.Equal(got, idsWhere(rows, func(row pruneRow) bool { return gp2.eval(row) == expr.True })) {
				t.Fatalf("table %d: after UPDATE WHERE %s, --where %s returned ids %v", ti, gp.text, gp2.text, got)
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
