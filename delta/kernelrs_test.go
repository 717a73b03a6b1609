package delta

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/klauspost/compress/zstd"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// delta-kernel-rs's test tables (testdata/golden/kernel-rs; its README says where each
// comes from), each read at every version and compared with what Delta-Spark reads
// from it (kernel-rs/generate.py wrote the answers): rows, DESCRIBE HISTORY, time
// travel by timestamp and the change data feed.

// kernelRsExpected is kernel-rs/expected.json.
type kernelRsExpected struct {
	Engine string `json:"engine"`
	Tables map[string]struct {
		Latest   int64            `json:"latest_version"`
		Versions map[string]int64 `json:"versions"` // version → Spark's row count
		History  []struct {
			Version     int64   `json:"version"`
			Operation   *string `json:"operation"`
			TimestampMS int64   `json:"timestamp_ms"`
		} `json:"history"`
		CDFStart *int64            `json:"cdf_start"`
		CDFRows  int64             `json:"cdf_rows"`
		Errors   map[string]string `json:"errors"`
	} `json:"tables"`
}

// kernelRsBaseMS is the commit time given to a commit without commitInfo: this plus one
// second per version (generate.py uses the same rule).
const kernelRsBaseMS = 1_700_000_000_000

func TestKernelRsTables(t *testing.T) {
	dir := filepath.Join(testenv.GoldenDir(t), "kernel-rs")
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp kernelRsExpected
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "tables"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(exp.Tables) {
		t.Errorf("%d tables in tables/, %d in expected.json: rerun generate.py", len(entries), len(exp.Tables))
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".tar.zst")
		want, ok := exp.Tables[name]
		if !ok {
			t.Errorf("%s: not in expected.json", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			root := kernelRsUnpack(t, filepath.Join(dir, "tables", e.Name()))
			kernelRsSetMtimes(t, root)
			st, err := fs.New(fs.Config{Dir: root})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tbl, err := Open(ctx, st, "", Options{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			if snap.Version() != want.Latest {
				t.Errorf("latest version %d, Spark %d", snap.Version(), want.Latest)
			}
			for v := int64(0); v <= want.Latest; v++ {
				vs := strconv.FormatInt(v, 10)
				if n, ok := want.Versions[vs]; ok {
					kernelRsCompareVersion(t, tbl, v, n, filepath.Join(dir, "expected", name, "v"+vs))
					continue
				}
				// Spark gave no rows: kernel-rs's own answer, or the same failure.
				sparkErr := want.Errors["v"+vs]
				if rows, ok := kernelRsOwnRows[name][v]; ok {
					if got := kernelRsRows(t, tbl, v); !slices.Equal(got, rows) {
						t.Errorf("v%d: rows %v, kernel-rs %v (Spark: %s)", v, got, rows, sparkErr)
					}
					continue
				}
				if counts, ok := kernelRsOwnCounts[name]; ok && v < int64(len(counts)) {
					if got := kernelRsRows(t, tbl, v); len(got) != counts[v] {
						t.Errorf("v%d: %d rows, want %d", v, len(got), counts[v])
					}
					continue
				}
				if fake, ok := kernelRsFakePaths[name]; ok {
					if s, err := tbl.SnapshotAt(ctx, v); err != nil || len(s.Files()) == 0 {
						if got := kernelRsRows(t, tbl, v); len(got) != 0 {
							t.Errorf("v%d: rows %v, want none", v, got)
						}
						continue
					}
					sparkErr = "[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file " + fake + ". File does not exist"
				}
				if !kernelRsSameRefusal(t, tbl, v, sparkErr) {
					t.Errorf("v%d: Spark refused it (%s): we owe an answer", v, sparkErr)
				}
			}
			if want.History != nil {
				kernelRsCompareHistory(t, tbl, want.History)
			} else if h, err := tbl.History(ctx, 0); err != nil || int64(len(h)) != want.Latest+1 {
				t.Errorf("history: %d versions (%v), want %d", len(h), err, want.Latest+1)
			}
			if want.CDFStart != nil {
				kernelRsCompareChanges(t, tbl, *want.CDFStart, want.Latest, want.CDFRows, filepath.Join(dir, "expected", name, "cdf"))
			}
			if check, ok := kernelRsChecks[name]; ok {
				check(t, tbl)
			}
		})
	}
}

// kernelRsOwnRows are kernel-rs's expected rows (its tests/read.rs), rendered by
// kernelRsRows, of versions Spark does not read.
var kernelRsOwnRows = map[string]map[int64][]string{
	// Spark fails on the add path's unescaped ':' (URISyntaxException); s is an empty
	// string (its stats: min and max "", no nulls).
	"timestamp-partitioned-table": {0: {`id=1 x=0.5 s="" time=1971-07-22T03:06:40Z`}},
	// Delta-Spark 4.4 refuses the preview's byte → decimal widening
	// (DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA); kernel-rs's type_widening_basic and
	// type_widening_decimal give these values (decimals there with their scale:
	// 67.89000, 1.0).
	"type-widening": {2: {
		"byte_long=1 int_long=2 float_double=3.4000000953674316 byte_double=5 short_double=6 int_double=7 decimal_decimal_same_scale=123.45 decimal_decimal_greater_scale=67.89 byte_decimal=1 short_decimal=2 int_decimal=3 long_decimal=4 date_timestamp_ntz=2024-09-09T00:00:00",
		"byte_long=9223372036854775807 int_long=9223372036854775807 float_double=1.234567890123 byte_double=1.234567890123 short_double=1.234567890123 int_double=1.234567890123 decimal_decimal_same_scale=12345678901234.56 decimal_decimal_greater_scale=12345678901.23456 byte_decimal=123.4 short_decimal=12345.6 int_decimal=1234567890.1 long_decimal=123456789012345678.9 date_timestamp_ntz=2024-09-09T12:34:56.123456",
	}},
}

// kernelRsOwnCounts are the rows of each version of tables Spark refuses because their
// metadata enables the change data feed while their (3,7) protocol does not list it
// (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH); kernel-rs reads them, and so do we.
var kernelRsOwnCounts = map[string][]int{
	// The one file re-added with a different deletion vector each version (the log's DV
	// cardinalities); its change feed is TestCDFGolden's, from kernel-rs's tests/cdf.rs.
	"cdf-table-with-dv": {10, 8, 10, 6, 8, 9, 10},
}

// kernelRsFakePaths are log-only tables whose adds name files that never existed.
var kernelRsFakePaths = map[string]string{"table-with-cdf": "fake/path/1"}

// kernelRsRows scans version v into "col=value" strings, sorted.
func kernelRsRows(t *testing.T, tbl *Table, v int64) []string {
	t.Helper()
	s, err := tbl.SnapshotAt(context.Background(), v)
	if err != nil {
		t.Fatalf("v%d: %v", v, err)
	}
	sc, err := s.Scan(context.Background(), ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	recs, err := ReadAll(sc)
	if err != nil {
		t.Fatalf("v%d: %v", v, err)
	}
	var out []string
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			var cols []string
			for j, c := range rec.Columns() {
				val := "null"
				if c.IsValid(i) {
					val = c.ValueStr(i)
					if _, ok := c.(*array.String); ok {
						val = strconv.Quote(val)
					}
				}
				cols = append(cols, rec.ColumnName(j)+"="+val)
			}
			out = append(out, strings.Join(cols, " "))
		}
	}
	slices.Sort(out)
	return out
}

