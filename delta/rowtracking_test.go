package delta_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// rowIDs describes a file's default row ids: "path base..base+n-1 @version".
func rowIDs(a *delta.Add) string {
	if a.BaseRowID == nil || a.DefaultRowCommitVersion == nil {
		return a.Path + " (no row ids)"
	}
	n := int64(0)
	fmt.Sscanf(a.Stats[strings.Index(a.Stats, `"numRecords":`)+len(`"numRecords":`):], "%d", &n)
	return fmt.Sprintf("%s %d..%d @%d", a.Path, *a.BaseRowID, *a.BaseRowID+n-1, *a.DefaultRowCommitVersion)
}

func commitInfoTags(t *testing.T, tbl *delta.Table, v int64) map[string]string {
	t.Helper()
	h, err := tbl.History(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		if e.Version == v {
			return e.CommitInfo.Tags
		}
	}
	t.Fatalf("no version %d in the history", v)
	return nil
}

// A table created with delta.enableRowTracking assigns fresh row ids past the
// high-water mark and the commit version to every new file, records the mark in the
// delta.rowTracking domain, keeps both on files recommitted with a new deletion vector,
// gives concurrent appends distinct ids without a conflict, and says whether a commit
// preserved the stable ids of the rows it copied.
func TestRowTrackingAssignsRowIDs(t *testing.T) {
	ctx := context.Background()
	tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true", delta.PropEnableDeletionVectors: "true", "delta.checkpointInterval": "4"})
	snap, _ := tbl.Snapshot(ctx)
	p, props := snap.Protocol(), snap.Properties()
	if !slices.Contains(p.WriterFeatures, "rowTracking") || !slices.Contains(p.WriterFeatures, "domainMetadata") {
		t.Fatalf("protocol %+v lacks rowTracking and domainMetadata", p)
	}
	if !strings.HasPrefix(props[delta.PropMaterializedRowIDColumn], "_row-id-col-") || !strings.HasPrefix(props[delta.PropMaterializedRowCommitVersionColumn], "_row-commit-version-col-") {
		t.Errorf("materialized column names missing: %v", props)
	}
	if hwm, err := snap.RowIDHighWaterMark(); err != nil || hwm != -1 {
		t.Errorf("new table's high-water mark %d, %v; want -1", hwm, err)
	}
	appendFiles(t, tbl, addFile("part=a/f1.parquet", "a", 3), addFile("part=b/f2.parquet", "b", 2)) // v1: ids 0..4
	// Two appends on the same snapshot: the second commits after the first, with ids past
	// the first's.
	s1, _ := tbl.Snapshot(ctx)
	txA := tbl.NewTransaction(s1, delta.TxOptions{Operation: "WRITE"})
	txA.AddFiles(addFile("part=a/f3.parquet", "a", 4))
	txB := tbl.NewTransaction(s1, delta.TxOptions{Operation: "WRITE"})
	txB.AddFiles(addFile("part=a/f4.parquet", "a", 1))
	if v, err := txA.Commit(ctx); err != nil || v != 2 {
		t.Fatalf("first append: v%d, %v", v, err)
	}
	if v, err := txB.Commit(ctx); err != nil || v != 3 {
		t.Fatalf("concurrent append: v%d, %v (row ids must not make appends conflict)", v, err)
	}
	if tags := commitInfoTags(t, tbl, 3); tags["delta.rowTracking.preserved"] != "true" {
		t.Errorf("append's commit tags %v; want delta.rowTracking.preserved=true", tags)
	}
	s3, _ := tbl.Snapshot(ctx)
	var got []string
	for _, a := range s3.Files() {
		got = append(got, rowIDs(a))
	}
	want := []string{"part=a/f1.parquet 0..2 @1", "part=a/f3.parquet 5..8 @2", "part=a/f4.parquet 9..9 @3", "part=b/f2.parquet 3..4 @1"}
	if !slices.Equal(got, want) {
		t.Errorf("row ids:\ngot  %v\nwant %v", got, want)
	}
	if hwm, err := s3.RowIDHighWaterMark(); err != nil || hwm != 9 {
		t.Errorf("high-water mark %d, %v; want 9", hwm, err)
	}

	// A copy-on-write rewrite: f1 replaced by a file of its 2 remaining rows, with fresh
	// ids; the remove keeps f1's ids; the rows copied lost their stable ids.
	tx := tbl.NewTransaction(s3, delta.TxOptions{Operation: "DELETE"})
	tx.RemoveAdds(s3.Files()[0])
	tx.AddFiles(addFile("part=a/f5.parquet", "a", 2))
	v4, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tags := commitInfoTags(t, tbl, v4); tags["delta.rowTracking.preserved"] != "false" {
		t.Errorf("rewrite's commit tags %v; want delta.rowTracking.preserved=false", tags)
	}
	// A new deletion vector on f3: the same file, recommitted with its ids.
	s4, _ := tbl.Snapshot(ctx)
	var f3 *delta.Add
	for _, a := range s4.Files() {
		if a.Path == "part=a/f3.parquet" {
			f3 = a
		}
	}
	dvAdd := *f3
	dvAdd.DeletionVector = &delta.DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D", SizeInBytes: 36, Cardinality: 1}
	tx = tbl.NewTransaction(s4, delta.TxOptions{Operation: "DELETE"})
	tx.RemoveAdds(f3)
	tx.AddFiles(&dvAdd)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if tags := commitInfoTags(t, tbl, 5); tags["delta.rowTracking.preserved"] != "true" {
		t.Errorf("DV commit's tags %v; want delta.rowTracking.preserved=true", tags)
	}
	fresh, err := delta.Open(ctx, tbl.Store(), tbl.Root(), delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s5, _ := fresh.Snapshot(ctx)
	if s5.CheckpointVersion() != 4 {
		t.Errorf("loaded from checkpoint %d, want 4", s5.CheckpointVersion())
	}
	got = got[:0]
	for _, a := range s5.Files() {
		got = append(got, rowIDs(a))
	}
	want = []string{"part=a/f3.parquet 5..8 @2", "part=a/f4.parquet 9..9 @3", "part=a/f5.parquet 10..11 @4", "part=b/f2.parquet 3..4 @1"}
	if !slices.Equal(got, want) {
		t.Errorf("row ids after the rewrite, the DV and a checkpoint:\ngot  %v\nwant %v", got, want)
	}
	for _, r := range s5.Tombstones() {
		if r.Path == "part=a/f1.parquet" && (r.BaseRowID == nil || *r.BaseRowID != 0 || *r.DefaultRowCommitVersion != 1) {
			t.Errorf("f1's tombstone lost its row ids: %+v", r)
		}
	}
	if hwm, _ := s5.RowIDHighWaterMark(); hwm != 11 {
		t.Errorf("high-water mark %d, want 11", hwm)
	}
}

// A file without numRecords cannot get row ids: the commit is refused, naming it.
func TestRowTrackingNeedsNumRecords(t *testing.T) {
	tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true"})
	ctx := context.Background()
	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE"})
	a := addFile("part=a/f1.parquet", "a", 1)
	a.Stats = ""
	tx.AddFiles(a)
	if _, err := tx.Commit(ctx); err == nil || !strings.Contains(err.Error(), "part=a/f1.parquet") || !strings.Contains(err.Error(), "numRecords") {
		t.Fatalf("commit error = %v; want it to name the file and numRecords", err)
	}
}

// Row tracking can be turned on later only while every file has row ids: a table with
// no files gets the feature and the column names.
func TestRowTrackingEnabledLater(t *testing.T) {
	ctx := context.Background()
	empty, _, _ := newTestTable(t, nil)
	if _, err := empty.SetProperties(ctx, map[string]string{delta.PropEnableRowTracking: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	appendFiles(t, empty, addFile("part=a/f1.parquet", "a", 2))
	s, _ := empty.Snapshot(ctx)
	if a := s.Files()[0]; a.BaseRowID == nil || *a.BaseRowID != 0 || s.Properties()[delta.PropMaterializedRowIDColumn] == "" {
		t.Errorf("after enabling on an empty table: %s, %v", rowIDs(a), s.Properties())
	}
	withFiles, _, _ := newTestTable(t, nil)
	appendFiles(t, withFiles, addFile("part=a/f1.parquet", "a", 2))
	if _, err := withFiles.SetProperties(ctx, map[string]string{delta.PropEnableRowTracking: "true"}, nil); err == nil || !strings.Contains(err.Error(), "has no row ids") {
		t.Errorf("enabling on a table with files: %v; want a refusal naming a file without row ids", err)
	}
}

// With deletion vectors, a DELETE keeps each file (a new vector) and its row ids: the
// stable ids are preserved. An UPDATE moves the updated rows into a new file with a fresh
// baseRowId, the rows keeping their ids in its materialized column: preserved too.
func TestRowTrackingWithDeletionVectors(t *testing.T) {
	ctx := context.Background()
	tbl, _, _ := newTestTable(t, map[string]string{delta.PropEnableRowTracking: "true", delta.PropEnableDeletionVectors: "true"})
	commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "p"}, {2, "b", "p"}, {3, "c", "p"}}, nil, nil)
	s1, _ := tbl.Snapshot(ctx)
	orig := s1.Files()[0]
	where, _ := expr.Parse("id = 3")
	res, err := tbl.Delete(ctx, delta.DeleteOptions{Where: where})
	if err != nil {
		t.Fatal(err)
	}
	if tags := commitInfoTags(t, tbl, res.Version); tags["delta.rowTracking.preserved"] != "true" {
		t.Errorf("DV DELETE tags %v; want preserved=true", tags)
	}
	s2, _ := tbl.Snapshot(ctx)
	if len(s2.Files()) != 1 || s2.Files()[0].DeletionVector == nil || rowIDs(s2.Files()[0]) != rowIDs(orig) {
		t.Fatalf("after the DV DELETE: %v, want %s with a vector", s2.Files(), rowIDs(orig))
	}
	where, _ = expr.Parse("id = 2")
	res, err = tbl.Update(ctx, delta.UpdateOptions{Where: where, Set: map[string]any{"name": "B"}})
	if err != nil {
		t.Fatal(err)
	}
	if tags := commitInfoTags(t, tbl, res.Version); tags["delta.rowTracking.preserved"] != "true" {
		t.Errorf("DV UPDATE tags %v; want preserved=true", tags)
	}
	if got := rowTracking(t, tbl)[2]; got != (delta.RowTracking{RowID: 1, RowCommitVersion: res.Version}) {
		t.Errorf("updated row's row id and version %+v, want 1 @%d", got, res.Version)
	}
	s3, _ := tbl.Snapshot(ctx)
	var got []string
	for _, a := range s3.Files() {
		got = append(got, rowIDs(a)[strings.Index(rowIDs(a), " "):])
	}
	slices.Sort(got)
	if want := []string{" 0..2 @1", " 3..3 @3"}; !slices.Equal(got, want) {
		t.Errorf("row ids after the DV UPDATE %v, want %v", got, want)
	}
}
