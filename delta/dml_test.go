package delta_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// cdfTable creates a change-feed table partitioned by part holding rows in one file per
// commit.
func cdfTable(t testing.TB, commits ...[]row) *delta.Table {
	t.Helper()
	tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableChangeDataFeed: "true"})
	for _, rows := range commits {
		commitChange(t, tbl, "WRITE", nil, rows, nil, nil)
	}
	return tbl
}

func latestRows(t testing.TB, tbl *delta.Table) []string {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tableRows(t, snap)
}

func versionChanges(t testing.TB, tbl *delta.Table, v int64) []string {
	t.Helper()
	r, err := tbl.Changes(context.Background(), delta.ChangesOptions{StartVersion: ptr(v), EndVersion: ptr(v)})
	if err != nil {
		t.Fatal(err)
	}
	return ownChangeRows(t, r)
}

func sortedStrings(s ...string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func lastMetrics(t testing.TB, tbl *delta.Table) (string, map[string]any, map[string]any) {
	t.Helper()
	h, err := tbl.History(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return h[0].Operation, h[0].OperationParameters, h[0].OperationMetrics
}

func TestDeleteAndUpdate(t *testing.T) {
	ctx := context.Background()
	r1, r2, r3, r4, r5 := row{1, "ann", "a"}, row{2, "bob", "a"}, row{3, "cy", "b"}, row{4, "dee", "b"}, row{5, "eve", "c"}
	tbl := cdfTable(t, []row{r1, r2}, []row{r3, r4}, []row{r5})

	// UPDATE one row of part a: its file is rewritten, ann copied, pre/post images only for bob.
	res, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", 2), Set: map[string]any{"name": "bo"}})
	if err != nil {
		t.Fatal(err)
	}
	r2b := row{2, "bo", "a"}
	if res.NumUpdatedRows != 1 || res.NumCopiedRows != 1 || res.NumRemovedFiles != 1 || res.NumAddedFiles != 1 || res.NumAddedChangeFiles != 1 {
		t.Errorf("update result %+v", res)
	}
	if got, want := versionChanges(t, tbl, res.Version), sortedStrings(change(r2, "update_preimage", res.Version), change(r2b, "update_postimage", res.Version)); !slices.Equal(got, want) {
		t.Errorf("update feed:\ngot  %v\nwant %v", got, want)
	}
	op, params, m := lastMetrics(t, tbl)
	if op != "UPDATE" || params["predicate"] != `["id = 2"]` || m["numUpdatedRows"] != "1" || m["numCopiedRows"] != "1" {
		t.Errorf("commitInfo %s %v %v", op, params, m)
	}

	// UPDATE with a column reference.
	res, err = tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("part", "c"), Set: map[string]any{"name": expr.Col("part")}})
	if err != nil {
		t.Fatal(err)
	}
	r5b := row{5, "c", "c"}
	if got, want := versionChanges(t, tbl, res.Version), sortedStrings(change(r5, "update_preimage", res.Version), change(r5b, "update_postimage", res.Version)); !slices.Equal(got, want) {
		t.Errorf("update col feed:\ngot  %v\nwant %v", got, want)
	}

	// DELETE one row of part b: rewrite with dee copied.
	res, err = tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("name", "cy")})
	if err != nil {
		t.Fatal(err)
	}
	if res.NumDeletedRows != 1 || res.NumCopiedRows != 1 || res.NumRemovedFiles != 1 {
		t.Errorf("delete result %+v", res)
	}
	if got, want := versionChanges(t, tbl, res.Version), []string{change(r3, "delete", res.Version)}; !slices.Equal(got, want) {
		t.Errorf("delete feed:\ngot  %v\nwant %v", got, want)
	}

	// Nothing matches: no commit.
	res, err = tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", 99)})
	if err != nil || res.Committed {
		t.Fatalf("no-op delete: %+v %v", res, err)
	}

	// Partition-only DELETE: plain removes, no change files; the feed shows the deletes.
	res, err = tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("part", "b")})
	if err != nil {
		t.Fatal(err)
	}
	if res.NumAddedChangeFiles != 0 || res.NumAddedFiles != 0 || res.NumRemovedFiles != 1 || res.NumDeletedRows != 1 {
		t.Errorf("partition delete result %+v", res)
	}
	if got, want := versionChanges(t, tbl, res.Version), []string{change(r4, "delete", res.Version)}; !slices.Equal(got, want) {
		t.Errorf("partition delete feed:\ngot  %v\nwant %v", got, want)
	}
	if got, want := latestRows(t, tbl), sortedStrings(r1.String(), r2b.String(), r5b.String()); !slices.Equal(got, want) {
		t.Errorf("rows:\ngot  %v\nwant %v", got, want)
	}

	// DELETE everything with a Txn recorded in the same commit.
	res, err = tbl.Delete(ctx, delta.DeleteOptions{Txn: &delta.Txn{AppID: "job", Version: 7}})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	if v, ok := snap.TxnVersion("job"); !ok || v != 7 || len(snap.Files()) != 0 {
		t.Errorf("after delete all: txn %d %v, %d files", v, ok, len(snap.Files()))
	}
	if got := versionChanges(t, tbl, res.Version); len(got) != 3 {
		t.Errorf("delete all feed: %v", got)
	}
}

