package delta

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// goldenTables finds the delta-golden conformance tables (read in place, never written)
// under testenv.GoldenDir.
func goldenTables(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testenv.GoldenDir(t), "delta-golden")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("golden tables: %v", err)
	}
	return dir
}

// goldenRefusals are the tables the log side refuses; their row tests assert the error
// names the feature instead of comparing rows.
var goldenRefusals = map[string]string{}

// goldenSkipColumns are compared loosely (golden README caveat 3: the expected
// as_timestamp was produced in the generator's local zone).
var goldenSkipColumns = map[string][]string{
	"data-reader-partition-values": {"as_timestamp"},
}

func TestGoldenRows(t *testing.T) {
	root := goldenTables(t)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, e := range entries {
		name := e.Name()
		exps, _ := filepath.Glob(filepath.Join(root, name, "expected*"))
		for _, exp := range exps {
			version := int64(-1)
			switch filepath.Base(exp) {
			case "expected-v0":
				version = 0
			case "expected-v1":
				version = 1
			}
			ran++
			t.Run(name+"/"+filepath.Base(exp), func(t *testing.T) {
				checkGoldenRows(t, filepath.Join(root, name), name, version, exp)
			})
		}
	}
	if ran < 10 {
		t.Errorf("only %d expected directories found under %s", ran, root)
	}
}

func checkGoldenRows(t *testing.T, dir, name string, version int64, expDir string) {
	ctx := context.Background()
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := Open(ctx, st, "delta", Options{})
	var snap *Snapshot
	if err == nil {
		if version >= 0 {
			snap, err = tbl.SnapshotAt(ctx, version)
		} else {
			snap, err = tbl.Snapshot(ctx)
		}
	}
	var recs []arrow.RecordBatch
	if err == nil {
		var sc *Scanner
		if sc, err = snap.Scan(ctx, ScanOptions{}); err == nil {
			defer sc.Release()
			recs, err = ReadAll(sc)
		}
	}
	if feature, refused := goldenRefusals[name]; refused {
		if err == nil || !strings.Contains(err.Error(), "unsupported table feature") || !strings.Contains(err.Error(), feature) {
			t.Fatalf("reading %s: error %v, want an unsupported table feature error naming %s", name, err, feature)
		}
		return
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	want := readExpected(t, expDir, recs, snap)
	skip := goldenSkipColumns[name]
	got := rowSet(t, dropColumns(recs, skip))
	diffRows(t, got, rowSet(t, dropColumns(want, skip)))
	for _, c := range skip {
		checkZoneShifted(t, c, recs, want)
	}
	if len(got) == 0 {
		t.Errorf("no rows read (expected %d)", len(want))
	}
}

// readExpected reads the expected Parquet files and casts them to the scan's schema.
func readExpected(t *testing.T, dir string, _ []arrow.RecordBatch, snap *Snapshot) []arrow.RecordBatch {
	t.Helper()
	target, err := ArrowSchema(snap.Schema())
	if err != nil {
		t.Fatal(err)
	}
	return readExpectedAs(t, dir, target)
}

// readExpectedAs reads the expected Parquet files in dir and casts their columns, matched
// by name, to target's (a column the files lack reads as nulls).
func readExpectedAs(t *testing.T, dir string, target *arrow.Schema) []arrow.RecordBatch {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return nil
	})
	var out []arrow.RecordBatch
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := file.NewParquetReader(f)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		tr := array.NewTableReader(tbl, -1)
		for tr.Next() {
			rec := tr.RecordBatch()
			cols := make([]arrow.Array, target.NumFields())
			for i, tf := range target.Fields() {
				idx := -1
				for j, f := range rec.Schema().Fields() {
					if strings.EqualFold(f.Name, tf.Name) {
						idx = j
					}
				}
				if idx < 0 {
					cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, tf.Type, int(rec.NumRows()))
					continue
				}
				c, err := dschema.Cast(memory.DefaultAllocator, rec.Column(idx), tf.Type)
				if err != nil {
					t.Fatalf("%s column %s: %v", p, tf.Name, err)
				}
				cols[i] = c
			}
			out = append(out, array.NewRecordBatch(target, cols, rec.NumRows()))
		}
		tr.Release()
		tbl.Release()
		pf.Close()
	}
	return out
}

func dropColumns(recs []arrow.RecordBatch, names []string) []arrow.RecordBatch {
	if len(names) == 0 {
		return recs
	}
	var out []arrow.RecordBatch
	for _, r := range recs {
		var fields []arrow.Field
		var cols []arrow.Array
		for i, f := range r.Schema().Fields() {
			drop := false
			for _, n := range names {
				drop = drop || strings.EqualFold(n, f.Name)
			}
			if !drop {
				fields = append(fields, f)
				cols = append(cols, r.Column(i))
			}
		}
		out = append(out, array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, r.NumRows()))
	}
	return out
}

