package delta_test

import (
	"context"
	"encoding/json"
	"fmt"
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
)

type cdfCase struct {
	Table string `json:"table"`
	Query struct {
		StartingVersion   *int64 `json:"startingVersion"`
		EndingVersion     *int64 `json:"endingVersion"`
		StartingTimestamp string `json:"startingTimestamp"`
		EndingTimestamp   string `json:"endingTimestamp"`
	} `json:"query"`
	Columns  []string         `json:"columns"`
	RowCount int              `json:"row_count"`
	Rows     []map[string]any `json:"rows_unordered"`
}

// copyTableWithMtimes copies a golden table into a temporary directory and sets every
// N.json mtime from its commitInfo.timestamp (copies lose mtimes; DELTA.md §6).
func copyTableWithMtimes(t testing.TB, src string) string {
	t.Helper()
	root := copyDir(t, src)
	names, err := filepath.Glob(filepath.Join(root, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			var a struct {
				CommitInfo *struct {
					Timestamp int64 `json:"timestamp"`
				} `json:"commitInfo"`
			}
			if json.Unmarshal([]byte(line), &a) == nil && a.CommitInfo != nil {
				ts := time.UnixMilli(a.CommitInfo.Timestamp)
				if err := os.Chtimes(name, ts, ts); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return root
}

// changeRows reads a change feed into one canonical string per row over the given
// columns (dates as YYYY-MM-DD, timestamps as UTC with milliseconds and no zone).
func changeRows(t testing.TB, r *delta.ChangesReader, columns []string) []string {
	t.Helper()
	defer r.Release()
	var out []string
	for r.Next() {
		rec := r.RecordBatch()
		idx := make([]int, len(columns))
		for i, c := range columns {
			found := rec.Schema().FieldIndices(c)
			if len(found) != 1 {
				t.Fatalf("column %s not in the change feed schema %s", c, rec.Schema())
			}
			idx[i] = found[0]
		}
		for row := 0; row < int(rec.NumRows()); row++ {
			parts := make([]string, len(columns))
			for i, ci := range idx {
				parts[i] = columns[i] + "=" + cellString(rec.Column(ci), row)
			}
			out = append(out, strings.Join(parts, " "))
		}
	}
	if err := r.Err(); err != nil {
		t.Fatalf("change feed: %v", err)
	}
	slices.Sort(out)
	return out
}

func cellString(col arrow.Array, row int) string {
	if col.IsNull(row) {
		return "null"
	}
	switch c := col.(type) {
	case *array.Date32:
		return c.Value(row).ToTime().Format("2006-01-02")
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return c.Value(row).ToTime(unit).UTC().Format("2006-01-02T15:04:05.000")
	case *array.String:
		return c.Value(row)
	}
	return col.ValueStr(row)
}

func expectedRows(c cdfCase) []string {
	var out []string
	for _, r := range c.Rows {
		parts := make([]string, len(c.Columns))
		for i, col := range c.Columns {
			v := r[col]
			s := fmt.Sprint(v)
			if f, ok := v.(float64); ok {
				s = fmt.Sprintf("%d", int64(f))
			}
			if v == nil {
				s = "null"
			}
			parts[i] = col + "=" + s
		}
		out = append(out, strings.Join(parts, " "))
	}
	slices.Sort(out)
	return out
}

func parseGoldenTime(t testing.TB, s string) time.Time {
	t.Helper()
	if s == "" {
		return time.Time{}
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// Every case of cdf_expected.json (delta-rs load_cdf and delta-kernel-rs cdf tests).
func TestGoldenChangeDataFeed(t *testing.T) {
	dir := goldenDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "cdf_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []cdfCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, strings.ReplaceAll(c.Table, "/", "_")), func(t *testing.T) {
			root := copyTableWithMtimes(t, filepath.Join(dir, filepath.FromSlash(c.Table)))
			ctx := context.Background()
			opts := delta.ChangesOptions{
				StartVersion: c.Query.StartingVersion,
				EndVersion:   c.Query.EndingVersion,
				StartTime:    parseGoldenTime(t, c.Query.StartingTimestamp),
				EndTime:      parseGoldenTime(t, c.Query.EndingTimestamp),
			}
			tbl, err := openDir(t, root)
			if err != nil {
				t.Fatal(err)
			}
			r, err := tbl.Changes(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := changeRows(t, r, c.Columns)
			want := expectedRows(c)
			if len(got) != c.RowCount {
				t.Errorf("%d rows, want %d", len(got), c.RowCount)
			}
			if !slices.Equal(got, want) {
				t.Errorf("rows differ\ngot:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// Every sub-range of a Spark-written feed is the full feed restricted to its versions.
func TestGoldenChangeDataFeedSubRanges(t *testing.T) {
	dir := goldenDir(t)
	tbl, err := openDir(t, copyTableWithMtimes(t, filepath.Join(dir, "delta-rs", "cdf-table")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cols := []string{"id", "name", "birthday", "_change_type", "_commit_version"}
	r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(0))})
	if err != nil {
		t.Fatal(err)
	}
	all := changeRows(t, r, cols)
	if len(all) != 23 {
		t.Fatalf("full feed has %d rows, want 23", len(all))
	}
	for s := int64(0); s <= 3; s++ {
		for e := s; e <= 3; e++ {
			var want []string
			for _, row := range all {
				for v := s; v <= e; v++ {
					if strings.HasSuffix(row, fmt.Sprintf("_commit_version=%d", v)) {
						want = append(want, row)
					}
				}
			}
			r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(s), EndVersion: ptr(e)})
			if err != nil {
				t.Fatal(err)
			}
			if got := changeRows(t, r, cols); !slices.Equal(got, want) {
				t.Errorf("versions %d..%d: got %d rows %v, want %d rows %v", s, e, len(got), got, len(want), want)
			}
		}
	}
	// An end after the latest version is clamped to it (as Spark does).
	r, err = tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(0)), EndVersion: ptr(int64(99))})
	if err != nil {
		t.Fatal(err)
	}
	if got := changeRows(t, r, cols); !slices.Equal(got, all) || r.EndVersion() != 3 {
		t.Errorf("end 99: range ..%d, %d rows; want ..3 and the full feed", r.EndVersion(), len(got))
	}
	// A change-type filter keeps only those rows.
	r, err = tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(0)), Types: []string{"update_postimage", "delete"}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, row := range all {
		if strings.Contains(row, "_change_type=update_postimage") || strings.Contains(row, "_change_type=delete") {
			want = append(want, row)
		}
	}
	if got := changeRows(t, r, cols); !slices.Equal(got, want) {
		t.Errorf("types filter: got %v, want %v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// The errors name the versions involved.
func TestGoldenChangeDataFeedErrors(t *testing.T) {
	dir := goldenDir(t)
	ctx := context.Background()
	for _, tc := range []struct {
		table string
		opts  delta.ChangesOptions
		want  string
	}{
		{"delta-rs/checkpoint-cdf-table", delta.ChangesOptions{StartVersion: ptr(int64(0))}, "version 0 was removed from the log by log cleanup; the earliest available version is 3"},
		{"delta-rs/checkpoint-cdf-table", delta.ChangesOptions{StartVersion: ptr(int64(2)), EndVersion: ptr(int64(4))}, "version 2 was removed from the log by log cleanup; the earliest available version is 3"},
		{"delta-rs/cdf-table", delta.ChangesOptions{StartVersion: ptr(int64(4))}, "start version 4 is after the latest version 3"},
		{"delta-rs/cdf-table", delta.ChangesOptions{StartVersion: ptr(int64(2)), EndVersion: ptr(int64(1))}, "start version 2 is after end version 1"},
		{"delta-rs/cdf-table", delta.ChangesOptions{StartTime: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, "start timestamp 2030-01-01T00:00:00.000Z is after the latest version 3 (committed 2024-01-06T16:44:59.570Z)"},
		{"delta-rs/cdf-table", delta.ChangesOptions{StartVersion: ptr(int64(0)), EndTime: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}, "end timestamp 2020-01-01T00:00:00.000Z is before the earliest available version 0"},
		{"delta-rs/cdf-table", delta.ChangesOptions{}, "a start version or start timestamp is required"},
		{"delta-golden/basic-with-inserts-updates", delta.ChangesOptions{StartVersion: ptr(int64(0))}, "change data feed not enabled at start version 0"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			src := filepath.Join(dir, filepath.FromSlash(tc.table))
			if _, err := os.Stat(filepath.Join(src, "_delta_log")); err != nil {
				src = filepath.Join(src, "delta")
			}
			tbl, err := openDir(t, copyTableWithMtimes(t, src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = tbl.Changes(ctx, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// Timestamps that both fall between two commits select no version: an empty feed, not an
// error; a start timestamp after the end timestamp is an error.
func TestGoldenChangeDataFeedTimestampsBetweenCommits(t *testing.T) {
	dir := goldenDir(t)
	tbl, err := openDir(t, copyTableWithMtimes(t, filepath.Join(dir, "delta-rs", "cdf-table")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v1, v2 := time.UnixMilli(1703265021675), time.UnixMilli(1703886093785)
	r, err := tbl.Changes(ctx, delta.ChangesOptions{StartTime: v1.Add(time.Millisecond), EndTime: v2.Add(-time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if got := changeRows(t, r, []string{"id"}); len(got) != 0 {
		t.Errorf("feed between v1 and v2 = %v, want nothing", got)
	}
	_, err = tbl.Changes(ctx, delta.ChangesOptions{StartTime: v2, EndTime: v1})
	if err == nil || !strings.Contains(err.Error(), "start timestamp 2023-12-29T21:41:33.785Z is after end timestamp 2023-12-22T17:10:21.675Z") {
		t.Errorf("reversed timestamps: %v", err)
	}
	// The exact commit timestamps select exactly versions 1 and 2.
	r, err = tbl.Changes(ctx, delta.ChangesOptions{StartTime: v1, EndTime: v2})
	if err != nil {
		t.Fatal(err)
	}
	if r.StartVersion() != 1 || r.EndVersion() != 2 {
		t.Errorf("range %d..%d, want 1..2", r.StartVersion(), r.EndVersion())
	}
	if got := changeRows(t, r, []string{"id"}); len(got) != 12 {
		t.Errorf("feed of v1..v2 has %d rows, want 12", len(got))
	}
}

// The feed of Spark-written tables starts at version 0, or at the oldest version left
// after log cleanup.
func TestGoldenChangeDataFeedStart(t *testing.T) {
	dir := goldenDir(t)
	for table, want := range map[string]int64{"delta-rs/cdf-table": 0, "delta-rs/checkpoint-cdf-table": 3, "delta-kernel-rs/cdf-table-update-ops": 0} {
		tbl, err := openDir(t, filepath.Join(dir, filepath.FromSlash(table)))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tbl.ChangeDataFeedStart(context.Background()); err != nil || got != want {
			t.Errorf("%s: ChangeDataFeedStart = %d, %v; want %d", table, got, err, want)
		}
	}
}

// Every Arrow buffer the feed allocates is released with the reader.
func TestChangeDataFeedReleasesMemory(t *testing.T) {
	dir := goldenDir(t)
	tbl, err := openDir(t, filepath.Join(dir, "delta-rs", "cdf-table"))
	if err != nil {
		t.Fatal(err)
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	r, err := tbl.Changes(context.Background(), delta.ChangesOptions{StartVersion: ptr(int64(0)), Allocator: alloc, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := changeRows(t, r, []string{"id", "_change_type"}); len(got) != 23 {
		t.Errorf("%d rows, want 23", len(got))
	}
	alloc.AssertSize(t, 0)
}
