package delta_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// partOf returns the source rows of src at idx (in that order) and the positions of pos
// restricted to the given files, renumbered to the part's rows.
func partOf(t *testing.T, src arrow.RecordBatch, pos *delta.MergePositions, files []string, idx []int32) (arrow.RecordBatch, *delta.MergePositions) {
	t.Helper()
	rows, err := arrowx.GatherRows(context.Background(), src, idx)
	if err != nil {
		t.Fatal(err)
	}
	at := map[int32]int32{}
	for k, i := range idx {
		at[i] = int32(k)
	}
	out := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	for _, f := range files {
		fm := pos.Files[f]
		part := &delta.FileMatches{Target: slices.Clone(fm.Target)}
		for _, s := range fm.Source {
			k, ok := at[s]
			if !ok {
				t.Fatalf("source row %d of file %s is not in the part", s, f)
			}
			part.Source = append(part.Source, k)
		}
		out.Files[f] = part
	}
	return rows, out
}

// A MERGE given in parts (one per matched file, then the inserts) commits what the same
// MERGE given at once commits: one version with the same rows, change feed and counts.
func TestMergeInPartsMatchesOneMerge(t *testing.T) {
	ctx := context.Background()
	commits := [][]row{{{1, "ann", "a"}, {2, "bob", "a"}}, {{3, "cy", "b"}, {4, "dee", "b"}}, {{5, "eve", "c"}}}
	whole, parts := cdfTable(t, commits...), cdfTable(t, commits...)
	src := sourceRecord([]row{{2, "bo", "a"}, {3, "cy", "b"}, {6, "fay", "c"}, {7, "gone", "c"}, {4, "di", "b"}, {8, "hal", "a"}}, []string{"U", "D", "I", "D", "U", "I"})
	defer src.Release()

	snap, err := whole.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opts := upsertOptions(src)
	opts.Tx = whole.NewTransaction(snap, delta.TxOptions{})
	opts.Positions = positionsOf(t, snap, src)
	opts.Txn = &delta.Txn{AppID: "app", Version: 7}
	want, err := whole.Merge(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}

	snap, err = parts.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pos := positionsOf(t, snap, src)
	var files []string
	for f := range pos.Files {
		files = append(files, f)
	}
	slices.Sort(files)
	opts = upsertOptions(nil)
	opts.Source = nil
	opts.Tx = parts.NewTransaction(snap, delta.TxOptions{})
	opts.Txn = &delta.Txn{AppID: "app", Version: 7}
	mp, err := parts.NewMergeInParts(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		var idx []int32
		idx = append(idx, pos.Files[f].Source...)
		rows, p := partOf(t, src, pos, []string{f}, idx)
		err := mp.Merge(ctx, []arrow.RecordBatch{rows}, p)
		rows.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, idx := range [][]int32{{2, 3}, {5}} { // the unmatched rows, in two parts
		rows, p := partOf(t, src, pos, nil, idx)
		err := mp.Merge(ctx, []arrow.RecordBatch{rows}, p)
		rows.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := mp.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != want.Version {
		t.Errorf("version %d, want %d (one commit)", got.Version, want.Version)
	}
	if g, w := latestRows(t, parts), latestRows(t, whole); !slices.Equal(g, w) || len(g) != 6 {
		t.Errorf("rows in parts %v\nat once %v", g, w)
	}
	if g, w := versionChanges(t, parts, got.Version), versionChanges(t, whole, want.Version); !slices.Equal(g, w) || len(g) != 7 {
		t.Errorf("change feed in parts %v\nat once %v", g, w)
	}
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"source rows", got.NumSourceRows, want.NumSourceRows}, {"inserted", got.NumTargetRowsInserted, want.NumTargetRowsInserted},
		{"updated", got.NumTargetRowsUpdated, want.NumTargetRowsUpdated}, {"deleted", got.NumTargetRowsDeleted, want.NumTargetRowsDeleted},
		{"copied", got.NumTargetRowsCopied, want.NumTargetRowsCopied}, {"files removed", got.NumTargetFilesRemoved, want.NumTargetFilesRemoved},
		{"files scanned", got.NumTargetFilesScanned, want.NumTargetFilesScanned}, {"files skipped", got.NumTargetFilesSkipped, want.NumTargetFilesSkipped},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	snap, err = parts.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := snap.TxnVersion("app"); !ok || v != 7 {
		t.Errorf("txn app = %d, %v; want 7 in the commit", v, ok)
	}
}

func TestMergeInPartsRefusals(t *testing.T) {
	ctx := context.Background()
	tbl := cdfTable(t, []row{{1, "ann", "a"}})
	src := sourceRecord([]row{{1, "an", "a"}, {2, "bo", "a"}}, []string{"U", "I"})
	defer src.Release()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pos := positionsOf(t, snap, src)
	file := snap.Files()[0].Path
	begin := func() *delta.MergeInParts {
		opts := upsertOptions(nil)
		opts.Source = nil
		opts.Tx = tbl.NewTransaction(snap, delta.TxOptions{})
		mp, err := tbl.NewMergeInParts(opts)
		if err != nil {
			t.Fatal(err)
		}
		return mp
	}
	t.Run("file twice", func(t *testing.T) {
		mp := begin()
		rows, p := partOf(t, src, pos, []string{file}, []int32{0})
		defer rows.Release()
		if err := mp.Merge(ctx, []arrow.RecordBatch{rows}, p); err != nil {
			t.Fatal(err)
		}
		rows2, p2 := partOf(t, src, pos, []string{file}, []int32{0})
		defer rows2.Release()
		if err := mp.Merge(ctx, []arrow.RecordBatch{rows2}, p2); err == nil || !strings.Contains(err.Error(), "named by two parts") {
			t.Fatalf("err = %v, want a file named by two parts", err)
		}
	})
	t.Run("inserts before changes", func(t *testing.T) {
		mp := begin()
		ins, p := partOf(t, src, pos, nil, []int32{1})
		defer ins.Release()
		if err := mp.Merge(ctx, []arrow.RecordBatch{ins}, p); err != nil {
			t.Fatal(err)
		}
		upd, p := partOf(t, src, pos, []string{file}, []int32{0})
		defer upd.Release()
		if err := mp.Merge(ctx, []arrow.RecordBatch{upd}, p); err != nil {
			t.Fatal(err)
		}
		if _, err := mp.Commit(ctx); err == nil || !strings.Contains(err.Error(), "give the parts that update or delete first") {
			t.Fatalf("err = %v, want the order refused", err)
		}
	})
	if got := latestRows(t, tbl); len(got) != 1 || got[0] != (row{1, "ann", "a"}).String() {
		t.Errorf("table changed: %v", got)
	}
	for _, bad := range []func(*delta.MergeOptions){
		func(o *delta.MergeOptions) { o.Tx = nil },
		func(o *delta.MergeOptions) { o.Source = []arrow.RecordBatch{src} },
		func(o *delta.MergeOptions) {
			o.WhenNotMatchedBySource = []delta.MergeClause{{Action: delta.MergeDelete}}
		},
	} {
		opts := upsertOptions(nil)
		opts.Source = nil
		opts.Tx = tbl.NewTransaction(snap, delta.TxOptions{})
		bad(&opts)
		if _, err := tbl.NewMergeInParts(opts); err == nil {
			t.Errorf("NewMergeInParts accepted %+v", opts)
		}
	}
}
