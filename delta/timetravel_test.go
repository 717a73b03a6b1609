package delta_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// copyDir copies a golden table into a temporary directory (the golden folder is
// read-only, and time travel needs its commit files' mtimes set).
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// Spark-written table without in-commit timestamps: the commit timestamp is the JSON
// file's mtime, so the copy gets each N.json mtime from history[N].commitInfo_timestamp.
func TestTimeTravelByFileModificationTime(t *testing.T) {
	dir, tables := loadGolden(t)
	g := tables["delta-golden/basic-with-inserts-deletes-checkpoint"]
	root := copyDir(t, filepath.Join(dir, filepath.FromSlash(g.TableRoot)))
	ts := map[int64]time.Time{}
	for _, h := range g.History {
		ts[h.Version] = time.UnixMilli(*h.CommitInfoTS)
		name := filepath.Join(root, "_delta_log", strings.Repeat("0", 20-len(itoa(h.Version)))+itoa(h.Version)+".json")
		if err := os.Chtimes(name, ts[h.Version], ts[h.Version]); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := openDir(t, root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, h := range g.History {
		at := ts[h.Version]
		for _, tc := range []struct {
			name string
			when time.Time
			want int64
		}{
			{"exact", at, h.Version},
			{"just after", at.Add(time.Millisecond), h.Version},
		} {
			if h.Version == g.LatestVersion && tc.name == "just after" {
				continue
			}
			s, err := tbl.SnapshotAsOf(ctx, tc.when)
			if err != nil {
				t.Fatalf("v%d %s: %v", h.Version, tc.name, err)
			}
			if s.Version() != tc.want {
				t.Errorf("SnapshotAsOf(%s, v%d %s) = v%d, want v%d", tc.when, h.Version, tc.name, s.Version(), tc.want)
			}
			if len(s.Files()) != *h.LiveFiles {
				t.Errorf("v%d: %d files, want %d", s.Version(), len(s.Files()), *h.LiveFiles)
			}
		}
		if h.Version > 0 {
			s, err := tbl.SnapshotAsOf(ctx, at.Add(-time.Millisecond))
			if err != nil || s.Version() != h.Version-1 {
				t.Errorf("just before v%d: got %v, %v; want v%d", h.Version, s, err, h.Version-1)
			}
		}
	}
	if _, err := tbl.SnapshotAsOf(ctx, ts[0].Add(-time.Second)); err == nil || !strings.Contains(err.Error(), "before the earliest available version 0") {
		t.Errorf("before v0: err = %v", err)
	}
	if _, err := tbl.SnapshotAsOf(ctx, ts[g.LatestVersion].Add(time.Second)); err == nil || !strings.Contains(err.Error(), "after the latest version 13") {
		t.Errorf("after latest: err = %v", err)
	}
	hist, err := tbl.History(ctx, 1)
	if err != nil || len(hist) != 1 || !hist[0].Timestamp.Equal(ts[g.LatestVersion]) {
		t.Errorf("History(1) = %+v, %v; want the mtime %v", hist, err, ts[g.LatestVersion])
	}
}

// Non-monotonic file mtimes are made monotonic, as Spark does.
func TestTimeTravelMonotonisesMtimes(t *testing.T) {
	dir, tables := loadGolden(t)
	g := tables["delta-golden/time-travel-start-start20-start40"]
	root := copyDir(t, filepath.Join(dir, filepath.FromSlash(g.TableRoot)))
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	// v1's file claims to be older than v0's: it counts as v0's time + 1 ms.
	for v, at := range []time.Time{base, base.Add(-time.Hour), base.Add(time.Hour)} {
		name := filepath.Join(root, "_delta_log", "0000000000000000000"+itoa(int64(v))+".json")
		if err := os.Chtimes(name, at, at); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := openDir(t, root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		when time.Time
		want int64
	}{
		{base, 0},
		{base.Add(time.Millisecond), 1},
		{base.Add(time.Minute), 1},
		{base.Add(time.Hour), 2},
	} {
		v, err := tbl.VersionAsOf(ctx, tc.when)
		if err != nil || v != tc.want {
			t.Errorf("VersionAsOf(%s) = %d, %v; want %d", tc.when, v, err, tc.want)
		}
	}
}

// cdc_ict_table enables in-commit timestamps: they decide, not mtimes nor
// commitInfo.timestamp (which differs at v1).
func TestTimeTravelByInCommitTimestamp(t *testing.T) {
	dir, tables := loadGolden(t)
	g := tables["delta-rs/cdc_ict_table"]
	tbl, err := openDir(t, filepath.Join(dir, filepath.FromSlash(g.TableRoot)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ict := func(v int) time.Time {
		h := g.History[v]
		if h.InCommitTimestamp != nil {
			return time.UnixMilli(*h.InCommitTimestamp)
		}
		return time.UnixMilli(*h.CommitInfoTS) // equal to the ICT except at v1
	}
	for _, tc := range []struct {
		name string
		when time.Time
		want int64
	}{
		{"v2 exactly", ict(2), 2},
		{"between v2 and v3", ict(3).Add(-time.Millisecond), 2},
		{"v3 exactly", ict(3), 3},
		// v1's ICT (2023) is before v0's, so any time after v0 resolves to v1 at least;
		// its commitInfo.timestamp (after v0) must not be used.
		{"just after v0", ict(0).Add(time.Millisecond), 1},
	} {
		s, err := tbl.SnapshotAsOf(ctx, tc.when)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s.Version() != tc.want {
			t.Errorf("%s: v%d, want v%d", tc.name, s.Version(), tc.want)
		}
		if s.Version() == tc.want && !s.Timestamp().Equal(ict(int(tc.want))) {
			t.Errorf("%s: snapshot timestamp %v, want the in-commit timestamp %v", tc.name, s.Timestamp(), ict(int(tc.want)))
		}
	}
	if _, err := tbl.SnapshotAsOf(ctx, ict(3).Add(time.Millisecond)); err == nil {
		t.Errorf("a time after the latest commit resolved")
	}
}

// Our own tables: commit timestamps come from the table clock (the mem store stamps
// mtimes with the same clock).
func TestTimeTravelOwnTable(t *testing.T) {
	tbl, _, _ := newTestTable(t, map[string]string{"delta.checkpointInterval": "2"})
	ctx := context.Background()
	var stamps []time.Time
	hist0, _ := tbl.History(ctx, 1)
	stamps = append(stamps, hist0[0].Timestamp)
	for i := 1; i <= 4; i++ {
		appendFiles(t, tbl, addFile("part=a/f"+itoa(int64(i))+".parquet", "a", i))
		h, _ := tbl.History(ctx, 1)
		stamps = append(stamps, h[0].Timestamp)
	}
	for v, at := range stamps {
		s, err := tbl.SnapshotAsOf(ctx, at)
		if err != nil || s.Version() != int64(v) || len(s.Files()) != v {
			t.Errorf("as of v%d's time: %v, %v", v, s, err)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
