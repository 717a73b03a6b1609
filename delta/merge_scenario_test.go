package delta_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// model is the expected table content by id.
type model map[int64]row

func (m model) rows() []string {
	var out []string
	for _, r := range m {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

// diff is the change feed of going from m to next at version v: inserts, deletes, and
// pre/post images of changed rows.
func (m model) diff(next model, v int64) []string {
	var out []string
	for id, r := range m {
		n, ok := next[id]
		switch {
		case !ok:
			out = append(out, change(r, "delete", v))
		case n != r:
			out = append(out, change(r, "update_preimage", v), change(n, "update_postimage", v))
		}
	}
	for id, n := range next {
		if _, ok := m[id]; !ok {
			out = append(out, change(n, "insert", v))
		}
	}
	return out
}

func appendRows(t testing.TB, tbl *delta.Table, rows ...row) int64 {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, snap.Schema(), rows, nil)
	defer rec.Release()
	v, err := tbl.Append(context.Background(), delta.AppendOptions{Records: []arrow.RecordBatch{rec}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A change-feed table goes through appends, UPDATE, DELETE (a row, a partition), a MERGE
// with every clause kind and an overwrite; the change feed over every version range is
// exactly what the operations changed, with update pre/post images and nothing for
// copied rows.
func TestDMLChangeFeedScenario(t *testing.T) {
	clock := &manualClock{t: time.Now().UTC().Truncate(time.Millisecond)}
	for name, st := range scenarioStores(t, clock) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tbl, err := delta.Create(ctx, st, "wh/dml", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
				Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, delta.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64][]string{}
			cur := model{}
			step := func(v int64, next model) {
				t.Helper()
				want[v] = cur.diff(next, v)
				cur = next
				if got := latestRows(t, tbl); !slices.Equal(got, cur.rows()) {
					t.Fatalf("version %d rows:\ngot  %v\nwant %v", v, got, cur.rows())
				}
				clock.Advance(time.Minute)
			}
			with := func(rows ...row) model {
				m := maps.Clone(cur)
				for _, r := range rows {
					m[r.id] = r
				}
				return m
			}
			without := func(m model, ids ...int64) model {
				m = maps.Clone(m)
				for _, id := range ids {
					delete(m, id)
				}
				return m
			}
			step(appendRows(t, tbl, row{1, "ann", "a"}, row{2, "bob", "a"}, row{3, "cy", "b"}, row{4, "dee", "b"}, row{5, "eve", "c"}),
				with(row{1, "ann", "a"}, row{2, "bob", "a"}, row{3, "cy", "b"}, row{4, "dee", "b"}, row{5, "eve", "c"}))
			step(appendRows(t, tbl, row{6, "fay", "a"}, row{7, "gus", "c"}), with(row{6, "fay", "a"}, row{7, "gus", "c"}))

			res, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.In("id", 2, 6), Set: map[string]any{"name": "upd"}})
			if err != nil {
				t.Fatal(err)
			}
			step(res.Version, with(row{2, "upd", "a"}, row{6, "upd", "a"}))

			res, err = tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("name", "cy")})
			if err != nil {
				t.Fatal(err)
			}
			step(res.Version, without(cur, 3))

			res, err = tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("part", "c")})
			if err != nil {
				t.Fatal(err)
			}
			step(res.Version, without(cur, 5, 7))

			// MERGE: update 1, delete 4, insert 8 and 9; not matched by source: delete in
			// part b, else rename.
			src := sourceRecord([]row{{1, "ANN", "a"}, {4, "", "b"}, {8, "hal", "b"}, {9, "ida", "d"}}, []string{"U", "D", "I", "I"})
			defer src.Release()
			opts := upsertOptions(src)
			opts.WhenNotMatchedBySource = []delta.MergeClause{
				{Cond: expr.Eq("target.part", "b"), Action: delta.MergeDelete},
				{Action: delta.MergeUpdate, Set: map[string]any{"name": expr.Col("target.part")}},
			}
			mres, err := tbl.Merge(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			step(mres.Version, without(with(row{1, "ANN", "a"}, row{8, "hal", "b"}, row{9, "ida", "d"}, row{2, "a", "a"}, row{6, "a", "a"}), 4))

			// Overwrite: every row deleted, the new ones inserted.
			snap, _ := tbl.Snapshot(ctx)
			v := commitChange(t, tbl, "WRITE", fileNames(snap.Files()), []row{{10, "ten", "a"}}, nil, nil)
			want[v] = nil
			for _, r := range cur {
				want[v] = append(want[v], change(r, "delete", v))
			}
			want[v] = append(want[v], change(row{10, "ten", "a"}, "insert", v))
			cur = model{10: {10, "ten", "a"}}
			latest := v

			for s := int64(1); s <= latest; s++ {
				for e := s; e <= latest; e++ {
					var exp []string
					for x := s; x <= e; x++ {
						exp = append(exp, want[x]...)
					}
					slices.Sort(exp)
					r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(s), EndVersion: ptr(e)})
					if err != nil {
						t.Fatalf("%d..%d: %v", s, e, err)
					}
					if got := ownChangeRows(t, r); !slices.Equal(got, exp) {
						t.Errorf("%d..%d:\ngot  %v\nwant %v", s, e, got, exp)
					}
				}
			}
		})
	}
}

