package delta_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
)

// positionsOf scans snap and pairs every target row whose id is a key of src (column
// id) with that source row, as a caller that joined them itself would.
func positionsOf(t *testing.T, snap *delta.Snapshot, src arrow.RecordBatch) *delta.MergePositions {
	t.Helper()
	byID := map[int64]int32{}
	ids := src.Column(0).(*array.Int64)
	for i := range ids.Len() {
		byID[ids.Value(i)] = int32(i)
	}
	sc, err := snap.Scan(context.Background(), delta.ScanOptions{ReadAhead: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	pos := &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
	for sc.Next() {
		file, first, ok := sc.Position()
		if !ok {
			t.Fatal("no position")
		}
		col := sc.RecordBatch().Column(0).(*array.Int64)
		for i := range col.Len() {
			s, hit := byID[col.Value(i)]
			if !hit {
				continue
			}
			fm := pos.Files[file.Path]
			if fm == nil {
				fm = &delta.FileMatches{}
				pos.Files[file.Path] = fm
			}
			fm.Target, fm.Source = append(fm.Target, first+int64(i)), append(fm.Source, s)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return pos
}

// A MERGE told the matches by position writes what the same MERGE joining on the key
// writes: rows, change feed and counts, and it reads only the files it was told of.
func TestMergePositionsMatchKeyJoin(t *testing.T) {
	ctx := context.Background()
	commits := [][]row{{{1, "ann", "a"}, {2, "bob", "a"}}, {{3, "cy", "b"}, {4, "dee", "b"}}, {{5, "eve", "c"}}}
	joined, placed := cdfTable(t, commits...), cdfTable(t, commits...)
	src := sourceRecord([]row{{2, "bo", "a"}, {3, "cy", "b"}, {6, "fay", "c"}, {7, "gone", "c"}, {4, "di", "b"}}, []string{"U", "D", "I", "D", "U"})
	defer src.Release()

	want, err := joined.Merge(ctx, upsertOptions(src))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := placed.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opts := upsertOptions(src)
	opts.Tx = placed.NewTransaction(snap, delta.TxOptions{})
	opts.Positions = positionsOf(t, snap, src)
	if len(opts.Positions.Files) != 2 {
		t.Fatalf("positions in %d files, want 2", len(opts.Positions.Files))
	}
	got, err := placed.Merge(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := latestRows(t, placed), latestRows(t, joined); !slices.Equal(g, w) || len(g) != 5 {
		t.Errorf("rows by position %v\nby key join %v", g, w)
	}
	if g, w := versionChanges(t, placed, got.Version), versionChanges(t, joined, want.Version); !slices.Equal(g, w) || len(g) != 6 {
		t.Errorf("change feed by position %v\nby key join %v", g, w)
	}
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"inserted", got.NumTargetRowsInserted, 1}, {"updated", got.NumTargetRowsUpdated, 2}, {"deleted", got.NumTargetRowsDeleted, 1},
		{"copied", got.NumTargetRowsCopied, want.NumTargetRowsCopied}, {"files removed", got.NumTargetFilesRemoved, 2},
		{"files scanned", got.NumTargetFilesScanned, 2}, {"files skipped", got.NumTargetFilesSkipped, 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestMergePositionsErrors(t *testing.T) {
	ctx := context.Background()
	tbl := cdfTable(t, []row{{1, "ann", "a"}})
	src := sourceRecord([]row{{1, "an", "a"}}, []string{"U"})
	defer src.Release()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file := snap.Files()[0].Path
	for _, tc := range []struct {
		name string
		edit func(*delta.MergeOptions)
		want string
	}{
		{"not matched by source", func(o *delta.MergeOptions) {
			o.WhenNotMatchedBySource = []delta.MergeClause{{Action: delta.MergeDelete}}
		}, "cannot be used with WHEN NOT MATCHED BY SOURCE"},
		{"unknown file", func(o *delta.MergeOptions) {
			o.Positions.Files["part-nowhere.parquet"] = &delta.FileMatches{Target: []int64{0}, Source: []int32{0}}
		}, "not in the target snapshot"},
		{"source row out of range", func(o *delta.MergeOptions) {
			o.Positions.Files[file] = &delta.FileMatches{Target: []int64{0}, Source: []int32{5}}
		}, "source row 5 is out of range"},
		{"target row twice", func(o *delta.MergeOptions) {
			o.Positions.Files[file] = &delta.FileMatches{Target: []int64{0, 0}, Source: []int32{0, 0}}
		}, "lists target row 0 twice or out of order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := upsertOptions(src)
			opts.Tx = tbl.NewTransaction(snap, delta.TxOptions{})
			opts.Positions = &delta.MergePositions{Files: map[string]*delta.FileMatches{file: {Target: []int64{0}, Source: []int32{0}}}}
			tc.edit(&opts)
			_, err := tbl.Merge(ctx, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if got := latestRows(t, tbl); len(got) != 1 || got[0] != (row{1, "ann", "a"}).String() {
				t.Errorf("table changed: %v", got)
			}
		})
	}
}
