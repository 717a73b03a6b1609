package delta_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The diff property: for random tables changed by appends, UPDATE, DELETE, MERGE and
// RESTORE (with deletion vectors or not, partitioned or not), the diff of any two
// versions by key (the web's Diff tab, table diff) is exactly what a reference in this
// test finds by reading both versions whole: the keys only the older one has (removed),
// only the newer one (added), and those in both whose other columns differ (changed,
// naming those columns). The diff reads only the files live in one version and not the
// other, so every row a file shared by both versions holds must cancel out.

// diffRow is a row of the property's table: id is the key.
type diffRow struct {
	id   int64
	name *string
	qty  *int64
	part string
}

func (r diffRow) values() string {
	s := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	n := func(p *int64) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprint(*p)
	}
	return s(r.name) + "|" + n(r.qty) + "|" + r.part
}

const diffPropSchema = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{}},
 {"name":"qty","type":"long","nullable":true,"metadata":{}},
 {"name":"part","type":"string","nullable":true,"metadata":{}}]}`

func diffRecord(t *testing.T, sch *arrow.Schema, rows []diffRow) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		if r.name == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*r.name)
		}
		if r.qty == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(*r.qty)
		}
		b.Field(3).(*array.StringBuilder).Append(r.part)
	}
	return b.NewRecordBatch()
}

// randomDiffRow draws a row's values (NULLs and empty strings among them).
func randomDiffRow(r *rand.Rand, id int64) diffRow {
	row := diffRow{id: id, part: []string{"a", "b"}[r.IntN(2)]}
	if r.IntN(6) > 0 {
		s := []string{"", "ann", "bob", "cy", "dee"}[r.IntN(5)]
		row.name = &s
	}
	if r.IntN(6) > 0 {
		q := int64(r.IntN(4))
		row.qty = &q
	}
	return row
}

// readState reads a version of the table whole, by key.
func readState(t *testing.T, tbl *delta.Table, v int64) map[int64]string {
	t.Helper()
	snap, err := tbl.SnapshotAt(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(context.Background(), delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	out := map[int64]string{}
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := range int(rec.NumRows()) {
			id := rec.Column(0).(*array.Int64).Value(i)
			var vals []string
			for c := 1; c < 4; c++ {
				if rec.Column(c).IsNull(i) {
					vals = append(vals, "NULL")
				} else {
					vals = append(vals, rec.Column(c).ValueStr(i))
				}
			}
			if _, dup := out[id]; dup {
				t.Fatalf("version %d holds key %d twice", v, id)
			}
			out[id] = strings.Join(vals, "|")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// referenceDiff is the diff of two states: "removed id", "added id", "changed id: cols".
func referenceDiff(a, b map[int64]string) []string {
	cols := []string{"name", "qty", "part"}
	var out []string
	for id, av := range a {
		bv, ok := b[id]
		if !ok {
			out = append(out, fmt.Sprintf("removed %d", id))
			continue
		}
		if av == bv {
			continue
		}
		as, bs := strings.Split(av, "|"), strings.Split(bv, "|")
		var changed []string
		for i := range cols {
			if as[i] != bs[i] {
				changed = append(changed, cols[i])
			}
		}
		slices.Sort(changed)
		out = append(out, fmt.Sprintf("changed %d: %s", id, strings.Join(changed, ",")))
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			out = append(out, fmt.Sprintf("added %d", id))
		}
	}
	slices.Sort(out)
	return out
}

// gotDiff renders a Diff as referenceDiff does.
func gotDiff(t *testing.T, d *delta.Diff) []string {
	t.Helper()
	idOf := func(rec arrow.RecordBatch, i int) int64 {
		return rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64).Value(i)
	}
	var out []string
	for _, r := range d.Rows {
		switch r.Kind {
		case delta.DiffRemoved:
			out = append(out, fmt.Sprintf("removed %d", idOf(d.Before, r.Before)))
		case delta.DiffAdded:
			out = append(out, fmt.Sprintf("added %d", idOf(d.After, r.After)))
		default:
			changed := slices.Clone(r.Changed)
			slices.Sort(changed)
			out = append(out, fmt.Sprintf("changed %d: %s", idOf(d.After, r.After), strings.Join(changed, ",")))
		}
	}
	slices.Sort(out)
	return out
}

func TestDiffMatchesReference(t *testing.T) {
	const tables = 24
	ctx := context.Background()
	sch, err := delta.ParseSchema(diffPropSchema)
	if err != nil {
		t.Fatal(err)
	}
	asch, err := delta.ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	var diffs, rowsCompared int
	for ti := range tables {
		r := rand.New(rand.NewPCG(testenv.PropertySeed(uint64(ti)), 0xd1ff))
		props := map[string]string{}
		if r.IntN(2) == 0 {
			props[delta.PropEnableDeletionVectors] = "true"
		}
		var parts []string
		if r.IntN(3) == 0 {
			parts = []string{"part"}
		}
		tbl, err := delta.Create(ctx, mem.New(mem.Config{}), "t", delta.CreateOptions{Schema: sch, PartitionColumns: parts, Properties: props}, delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var nextID int64
		live := map[int64]bool{}
		liveIDs := func() []int64 { return slices.Sorted(maps.Keys(live)) }
		steps := 6 + r.IntN(8)
		for step := 0; step < steps; step++ {
			ids := liveIDs()
			switch op := r.IntN(10); {
			case op < 3 || len(ids) == 0: // an append of new keys, some of them back from the dead
				var rows []diffRow
				for range 1 + r.IntN(6) {
					id := nextID
					nextID++
					if r.IntN(4) == 0 && nextID > 1 {
						id = int64(r.IntN(int(nextID - 1)))
						if live[id] {
							continue
						}
					}
					if slices.ContainsFunc(rows, func(x diffRow) bool { return x.id == id }) {
						continue
					}
					rows = append(rows, randomDiffRow(r, id))
					live[id] = true
				}
				if len(rows) == 0 {
					continue
				}
				rec := diffRecord(t, asch, rows)
				_, err = tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}})
				rec.Release()
			case op < 5: // UPDATE a few keys' values
				pick := ids[:1+r.IntN(min(3, len(ids)))]
				vals := make([]any, len(pick))
				for i, id := range pick {
					vals[i] = id
				}
				set := map[string]any{"qty": int64(r.IntN(4))}
				if r.IntN(2) == 0 {
					set = map[string]any{"name": []string{"", "eve", "ann"}[r.IntN(3)]}
				}
				_, err = tbl.Update(ctx, delta.UpdateOptions{Where: expr.In("id", vals...), Set: set})
			case op < 7: // DELETE a few keys
				id := ids[r.IntN(len(ids))]
				_, err = tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", id)})
				delete(live, id)
			case op < 9: // MERGE: update some keys, insert new ones
				var rows []diffRow
				for _, id := range ids {
					if r.IntN(3) == 0 {
						rows = append(rows, randomDiffRow(r, id))
					}
				}
				for range r.IntN(3) {
					rows = append(rows, randomDiffRow(r, nextID))
					live[nextID] = true
					nextID++
				}
				if len(rows) == 0 {
					continue
				}
				rec := diffRecord(t, asch, rows)
				_, err = tbl.Merge(ctx, delta.MergeOptions{Source: []arrow.RecordBatch{rec}, On: []string{"id"},
					WhenMatched:    []delta.MergeClause{{Action: delta.MergeUpdate}},
					WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}}})
				rec.Release()
			default: // RESTORE an older version
				snap, serr := tbl.Snapshot(ctx)
				if serr != nil {
					t.Fatal(serr)
				}
				if snap.Version() < 2 {
					continue
				}
				v := 1 + r.Int64N(snap.Version()-1)
				_, _, err = tbl.Restore(ctx, delta.RestoreOptions{Version: &v})
				live = map[int64]bool{}
				for id := range readState(t, tbl, v) {
					live[id] = true
				}
			}
			if err != nil {
				t.Fatalf("table %d step %d: %v", ti, step, err)
			}
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := snap.Version()
		states := make([]map[int64]string, last+1)
		for v := range last + 1 {
			states[v] = readState(t, tbl, v)
		}
		for range 8 {
			from, to := r.Int64N(last+1), r.Int64N(last+1)
			d, err := tbl.DiffVersions(ctx, from, to, delta.DiffOptions{Keys: []string{"id"}})
			if err != nil {
				t.Fatalf("table %d: diff %d..%d: %v", ti, from, to, err)
			}
			got := gotDiff(t, d)
			d.Release()
			if want := referenceDiff(states[from], states[to]); !slices.Equal(got, want) {
				t.Fatalf("table %d (deletion vectors %v, partitioned %v): diff of versions %d and %d:\n got  %v\n want %v", ti, props[delta.PropEnableDeletionVectors] != "", parts != nil, from, to, got, want)
			}
			diffs++
			rowsCompared += len(states[from]) + len(states[to])
		}
	}
	t.Logf("%d diffs of %d tables (%d rows in the versions compared)", diffs, tables, rowsCompared)
}
