package delta_test

import (
	"context"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// Tables other writers made (testdata/golden/foreign-read; README there says where each
// comes from), read exactly.

func foreignDir(t testing.TB, name string) string {
	return filepath.Join(goldenDir(t), "foreign-read", name)
}

// copyTable copies a golden table to a temporary directory (a test that writes, or sets
// file times, must not touch the checkout).
func copyTable(t testing.TB, src string) string {
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// foreignRows scans a snapshot into rows rendered as "col=value" strings, sorted.
func foreignRows(t testing.TB, snap *delta.Snapshot, where string) []string {
	t.Helper()
	opts := delta.ScanOptions{}
	if where != "" {
		p, err := expr.Parse(where)
		if err != nil {
			t.Fatalf("%q: %v", where, err)
		}
		opts.Filter = p
	}
	sc, err := snap.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := range int(rec.NumRows()) {
			var cols []string
			for j, c := range rec.Columns() {
				v := "null"
				if c.IsValid(i) && c.DataType().ID() != arrow.NULL {
					v = c.ValueStr(i)
				}
				cols = append(cols, rec.ColumnName(j)+"="+v)
			}
			out = append(out, strings.Join(cols, " "))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan where %q: %v", where, err)
	}
	slices.Sort(out)
	return out
}

// In canonicalized-paths-{normal,special}-{a,b} (delta-io/delta's golden tables) version 0
// adds /some/unqualified/... and version 1 removes it spelled file:/... or file:///...:
// the table has no file at version 1, one at version 0, and vacuum and the change feed
// agree on the file.
func TestForeignCanonicalizedPaths(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"normal-a", "normal-b", "special-a", "special-b"} {
		t.Run(name, func(t *testing.T) {
			tbl, err := openDir(t, foreignDir(t, "canonicalized-paths-"+name))
			if err != nil {
				t.Fatal(err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version() != 1 || len(snap.Files()) != 0 {
				t.Fatalf("version %d with files %v, want version 1 with none", snap.Version(), paths(snap.Files()))
			}
			v0, err := tbl.SnapshotAt(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			wantPath := "file:///some/unqualified/absolute/path"
			if strings.HasPrefix(name, "special") {
				wantPath = "file:///some/unqualified/with%20space/p@%23h"
			}
			if got := paths(v0.Files()); !slices.Equal(got, []string{wantPath}) {
				t.Errorf("version 0 files %v, want [%s]", got, wantPath)
			}
			if ts := snap.Tombstones(); len(ts) != 1 || ts[0].Path != wantPath {
				t.Errorf("tombstones %v, want the one file as %s", ts, wantPath)
			}
		})
	}
}

func paths(adds []*delta.Add) []string {
	var out []string
	for _, a := range adds {
		out = append(out, a.Path)
	}
	return out
}

// crc-full (delta-kernel-rs) has commitInfo.inCommitTimestamp without enabling in-commit
// timestamps: its history and time travel use the commit file's time, not that field.
// Its only commit adds no file (the files are only in its .crc, which readers ignore).
func TestForeignCRCFullHistoryTime(t *testing.T) {
	ctx := context.Background()
	dir := copyTable(t, foreignDir(t, "crc-full"))
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	tbl, err := openDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tbl.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || !h[0].Timestamp.Equal(mtime) {
		t.Fatalf("history %+v, want version 0 at the file time %s (not the inCommitTimestamp 2023-09-15T06:10:57Z)", h, mtime)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Timestamp().Equal(mtime) {
		t.Errorf("snapshot timestamp %s, want %s", snap.Timestamp(), mtime)
	}
	if got := foreignRows(t, snap, ""); len(got) != 0 || len(snap.Files()) != 0 {
		t.Errorf("rows %v, files %v, want none", got, paths(snap.Files()))
	}
}

// An absolute add path is a file at that location: read when the table's store holds it
// (outside the table's directory), refused by name when it does not, never looked up
// below the table root.
func TestForeignAbsolutePaths(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	st, err := fs.New(fs.Config{Dir: base})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sch := &delta.StructType{Fields: []*delta.StructField{{Name: "id", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: true}}}
	tbl, err := delta.Create(ctx, st, "wh/t", delta.CreateOptions{Schema: sch}, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	asch, _ := delta.ArrowSchema(sch)
	b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{7, 8}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	adds, err := delta.WriteRecords(ctx, st, "wh/shared", sch, nil, []arrow.RecordBatch{rec}, delta.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The file lies in the store, beside the table: named by an absolute path (no scheme).
	abs := *adds[0]
	abs.Path = filepath.ToSlash(filepath.Join(base, "wh", "shared")) + "/" + adds[0].Path
	// A second copy of it, named with file:// and a space escaped, inside the table.
	inTable := *adds[0]
	if err := os.MkdirAll(filepath.Join(base, "wh", "t", "a b"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(base, "wh", "shared", adds[0].Path))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "wh", "t", "a b", "f.parquet"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	inTable.Path = "file://" + strings.ReplaceAll(filepath.ToSlash(filepath.Join(base, "wh", "t", "a b")), " ", "%20") + "/f.parquet"
	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	tx.AddFiles(&abs, &inTable)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if snap, err = tbl.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if got := paths(snap.Files()); !slices.Contains(got, "a%20b/f.parquet") {
		t.Errorf("files %v: the file:// path inside the table should read as the relative a%%20b/f.parquet", got)
	}
	got := foreignRows(t, snap, "")
	if want := []string{"id=7", "id=7", "id=8", "id=8"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}

	// Outside the store: refused, naming the file, with no hint at library options.
	outside := *adds[0]
	outside.Path = "/nonexistent-elsewhere/x.parquet"
	tx = tbl.NewTransaction(snap, delta.TxOptions{})
	tx.AddFiles(&outside)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	sc, err := snap.Scan(ctx, delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = delta.ReadAll(sc)
	sc.Release()
	if err == nil || !strings.Contains(err.Error(), "file:///nonexistent-elsewhere/x.parquet is outside") || strings.Contains(err.Error(), "Options") {
		t.Errorf("reading a file outside the store: error %v", err)
	}
}

// foreignExpected is what Spark read from the tables its generate.py wrote.
type foreignExpected struct {
	Engine string `json:"engine"`
	Basic  struct {
		Rows  []map[string]string `json:"rows"`
		Where map[string]int      `json:"where"`
	} `json:"data-skipping-basic-stats-all-types"`
	Inexact struct {
		Where map[string][]int64 `json:"where"`
	} `json:"data-skipping-inexact-stats"`
	Void struct {
		Schema string           `json:"schema"`
		Rows   []map[string]any `json:"rows"`
	} `json:"void-column"`
	TSPart struct {
		Rows []map[string]string `json:"rows"`
	} `json:"timestamp-partitioned-table"`
}

func loadForeignExpected(t testing.TB) *foreignExpected {
	b, err := os.ReadFile(foreignDir(t, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e foreignExpected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

func openForeign(t testing.TB, name string) *delta.Snapshot {
	t.Helper()
	tbl, err := openDir(t, foreignDir(t, name))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// Spark's answers to predicates on float, double, decimal, timestamp and string columns
// whose JSON stats are inexact are the rows a scan with --where returns.
func TestForeignDataSkipping(t *testing.T) {
	exp := loadForeignExpected(t)
	snap := openForeign(t, "data-skipping-inexact-stats")
	if len(snap.Files()) < 3 {
		t.Fatalf("%d files: the table should spread its rows over several files", len(snap.Files()))
	}
	if len(exp.Inexact.Where) == 0 {
		t.Fatal("expected.json has no predicates")
	}
	for where, want := range exp.Inexact.Where {
		p, err := expr.Parse(where)
		if err != nil {
			t.Fatalf("%q: %v", where, err)
		}
		sc, err := snap.Scan(context.Background(), delta.ScanOptions{Filter: p, Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for sc.Next() {
			c := sc.RecordBatch().Column(0).(*array.Int64)
			got = append(got, c.Int64Values()...)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sc.Release()
		slices.Sort(got)
		if want == nil {
			want = []int64{}
		}
		if got == nil {
			got = []int64{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("--where %q: ids %v, Spark returns %v", where, got, want)
		}
	}

	basic := openForeign(t, "data-skipping-basic-stats-all-types")
	if got := foreignRows(t, basic, ""); len(got) != 1 || len(exp.Basic.Rows) != 1 {
		t.Fatalf("rows %v, Spark %v", got, exp.Basic.Rows)
	}
	for where, n := range exp.Basic.Where {
		if got := foreignRows(t, basic, where); len(got) != n {
			t.Errorf("--where %q: %d rows, Spark %d", where, len(got), n)
		}
	}
}

// A void (NullType) column reads as all-null; appending leaves it out of the data files
// as Spark does, and it still reads as null.
func TestForeignVoidColumn(t *testing.T) {
	exp := loadForeignExpected(t)
	ctx := context.Background()
	dir := copyTable(t, foreignDir(t, "void-column"))
	tbl, err := openDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f := snap.Schema().Field("v"); f == nil || f.Type.String() != "void" {
		t.Fatalf("schema %s: want a void column v", snap.Schema())
	}
	got := foreignRows(t, snap, "")
	var want []string
	for _, r := range exp.Void.Rows {
		if r["v"] != nil {
			t.Fatalf("Spark row %v has a non-null v", r)
		}
		want = append(want, "id="+jsonNum(r["id"])+" v=null")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %v, Spark %v", got, want)
	}
	if got := foreignRows(t, snap, "v IS NULL"); len(got) != len(want) {
		t.Errorf("v IS NULL: %d rows, want %d", len(got), len(want))
	}

	asch, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, asch)
	b.Field(0).(*array.Int64Builder).Append(10)
	b.Field(1).AppendNull()
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := tbl.Append(ctx, delta.AppendOptions{Records: []arrow.RecordBatch{rec}}); err != nil {
		t.Fatal(err)
	}
	before := paths(snap.Files())
	snap, _ = tbl.Snapshot(ctx)
	if got := foreignRows(t, snap, "id = 10"); !slices.Equal(got, []string{"id=10 v=null"}) {
		t.Errorf("appended row reads %v", got)
	}
	if got := foreignRows(t, snap, "v IS NULL"); len(got) != len(want)+1 {
		t.Errorf("after the append, v IS NULL: %d rows, want %d", len(got), len(want)+1)
	}
	for _, a := range snap.Files() {
		if slices.Contains(before, a.Path) {
			continue
		}
		if strings.Contains(a.Stats, `"v"`) {
			t.Errorf("file %s has stats for the void column: %s", a.Path, a.Stats)
		}
	}
}

func jsonNum(v any) string {
	if f, ok := v.(float64); ok {
		return new(big.Float).SetFloat64(f).Text('f', -1)
	}
	return "?"
}

// timestamp-partitioned-table (delta-kernel-rs's shape): the partition directory and the
// add path hold an unescaped ':' (time=1971-07-22T03:06:40.000000Z); it reads as Spark
// reads it.
func TestForeignTimestampPartitionWithColon(t *testing.T) {
	exp := loadForeignExpected(t)
	snap := openForeign(t, "timestamp-partitioned-table")
	if p := snap.Files()[0].Path; !strings.Contains(p, "time=1971-07-22T03:06:40.000000Z/") {
		t.Fatalf("add path %s: the table should have kernel-rs's unescaped form", p)
	}
	got := foreignRows(t, snap, "")
	if len(exp.TSPart.Rows) != 1 {
		t.Fatalf("Spark rows %v", exp.TSPart.Rows)
	}
	if want := []string{"id=1 x=0.5 s=null time=1971-07-22T03:06:40Z"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v (Spark: %v)", got, want, exp.TSPart.Rows)
	}
	if got := foreignRows(t, snap, "time = '1971-07-22T03:06:40Z'"); len(got) != 1 {
		t.Errorf("where time = ...: %v", got)
	}
}