// flatTable is an unpartitioned change-feed table of files rows each, ids 0..files*per-1
// in order, one file per append.
func flatTable(t testing.TB, st objectstore.Store, files, per int) *delta.Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.Create(ctx, st, "wh/flat", delta.CreateOptions{Schema: testSchema(),
		Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for f := 0; f < files; f++ {
		rows := make([]row, per)
		for i := range rows {
			id := int64(f*per + i)
			rows[i] = row{id, fmt.Sprintf("n%d", id), "p"}
		}
		appendRows(t, tbl, rows...)
	}
	return tbl
}

// A merge whose keys fall in one of ten files reads and rewrites only that file.
func TestMergePrunesByKeyStats(t *testing.T) {
	ctx := context.Background()
	tbl := flatTable(t, mem.New(mem.Config{}), 10, 100)
	target := filesWith(t, tbl, 250)
	src := sourceRecord([]row{{250, "x", "p"}, {255, "y", "p"}, {259, "", "p"}}, []string{"U", "U", "D"})
	defer src.Release()
	res, err := tbl.Merge(ctx, upsertOptions(src))
	if err != nil {
		t.Fatal(err)
	}
	if res.NumTargetFilesScanned != 1 || res.NumTargetFilesSkipped != 9 || res.NumTargetFilesRemoved != 1 || res.NumTargetFilesAdded != 1 ||
		res.NumTargetRowsUpdated != 2 || res.NumTargetRowsDeleted != 1 || res.NumTargetRowsCopied != 97 {
		t.Errorf("result %+v", res)
	}
	c := commitJSON(t, tbl, res.Version)
	if n := countOf(c, `"remove"`); n != 1 || !containsPath(c, target[0]) {
		t.Errorf("commit removes %d files, want only %s:\n%s", n, target, c)
	}
}

// Files whose key range lies between the source's smallest and largest keys, holding
// none of them, are skipped too (the source keys' min and max alone cannot tell).
func TestMergePrunesFilesInsideTheSourceRange(t *testing.T) {
	ctx := context.Background()
	tbl := flatTable(t, mem.New(mem.Config{}), 10, 100)
	var rows []row
	var ops []string
	for _, id := range []int64{990, 5, 999, 40, 950, 0, 960} { // files 0 and 9 only
		rows, ops = append(rows, row{id, "x", "p"}), append(ops, "U")
	}
	for id := int64(1000); id < 1100; id++ { // new keys past every file
		rows, ops = append(rows, row{id, "new", "p"}), append(ops, "I")
	}
	src := sourceRecord(rows, ops)
	defer src.Release()
	res, err := tbl.Merge(ctx, upsertOptions(src))
	if err != nil {
		t.Fatal(err)
	}
	if res.NumTargetFilesScanned != 2 || res.NumTargetFilesSkipped != 8 || res.NumTargetFilesRemoved != 2 ||
		res.NumTargetRowsUpdated != 7 || res.NumTargetRowsInserted != 100 || res.NumTargetRowsCopied != 193 {
		t.Errorf("result %+v", res)
	}
	if got := len(latestRows(t, tbl)); got != 1100 {
		t.Errorf("%d rows, want 1100", got)
	}
}

func countOf(s, sub string) int {
	n := 0
	for i := 0; ; {
		j := indexFrom(s, sub, i)
		if j < 0 {
			return n
		}
		n++
		i = j + len(sub)
	}
}

func indexFrom(s, sub string, i int) int {
	for j := i; j+len(sub) <= len(s); j++ {
		if s[j:j+len(sub)] == sub {
			return j
		}
	}
	return -1
}

func containsPath(s, p string) bool { return indexFrom(s, `"path":"`+p+`"`, 0) >= 0 }

// A MERGE, UPDATE or DELETE failing at any store operation leaves the table at its
// previous version, and rerunning it gives the same rows and change feed as an
// uninterrupted run.
func TestDMLFailsAtomically(t *testing.T) {
	src := sourceRecord([]row{{10, "x", "p"}, {60, "", "p"}, {500, "new", "p"}}, []string{"U", "D", "I"})
	defer src.Release()
	ops := map[string]func(ctx context.Context, tbl *delta.Table) (int64, error){
		"merge": func(ctx context.Context, tbl *delta.Table) (int64, error) {
			res, err := tbl.Merge(ctx, upsertOptions(src))
			if err != nil {
				return -1, err
			}
			return res.Version, nil
		},
		"update": func(ctx context.Context, tbl *delta.Table) (int64, error) {
			res, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.In("id", 10, 120), Set: map[string]any{"name": "u"}})
			if err != nil {
				return -1, err
			}
			return res.Version, nil
		},
		"delete": func(ctx context.Context, tbl *delta.Table) (int64, error) {
			res, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Or(expr.Lt("id", 60), expr.Eq("id", 170))})
			if err != nil {
				return -1, err
			}
			return res.Version, nil
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) { checkAtomic(t, op) })
	}
}