// Without the change feed no _change_data files are written; an UPDATE of the partition
// column moves rows to their new partition.
func TestUpdatePartitionColumnWithoutChangeFeed(t *testing.T) {
	ctx := context.Background()
	tbl, _, _ := newTestTable(t, nil)
	commitChange(t, tbl, "WRITE", nil, []row{{1, "ann", "a"}, {2, "bob", "a"}}, nil, nil)
	res, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", 2), Set: map[string]any{"part": "z"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NumAddedChangeFiles != 0 || res.NumAddedFiles != 2 {
		t.Errorf("result %+v", res)
	}
	snap, _ := tbl.Snapshot(ctx)
	parts := map[string]bool{}
	for _, a := range snap.Files() {
		parts[*a.PartitionValues["part"]] = true
	}
	if !parts["a"] || !parts["z"] || len(parts) != 2 {
		t.Errorf("partitions %v", parts)
	}
	if got, want := latestRows(t, tbl), sortedStrings(row{1, "ann", "a"}.String(), row{2, "bob", "z"}.String()); !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if _, err := tbl.Update(ctx, delta.UpdateOptions{Set: map[string]any{"id": nil}}); err == nil {
		t.Error("setting a non-nullable column to null succeeded")
	}
	if _, err := tbl.Update(ctx, delta.UpdateOptions{Set: map[string]any{"nope": 1}}); err == nil {
		t.Error("setting an unknown column succeeded")
	}
}

// An UPDATE that loses to a concurrent append is rerun with Retries.
func TestUpdateRetriesAfterConflict(t *testing.T) {
	ctx := context.Background()
	for _, retries := range []int{0, 1} {
		tbl := cdfTable(t, []row{{1, "ann", "a"}})
		calls := 0
		upper := expr.ExprFunc(func(rows arrow.RecordBatch) (arrow.Array, error) {
			if calls++; calls == 1 {
				appendRows(t, tbl, row{2, "bob", "a"}) // a concurrent writer commits meanwhile
			}
			b := array.NewStringBuilder(memory.DefaultAllocator)
			defer b.Release()
			for i := 0; i < int(rows.NumRows()); i++ {
				b.Append("ANN")
			}
			return b.NewArray(), nil
		})
		_, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", 1), Set: map[string]any{"name": upper}, Retries: retries})
		var ce *delta.ConflictError
		if retries == 0 {
			if !errors.As(err, &ce) {
				t.Errorf("no retries: err = %v, want a conflict", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := latestRows(t, tbl), sortedStrings(row{1, "ANN", "a"}.String(), row{2, "bob", "a"}.String()); !slices.Equal(got, want) {
			t.Errorf("rows %v, want %v", got, want)
		}
	}
}

// AddedSince tells a table only appended to since a version (its new files, which
// ScanFiles reads alone) from one whose rows were rewritten.
func TestAddedSince(t *testing.T) {
	ctx := context.Background()
	tbl := cdfTable(t, []row{{1, "ann", "a"}})
	old, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, tbl, row{2, "bob", "b"}, row{3, "cy", "b"})
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	added, only := snap.AddedSince(old)
	if !only || len(added) != 1 {
		t.Fatalf("after an append: %d files added, only added %v; want 1, true", len(added), only)
	}
	sc, err := snap.ScanFiles(ctx, added, delta.ScanOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for sc.Next() {
		c := sc.RecordBatch().Column(0).(*array.Int64)
		ids = append(ids, c.Int64Values()...)
	}
	sc.Release()
	if err := sc.Err(); err != nil || !slices.Equal(ids, []int64{2, 3}) {
		t.Errorf("the files added hold ids %v (%v), want 2 and 3", ids, err)
	}
	if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", 1), Set: map[string]any{"name": "an"}}); err != nil {
		t.Fatal(err)
	}
	latest, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, only := latest.AddedSince(old); only {
		t.Error("after an UPDATE that rewrote ann's file: only added, want not")
	}
	if added, only := latest.AddedSince(latest); !only || len(added) != 0 {
		t.Errorf("a snapshot against itself: %d added, only %v", len(added), only)
	}
}

// TestEmptyStringsKeepTheirStatistics: a file whose names are all the empty string reads
// back as a string column with no value bytes at all; a DELETE that rewrites it with
// another file into one keeps "" in the new file's statistics, so a filter on the empty
// name finds those rows, and a DELETE by it removes them.
func TestEmptyStringsKeepTheirStatistics(t *testing.T) {
	ctx := context.Background()
	tbl := cdfTable(t, []row{{1, "ann", "a"}, {4, "bo", "a"}}, []row{{2, "", "a"}, {3, "", "a"}, {5, "", "a"}})
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.In("id", 1, 3)}); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{Filter: expr.Eq("name", ""), Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for sc.Next() {
		ids = append(ids, sc.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	sc.Release()
	if slices.Sort(ids); !slices.Equal(ids, []int64{2, 5}) {
		t.Fatalf("--where name = '' after the DELETE: ids %v, want [2 5]", ids)
	}
	res, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("name", "")})
	if err != nil {
		t.Fatal(err)
	}
	if res.NumDeletedRows != 2 {
		t.Fatalf("DELETE WHERE name = '' deleted %d rows, want 2; table: %v", res.NumDeletedRows, latestRows(t, tbl))
	}
}