// kernelRsSameRefusal reports whether reading version v fails as Spark's did: tables
// the crate ships without their data files (kernel-rs uses them for log replay only)
// fail naming the missing file.
func kernelRsSameRefusal(t *testing.T, tbl *Table, v int64, sparkErr string) bool {
	t.Helper()
	m := regexp.MustCompile(`FILE_NOT_EXIST\] Encountered error while reading file (\S+)\. File does not exist`).FindStringSubmatch(sparkErr)
	if m == nil {
		return false
	}
	missing := filepath.Base(m[1])
	s, err := tbl.SnapshotAt(context.Background(), v)
	if err == nil {
		var sc *Scanner
		if sc, err = s.Scan(context.Background(), ScanOptions{}); err == nil {
			_, err = ReadAll(sc)
			sc.Release()
		}
	}
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("v%d: error %v, want one naming the missing file %s as Spark's (%s)", v, err, missing, sparkErr)
	}
	return true
}

// kernelRsChecks are further facts kernel-rs's own tests assert of a table.
var kernelRsChecks = map[string]func(t *testing.T, tbl *Table){
	// src/actions/set_transaction.rs: the idempotent writers' last versions.
	"app-txn-no-checkpoint": func(t *testing.T, tbl *Table) { kernelRsTxns(t, tbl, map[string]int64{"my-app": 3, "my-app2": 2}) },
	"app-txn-checkpoint":    func(t *testing.T, tbl *Table) { kernelRsTxns(t, tbl, map[string]int64{"my-app": 3, "my-app2": 2}) },
	// Four txns, three with a lastUpdated older than delta.setTransactionRetentionDuration:
	// kernel-rs lists all four without a retention; we keep every one (a rerun of an
	// expired writer is refused as a duplicate, never written twice).
	"app-txn-with-last-updated": func(t *testing.T, tbl *Table) {
		kernelRsTxns(t, tbl, map[string]int64{"new_app_0": 1, "new_app_1": 1, "new_app_2": 1, "old_app": 1})
	},
	"basic_partitioned": func(t *testing.T, tbl *Table) { kernelRsTxns(t, tbl, map[string]int64{"test": -1}) },
	// A log-only table (fake data paths): the change feed is enabled at versions 0 and
	// 1, disabled at 2 and enabled again at 3 (src/table_changes/mod.rs).
	"table-with-cdf": func(t *testing.T, tbl *Table) {
		for _, r := range [][2]int64{{0, 1}, {0, 0}, {1, 1}, {0, 2}, {1, 2}, {2, 2}, {2, 3}} {
			_, err := tbl.Changes(context.Background(), ChangesOptions{StartVersion: &r[0], EndVersion: &r[1]})
			valid := r[1] < 2
			if valid && err != nil {
				t.Errorf("change feed %d..%d: %v", r[0], r[1], err)
			}
			if !valid && !errors.Is(err, ErrChangeDataFeedDisabled) {
				t.Errorf("change feed %d..%d: error %v, want the feed disabled at version 2", r[0], r[1], err)
			}
		}
	},
}

