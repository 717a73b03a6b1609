package delta_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// dvTable is cdfTable with delta.enableDeletionVectors on.
func dvTable(t testing.TB, commits ...[]row) (*delta.Table, *testClock) {
	t.Helper()
	tbl, _, c := newTestTable(t, map[string]string{delta.PropEnableChangeDataFeed: "true", delta.PropEnableDeletionVectors: "true"})
	for _, rows := range commits {
		commitChange(t, tbl, "WRITE", nil, rows, nil, nil)
	}
	return tbl, c
}

// With deletion vectors on, a MERGE leaves the files it changes in place, marks the
// rows it deletes or updates in their vectors and writes only the new rows. What a
// reader sees — rows, change feed, earlier versions, a checkpoint — is what the same
// MERGE that rewrites files gives.
func TestMergeWithDeletionVectorsMatchesRewrite(t *testing.T) {
	ctx := context.Background()
	commits := [][]row{{{1, "ann", "a"}, {2, "bob", "a"}, {3, "cy", "a"}, {8, "hal", "a"}}, {{4, "dee", "b"}, {5, "eve", "b"}, {9, "ivy", "b"}}, {{6, "fay", "c"}}}
	plain := cdfTable(t, commits...)
	dvt, clock := dvTable(t, commits...)
	snap0, err := dvt.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := snap0.Protocol(); p.MinReaderVersion != 3 || !slices.Contains(p.ReaderFeatures, "deletionVectors") || !slices.Contains(p.WriterFeatures, "deletionVectors") {
		t.Fatalf("protocol %+v lacks the deletionVectors feature", p)
	}
	before := map[string]bool{}
	for _, a := range snap0.Files() {
		before[a.Path] = true
	}

	batches := []struct {
		rows []row
		ops  []string
	}{
		{[]row{{2, "bo", "a"}, {3, "", "a"}, {7, "gus", "c"}, {4, "di", "b"}}, []string{"U", "D", "I", "U"}},
		// Again into the files that now have vectors: the vectors grow.
		{[]row{{1, "an", "a"}, {2, "", "a"}, {5, "eva", "b"}}, []string{"U", "D", "U"}},
	}
	for i, b := range batches {
		src := sourceRecord(b.rows, b.ops)
		want, err := plain.Merge(ctx, upsertOptions(src))
		if err != nil {
			t.Fatal(err)
		}
		got, err := dvt.Merge(ctx, upsertOptions(src))
		src.Release()
		if err != nil {
			t.Fatal(err)
		}
		if g, w := latestRows(t, dvt), latestRows(t, plain); !slices.Equal(g, w) {
			t.Errorf("batch %d: rows with deletion vectors %v\nrewriting %v", i, g, w)
		}
		if g, w := versionChanges(t, dvt, got.Version), versionChanges(t, plain, want.Version); !slices.Equal(g, w) || len(g) == 0 {
			t.Errorf("batch %d: change feed with deletion vectors %v\nrewriting %v", i, g, w)
		}
		if got.NumTargetRowsCopied != 0 || want.NumTargetRowsCopied == 0 {
			t.Errorf("batch %d: copied %d rows (rewrite copied %d); a DV merge copies none", i, got.NumTargetRowsCopied, want.NumTargetRowsCopied)
		}
		if got.NumTargetDeletionVectorsAdded != 2 {
			t.Errorf("batch %d: %d deletion vectors added, want 2 (partitions a and b)", i, got.NumTargetDeletionVectorsAdded)
		}
	}
	snap, err := dvt.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	withDV := 0
	for _, a := range snap.Files() {
		if a.DeletionVector != nil {
			withDV++
			if !before[a.Path] {
				t.Errorf("file %s has a deletion vector but is not one of the original files", a.Path)
			}
			if !strings.Contains(a.Stats, `"tightBounds":false`) {
				t.Errorf("file %s stats %s: want tightBounds false", a.Path, a.Stats)
			}
		}
	}
	if withDV != 2 {
		t.Errorf("%d files with deletion vectors, want 2", withDV)
	}
	// Partition a's first file lost rows 2 and 3 and updated 1: its vector holds 3 rows.
	for _, a := range snap.Files() {
		if a.DeletionVector != nil && *a.PartitionValues["part"] == "a" && a.DeletionVector.Cardinality != 3 {
			t.Errorf("partition a vector cardinality %d, want 3", a.DeletionVector.Cardinality)
		}
	}
	// Earlier versions read as the rewriting table's.
	for v := snap0.Version(); v <= snap.Version(); v++ {
		ds, err := dvt.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := plain.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := tableRows(t, ds), tableRows(t, ps); !slices.Equal(sorted(g), sorted(w)) {
			t.Errorf("v%d: %v, want %v", v, g, w)
		}
	}
	// A checkpoint keeps the vectors.
	if err := dvt.Checkpoint(ctx, snap); err != nil {
		t.Fatal(err)
	}
	re, err := delta.Open(ctx, dvt.Store(), "warehouse/t", testOptions(clock))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := re.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rs.CheckpointVersion() != snap.Version() {
		t.Fatalf("reopened from checkpoint %d, want %d", rs.CheckpointVersion(), snap.Version())
	}
	if g, w := sorted(tableRows(t, rs)), latestRows(t, plain); !slices.Equal(g, w) {
		t.Errorf("after checkpoint: %v, want %v", g, w)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// VACUUM keeps the vector files that live files and unexpired tombstones name, and
// deletes replaced ones once they expire, in FULL and in LITE mode.
func TestVacuumKeepsLiveDeletionVectors(t *testing.T) {
	for _, lite := range []bool{false, true} {
		t.Run(fmt.Sprintf("lite=%v", lite), func(t *testing.T) {
			ctx := context.Background()
			dvt, _ := dvTable(t, []row{{1, "ann", "a"}, {2, "bob", "a"}, {3, "cy", "a"}})
			for _, b := range [][]row{{{1, "an", "a"}}, {{2, "bo", "a"}}} {
				src := sourceRecord(b, []string{"U"})
				_, err := dvt.Merge(ctx, upsertOptions(src))
				src.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			dvFiles := func() []string {
				infos, err := dvt.Store().List(ctx, "warehouse/t/", "")
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, in := range infos {
					if strings.Contains(in.Key, "deletion_vector_") {
						out = append(out, in.Key)
					}
				}
				return out
			}
			if n := len(dvFiles()); n != 2 {
				t.Fatalf("%d vector files after two merges, want 2", n)
			}
			zero := time.Duration(0)
			res, err := dvt.Vacuum(ctx, delta.VacuumOptions{Retain: &zero, Force: true, Lite: lite})
			if err != nil {
				t.Fatal(err)
			}
			left := dvFiles()
			if len(left) != 1 {
				t.Fatalf("vector files after vacuum %v, want only the live one (deleted %v)", left, res.FilesDeleted)
			}
			if got := latestRows(t, dvt); !slices.Equal(got, []string{"id=1 name=an part=a", "id=2 name=bo part=a", "id=3 name=cy part=a"}) {
				t.Errorf("rows after vacuum: %v", got)
			}
		})
	}
}

// A vector file that does not match its descriptor is an error naming the file, not
// rows silently kept or dropped.
func TestCorruptDeletionVectorIsAnError(t *testing.T) {
	ctx := context.Background()
	dvt, _ := dvTable(t, []row{{1, "ann", "a"}, {2, "bob", "a"}})
	src := sourceRecord([]row{{1, "", "a"}}, []string{"D"})
	_, err := dvt.Merge(ctx, upsertOptions(src))
	src.Release()
	if err != nil {
		t.Fatal(err)
	}
	infos, err := dvt.Store().List(ctx, "warehouse/t/", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if strings.Contains(in.Key, "deletion_vector_") {
			bad := strings.NewReader("\x01\x00\x00\x00\x22garbage-garbage-garbage-garbage-garbage")
			if err := dvt.Store().Put(ctx, in.Key, bad, int64(bad.Len())); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, err := dvt.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	for sc.Next() {
	}
	if err := sc.Err(); err == nil || !strings.Contains(err.Error(), "deletion vector") || !strings.Contains(err.Error(), "deletion_vector_") {
		t.Fatalf("scan error = %v, want one naming the deletion vector file", err)
	}
}

// DELETE and UPDATE on a table with deletion vectors mark rows too, and a file whose
// last rows go is removed; readers see what a rewriting table shows.
func TestDeleteUpdateWithDeletionVectors(t *testing.T) {
	ctx := context.Background()
	commits := [][]row{{{1, "ann", "a"}, {2, "bob", "a"}, {3, "cy", "a"}}, {{4, "dee", "b"}}}
	plain := cdfTable(t, commits...)
	dvt, _ := dvTable(t, commits...)
	steps := []struct {
		name   string
		run    func(*delta.Table) (*delta.DMLResult, error)
		dvs    int64
		copied bool
	}{
		{"update", func(tb *delta.Table) (*delta.DMLResult, error) {
			return tb.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", int64(2)), Set: map[string]any{"name": "bo"}})
		}, 1, true},
		{"delete", func(tb *delta.Table) (*delta.DMLResult, error) {
			return tb.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", int64(3))})
		}, 1, true},
		{"delete the last row of a file", func(tb *delta.Table) (*delta.DMLResult, error) {
			return tb.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("name", "dee")})
		}, 0, false},
	}
	for _, st := range steps {
		want, err := st.run(plain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.run(dvt)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := latestRows(t, dvt), latestRows(t, plain); !slices.Equal(g, w) {
			t.Errorf("%s: rows %v, want %v", st.name, g, w)
		}
		if g, w := versionChanges(t, dvt, got.Version), versionChanges(t, plain, want.Version); !slices.Equal(g, w) || len(g) == 0 {
			t.Errorf("%s: change feed %v, want %v", st.name, g, w)
		}
		if got.NumDeletionVectorsAdded != st.dvs || got.NumCopiedRows != 0 || (want.NumCopiedRows > 0) != st.copied {
			t.Errorf("%s: %d vectors added, %d rows copied (rewrite copied %d); want %d vectors and no copies",
				st.name, got.NumDeletionVectorsAdded, got.NumCopiedRows, want.NumCopiedRows, st.dvs)
		}
	}
}

// A MERGE by position counts a file's rows as scans number them, skipping the rows its
// vector already deletes. Given the matched rows, it does not read the file at all (here
// the file is even missing while the MERGE runs). Either way it writes what the MERGE
// on a table without vectors writes.
func TestMergePositionsWithDeletionVectors(t *testing.T) {
	for _, given := range []bool{false, true} {
		t.Run(fmt.Sprintf("rows given=%v", given), func(t *testing.T) {
			ctx := context.Background()
			commits := [][]row{{{1, "ann", "a"}, {2, "bob", "a"}, {3, "cy", "a"}, {4, "dee", "a"}, {5, "eve", "a"}}}
			plain := cdfTable(t, commits...)
			dvt, _ := dvTable(t, commits...)
			first := sourceRecord([]row{{1, "", "a"}, {3, "", "a"}}, []string{"D", "D"})
			defer first.Release()
			for _, tb := range []*delta.Table{plain, dvt} {
				if _, err := tb.Merge(ctx, upsertOptions(first)); err != nil {
					t.Fatal(err)
				}
			}
			src := sourceRecord([]row{{4, "di", "a"}, {2, "", "a"}}, []string{"U", "D"})
			defer src.Release()
			want, err := plain.Merge(ctx, upsertOptions(src))
			if err != nil {
				t.Fatal(err)
			}
			snap, err := dvt.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			opts := upsertOptions(src)
			opts.Tx = dvt.NewTransaction(snap, delta.TxOptions{})
			opts.Positions = positionsOf(t, snap, src)
			var key string
			var saved []byte
			for path, fm := range opts.Positions.Files {
				if !slices.Equal(fm.Target, []int64{0, 1}) {
					t.Fatalf("positions %v, want rows 0 and 1 (bob and dee, the first rows the vector keeps)", fm.Target)
				}
				if !given {
					continue
				}
				defer giveRows(t, snap, path, fm, 1)() // in two records
				key = "warehouse/t/" + path
				rc, err := dvt.Store().Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				saved, _ = io.ReadAll(rc)
				rc.Close()
				if err := dvt.Store().Delete(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			got, err := dvt.Merge(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if given {
				if err := dvt.Store().Put(ctx, key, bytes.NewReader(saved), int64(len(saved))); err != nil {
					t.Fatal(err)
				}
			}
			if g, w := latestRows(t, dvt), latestRows(t, plain); !slices.Equal(g, w) || len(g) != 2 {
				t.Errorf("rows %v, want %v", g, w)
			}
			if g, w := versionChanges(t, dvt, got.Version), versionChanges(t, plain, want.Version); !slices.Equal(g, w) || len(g) != 3 {
				t.Errorf("change feed %v, want %v", g, w)
			}
		})
	}
}

// giveRows sets fm.Rows to the matched rows of file path (as a caller of
// MergePositions that kept them does), in two records split at row split (0: one
// record). The returned func releases them.
func giveRows(t *testing.T, snap *delta.Snapshot, path string, fm *delta.FileMatches, split int64) func() {
	t.Helper()
	rows := rowsAt(t, snap, path, fm.Target)
	defer rows.Release()
	fm.Rows = []arrow.RecordBatch{rows.NewSlice(split, rows.NumRows())}
	if split > 0 {
		fm.Rows = append([]arrow.RecordBatch{rows.NewSlice(0, split)}, fm.Rows...)
	}
	return func() {
		for _, r := range fm.Rows {
			r.Release()
		}
	}
}

// rowsAt returns the rows of one file of snap at the given logical positions.
func rowsAt(t *testing.T, snap *delta.Snapshot, path string, positions []int64) arrow.RecordBatch {
	t.Helper()
	sc, err := snap.Scan(context.Background(), delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for sc.Next() {
		file, first, _ := sc.Position()
		if file.Path != path {
			continue
		}
		rec := sc.RecordBatch()
		for _, p := range positions {
			if p >= first && p < first+rec.NumRows() {
				parts = append(parts, rec.NewSlice(p-first, p-first+1))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	cols := make([]arrow.Array, sc.Schema().NumFields())
	for c := range cols {
		chunks := make([]arrow.Array, len(parts))
		for i, p := range parts {
			chunks[i] = p.Column(c)
		}
		a, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release()
		cols[c] = a
	}
	return array.NewRecordBatch(sc.Schema(), cols, int64(len(parts)))
}

// Two writers that mark rows of the same file: the second, working on the version before
// the first's commit, must not commit a vector that drops the first's rows.
func TestConcurrentDeletionVectorWritersConflict(t *testing.T) {
	ctx := context.Background()
	dvt, _ := dvTable(t, []row{{1, "ann", "a"}, {2, "bob", "a"}, {3, "cy", "a"}, {4, "dee", "a"}})
	before, err := dvt.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dvt.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", int64(1))}); err != nil {
		t.Fatal(err)
	}
	src := sourceRecord([]row{{2, "", "a"}}, []string{"D"})
	defer src.Release()
	opts := upsertOptions(src)
	opts.Tx = dvt.NewTransaction(before, delta.TxOptions{})
	_, err = dvt.Merge(ctx, opts)
	var ce *delta.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("merge on the older version: %v, want a *delta.ConflictError", err)
	}
	if got := latestRows(t, dvt); !slices.Equal(got, []string{"id=2 name=bob part=a", "id=3 name=cy part=a", "id=4 name=dee part=a"}) {
		t.Errorf("rows %v", got)
	}
	// Run again on the latest version, it marks both.
	if _, err := dvt.Merge(ctx, upsertOptions(src)); err != nil {
		t.Fatal(err)
	}
	if got := latestRows(t, dvt); !slices.Equal(got, []string{"id=3 name=cy part=a", "id=4 name=dee part=a"}) {
		t.Errorf("rows after the rerun %v", got)
	}
}

// Given rows that do not fit their matches are refused, and nothing is committed.
func TestMergePositionsGivenRowsErrors(t *testing.T) {
	ctx := context.Background()
	dvt, _ := dvTable(t, []row{{1, "ann", "a"}, {2, "bob", "a"}})
	src := sourceRecord([]row{{1, "an", "a"}}, []string{"U"})
	defer src.Release()
	snap, err := dvt.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file := snap.Files()[0].Path
	rows := rowsAt(t, snap, file, []int64{0, 1})
	defer rows.Release()
	for _, tc := range []struct {
		name string
		fm   *delta.FileMatches
		want string
	}{
		{"too many rows", &delta.FileMatches{Target: []int64{0}, Source: []int32{0}, Rows: []arrow.RecordBatch{rows}}, "2 rows given for 1 target rows"},
		{"past the file's end", &delta.FileMatches{Target: []int64{5}, Source: []int32{0}, Rows: []arrow.RecordBatch{rows.NewSlice(0, 1)}}, "the file has 2 rows"},
		{"other schema", &delta.FileMatches{Target: []int64{0}, Source: []int32{0}, Rows: []arrow.RecordBatch{src}}, "want the table's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := upsertOptions(src)
			opts.Tx = dvt.NewTransaction(snap, delta.TxOptions{})
			opts.Positions = &delta.MergePositions{Files: map[string]*delta.FileMatches{file: tc.fm}}
			_, err := dvt.Merge(ctx, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if got := latestRows(t, dvt); !slices.Equal(got, []string{"id=1 name=ann part=a", "id=2 name=bob part=a"}) {
				t.Errorf("table changed: %v", got)
			}
		})
	}
}