// TestGoldenPruning filters golden tables (stats and partition values written by Spark)
// and checks that pruning skipped files yet lost no row: the filtered scan equals the
// unfiltered scan with the predicate applied row by row.
func TestGoldenPruning(t *testing.T) {
	root := goldenTables(t)
	for _, tc := range []struct {
		table, where string
		wantPruned   bool
	}{
		{"basic-decimal-table", "col3 > 0", true},
		{"basic-decimal-table", "part = 234.00000 OR col1 < -1", true},
		{"kernel-timestamp-int96", "part = TIMESTAMP '2020-01-01T08:09:10.001Z'", true},
		{"kernel-timestamp-int96", "part IS NULL OR id >= 3", true},
		{"data-reader-partition-values", "as_int = 1 AND as_boolean = false", true},
		{"data-reader-partition-values", "as_string_lit_null = 'null' AND as_date >= DATE '2021-09-08'", true},
		{"data-reader-partition-values", "as_big_decimal IS NULL OR as_double < 1.5", false},
		{"data-reader-timestamp_ntz", "tsNtz > TIMESTAMP '2021-11-18 02:30:00.123'", true},
		{"data-reader-timestamp_ntz", "tsNtzPartition = TIMESTAMP '2013-07-05 17:01:00.123456'", true},
		{"basic-with-inserts-deletes-checkpoint", "id BETWEEN 10 AND 12", true},
	} {
		t.Run(tc.table+"/"+tc.where, func(t *testing.T) {
			ctx := context.Background()
			st, err := fs.New(fs.Config{Dir: filepath.Join(root, tc.table)})
			if err != nil {
				t.Fatal(err)
			}
			tbl, err := Open(ctx, st, "delta", Options{})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pred, err := expr.Parse(tc.where)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := snap.Scan(ctx, ScanOptions{Filter: pred})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadAll(sc)
			if err != nil {
				t.Fatal(err)
			}
			stats := sc.Stats()
			sc.Release()
			if (stats.FilesPruned > 0) != tc.wantPruned {
				t.Errorf("pruned %d of %d files, want pruning %v", stats.FilesPruned, stats.FilesTotal, tc.wantPruned)
			}
			all, _ := scanAll(t, st, "delta", snap.Schema(), snap.PartitionColumns(), snap.Files(), ScanOptions{})
			bp, err := bindPredicate(pred, snap.Schema())
			if err != nil {
				t.Fatal(err)
			}
			var want []arrow.RecordBatch
			for _, r := range all {
				rows, keepAll, err := bp.KeptRows(r)
				if err != nil {
					t.Fatal(err)
				}
				if keepAll {
					want = append(want, r)
					continue
				}
				fr, err := arrowx.Take(ctx, memory.DefaultAllocator, r, rows)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, fr)
			}
			g, w := rowSet(t, got), rowSet(t, want)
			diffRows(t, g, w)
			t.Logf("%d of %d files pruned, %d rows", stats.FilesPruned, stats.FilesTotal, len(g))
		})
	}
}

// checkZoneShifted compares a timestamp column whose expected values were produced in an
// unknown session zone: the same nulls, and values that differ by a whole number of
// quarter hours, at most 14 hours.
func checkZoneShifted(t *testing.T, column string, got, want []arrow.RecordBatch) {
	t.Helper()
	collect := func(recs []arrow.RecordBatch) []int64 {
		var out []int64
		for _, r := range recs {
			for i, f := range r.Schema().Fields() {
				if !strings.EqualFold(f.Name, column) {
					continue
				}
				a := r.Column(i).(*array.Timestamp)
				for j := 0; j < a.Len(); j++ {
					if a.IsNull(j) {
						out = append(out, math.MinInt64)
					} else {
						out = append(out, int64(a.Value(j)))
					}
				}
			}
		}
		slices.Sort(out)
		return out
	}
	g, w := collect(got), collect(want)
	if len(g) != len(w) {
		t.Fatalf("%s: %d values, want %d", column, len(g), len(w))
	}
	const quarter = int64(15 * time.Minute / time.Microsecond)
	for i := range g {
		d := g[i] - w[i]
		if (g[i] == math.MinInt64) != (w[i] == math.MinInt64) || d%quarter != 0 || d > 56*quarter || d < -56*quarter {
			t.Errorf("%s: value %d is %d, want %d up to a zone offset", column, i, g[i], w[i])
		}
	}
}