func checkAtomic(t *testing.T, op func(ctx context.Context, tbl *delta.Table) (int64, error)) {
	ctx := context.Background()
	base := mem.New(mem.Config{})
	flatTable(t, base, 4, 50)
	all := func(string) bool { return true }

	// The uninterrupted run.
	ref, err := delta.Open(ctx, copyStore(t, base, "", all), "wh/flat", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := latestRows(t, ref)
	version, err := op(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wantRows, wantFeed := latestRows(t, ref), versionChanges(t, ref, version)
	for n := 1; ; n++ {
		fst := faultstore.New(copyStore(t, base, "", all))
		tbl, err := delta.Open(ctx, fst, "wh/flat", delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		fst.FailNth(n, true, false)
		_, err = op(ctx, tbl)
		injected := fst.Injected()
		fst.Heal()
		if !injected {
			if err != nil {
				t.Fatal(err)
			}
			if n < 3 {
				t.Fatalf("only %d operations", n)
			}
			t.Logf("checked %d failure points", n-1)
			break
		}
		fresh, oerr := delta.Open(ctx, fst, "wh/flat", delta.Options{})
		if oerr != nil {
			t.Fatalf("fail at %d: reopen: %v", n, oerr)
		}
		snap, _ := fresh.Snapshot(ctx)
		if err != nil {
			if !errors.Is(err, faultstore.ErrInjected) {
				t.Errorf("fail at %d: error %v does not wrap the injected failure", n, err)
			}
			if snap.Version() != version-1 || !slices.Equal(latestRows(t, fresh), before) {
				t.Fatalf("fail at %d: table moved to version %d", n, snap.Version())
			}
			v, err := op(ctx, fresh)
			if err != nil {
				t.Fatalf("fail at %d: rerun: %v", n, err)
			}
			if v != version {
				t.Errorf("fail at %d: rerun committed %d, want %d", n, v, version)
			}
		}
		if got := latestRows(t, fresh); !slices.Equal(got, wantRows) {
			t.Errorf("fail at %d: rows\ngot  %v\nwant %v", n, got, wantRows)
		}
		if got := versionChanges(t, fresh, version); !slices.Equal(got, wantFeed) {
			t.Errorf("fail at %d: feed\ngot  %v\nwant %v", n, got, wantFeed)
		}
	}
}