func kernelRsTxns(t *testing.T, tbl *Table, want map[string]int64) {
	t.Helper()
	s, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for app, v := range want {
		got, ok := s.TxnVersion(app)
		if v < 0 && ok || v >= 0 && (!ok || got != v) {
			t.Errorf("txn %s: version %d (known %v), want %d", app, got, ok, v)
		}
	}
}

func kernelRsCompareVersion(t *testing.T, tbl *Table, v, sparkRows int64, expDir string) {
	t.Helper()
	ctx := context.Background()
	s, err := tbl.SnapshotAt(ctx, v)
	if err != nil {
		t.Errorf("v%d: %v", v, err)
		return
	}
	sc, err := s.Scan(ctx, ScanOptions{})
	if err != nil {
		t.Errorf("v%d: scan: %v", v, err)
		return
	}
	recs, err := ReadAll(sc)
	sc.Release()
	if err != nil {
		t.Errorf("v%d: scan: %v", v, err)
		return
	}
	target, err := ArrowSchema(s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	got, want := rowSet(t, recs), rowSet(t, readExpectedAs(t, expDir, target))
	if int64(len(want)) != sparkRows {
		t.Fatalf("v%d: %d expected rows in %s, Spark counted %d", v, len(want), expDir, sparkRows)
	}
	if !slices.Equal(got, want) {
		t.Errorf("v%d:", v)
		diffRows(t, got, want)
	}
}

func kernelRsCompareHistory(t *testing.T, tbl *Table, want []struct {
	Version     int64   `json:"version"`
	Operation   *string `json:"operation"`
	TimestampMS int64   `json:"timestamp_ms"`
}) {
	t.Helper()
	ctx := context.Background()
	hist, err := tbl.History(ctx, 0)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	if len(hist) != len(want) {
		t.Fatalf("history has %d versions, Spark %d", len(hist), len(want))
	}
	for i, w := range want {
		h := hist[len(hist)-1-i]
		op := ""
		if w.Operation != nil {
			op = *w.Operation
		}
		if h.Version != w.Version || h.Operation != op || h.Timestamp.UnixMilli() != w.TimestampMS {
			t.Errorf("history: version %d %q at %d, Spark: version %d %q at %d", h.Version, h.Operation, h.Timestamp.UnixMilli(), w.Version, op, w.TimestampMS)
		}
		// Time travel by timestamp: Spark's time of a version selects that version, and
		// a millisecond earlier the one before.
		if v, err := tbl.VersionAsOf(ctx, time.UnixMilli(w.TimestampMS)); err != nil || v != w.Version {
			t.Errorf("as of %d: version %d (%v), want %d", w.TimestampMS, v, err, w.Version)
		}
		if i > 0 {
			if v, err := tbl.VersionAsOf(ctx, time.UnixMilli(w.TimestampMS-1)); err != nil || v != w.Version-1 {
				t.Errorf("as of %d: version %d (%v), want %d", w.TimestampMS-1, v, err, w.Version-1)
			}
		}
	}
}

func kernelRsCompareChanges(t *testing.T, tbl *Table, start, end, sparkRows int64, expDir string) {
	t.Helper()
	r, err := tbl.Changes(context.Background(), ChangesOptions{StartVersion: &start, EndVersion: &end})
	if err != nil {
		t.Errorf("change feed %d..%d: %v", start, end, err)
		return
	}
	defer r.Release()
	var recs []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := r.Err(); err != nil {
		t.Errorf("change feed %d..%d: %v", start, end, err)
		return
	}
	// _commit_timestamp is each version's time in the history (compared with Spark's
	// DESCRIBE HISTORY there); the rest is compared with Spark's feed.
	hist, err := tbl.History(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	at := map[int64]int64{}
	for _, h := range hist {
		at[h.Version] = h.Timestamp.UnixMicro()
	}
	for _, rec := range recs {
		vs := rec.Column(rec.Schema().FieldIndices("_commit_version")[0]).(*array.Int64)
		ts := rec.Column(rec.Schema().FieldIndices("_commit_timestamp")[0]).(*array.Timestamp)
		for i := range vs.Len() {
			if int64(ts.Value(i)) != at[vs.Value(i)] {
				t.Errorf("change feed row of version %d: _commit_timestamp %d µs, history says %d", vs.Value(i), ts.Value(i), at[vs.Value(i)])
				break
			}
		}
	}
	recs = dropColumns(recs, []string{"_commit_timestamp"})
	target := arrow.NewSchema(slices.DeleteFunc(slices.Clone(r.Schema().Fields()), func(f arrow.Field) bool { return f.Name == "_commit_timestamp" }), nil)
	got, want := rowSet(t, recs), rowSet(t, readExpectedAs(t, expDir, target))
	if int64(len(want)) != sparkRows {
		t.Fatalf("change feed: %d expected rows in %s, Spark counted %d", len(want), expDir, sparkRows)
	}
	if !slices.Equal(got, want) {
		t.Errorf("change feed %d..%d:", start, end)
		diffRows(t, got, want)
	}
}

// kernelRsUnpack copies a table directory, or unpacks a .tar.zst archive (leaving out
// the macOS "._*" entries), into a temporary directory and returns the table root.
func kernelRsUnpack(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if !strings.HasSuffix(src, ".tar.zst") {
		root := filepath.Join(dst, filepath.Base(src))
		err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(root, rel), 0o755)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
		return root
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if strings.HasPrefix(filepath.Base(name), "._") || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(dst, strings.TrimSuffix(filepath.Base(src), ".tar.zst"))
}

// kernelRsSetMtimes sets each commit file's modification time from its
// commitInfo.timestamp (copies lose them), or kernelRsBaseMS plus one second per
// version for a commit without one.
func kernelRsSetMtimes(t *testing.T, root string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		v, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(name), ".json"), 10, 64)
		if err != nil {
			continue // a compacted or checkpoint file
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		ms := kernelRsBaseMS + v*1000
		for _, line := range strings.Split(string(b), "\n") {
			var a struct {
				CommitInfo *struct {
					Timestamp *int64 `json:"timestamp"`
				} `json:"commitInfo"`
			}
			if json.Unmarshal([]byte(line), &a) == nil && a.CommitInfo != nil && a.CommitInfo.Timestamp != nil {
				ms = *a.CommitInfo.Timestamp
				break
			}
		}
		ts := time.UnixMilli(ms)
		if err := os.Chtimes(name, ts, ts); err != nil {
			t.Fatal(err)
		}
	}
}
