package delta_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// logNames lists _delta_log file names of the table at root "wh/t".
func logNames(t testing.TB, st objectstore.Store) []string {
	t.Helper()
	infos, err := st.List(context.Background(), "wh/t/_delta_log/", "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		out = append(out, strings.TrimPrefix(in.Key, "wh/t/_delta_log/"))
	}
	return out
}

func logName(v int64, suffix string) string { return fmt.Sprintf("%020d.%s", v, suffix) }

// cleanupTable makes a table with checkpoints every 2 versions and commits v1..v10, one
// every 5 days at 01:00 UTC, on a mem store whose mtimes follow the clock.
func cleanupTable(t *testing.T, props map[string]string) (*delta.Table, *mem.Store, *manualClock) {
	t.Helper()
	clock := &manualClock{t: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)}
	st := mem.New(mem.Config{Now: clock.Now})
	p := map[string]string{"delta.checkpointInterval": "2"}
	for k, v := range props {
		p[k] = v
	}
	ctx := context.Background()
	tbl, err := delta.Create(ctx, st, "wh/t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}, Properties: p},
		delta.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		clock.Advance(5 * 24 * time.Hour)
		if i == 3 {
			st.Put(ctx, "wh/t/_delta_log/"+logName(3, "crc"), strings.NewReader("{}"), 2)
		}
		appendFiles(t, tbl, addFile(fmt.Sprintf("part=a/f%d.parquet", i), "a", 1))
	}
	return tbl, st, clock
}

// Log cleanup after a checkpoint removes what the newest checkpoint at or before the
// newest expired commit makes unnecessary, and time travel before it names the earliest
// version left.
func TestLogCleanupAfterCheckpoint(t *testing.T) {
	_, st, clock := cleanupTable(t, nil)
	ctx := context.Background()
	// At v10 (day 50) the cutoff is day 20 00:00: v3 (day 15) is the newest expired commit
	// and checkpoint 2 the newest before it, so versions 0 and 1 go.
	names := logNames(t, st)
	for _, gone := range []string{logName(0, "json"), logName(1, "json")} {
		if slices.Contains(names, gone) {
			t.Errorf("%s still in the log: %v", gone, names)
		}
	}
	for _, kept := range []string{logName(2, "json"), logName(2, "checkpoint.parquet"), logName(3, "crc"), logName(3, "json"), "_last_checkpoint"} {
		if !slices.Contains(names, kept) {
			t.Errorf("%s was deleted: %v", kept, names)
		}
	}
	re, err := delta.Open(ctx, st, "wh/t", delta.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := re.SnapshotAt(ctx, 1); err == nil || !strings.Contains(err.Error(), "earliest available version is 2") {
		t.Errorf("SnapshotAt(1) error = %v; want it to name the earliest available version 2", err)
	}
	for v := int64(2); v <= 10; v++ {
		s, err := re.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatalf("SnapshotAt(%d) after cleanup: %v", v, err)
		}
		if len(s.Files()) != int(v) {
			t.Errorf("v%d has %d files, want %d", v, len(s.Files()), v)
		}
	}

	// Explicitly, 100 days later: everything before checkpoint 10 goes, including other
	// checkpoints and .crc files; _last_checkpoint and subdirectories stay.
	st.Put(ctx, "wh/t/_delta_log/_staged_commits/x.json", strings.NewReader("{}"), 2)
	clock.Advance(100 * 24 * time.Hour)
	res, err := re.CleanupLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.CheckpointVersion != 10 {
		t.Errorf("kept checkpoint %d, want 10 (result %+v)", res.CheckpointVersion, res)
	}
	want := []string{logName(10, "checkpoint.parquet"), logName(10, "json"), "_last_checkpoint", "_staged_commits/x.json"}
	if got := logNames(t, st); !slices.Equal(got, want) {
		t.Errorf("log after cleanup = %v, want %v", got, want)
	}
	if _, err := re.SnapshotAt(ctx, 9); err == nil || !strings.Contains(err.Error(), "earliest available version is 10") {
		t.Errorf("SnapshotAt(9) error = %v; want it to name the earliest available version 10", err)
	}
	if _, err := re.SnapshotAsOf(ctx, time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "before the earliest available version 10") {
		t.Errorf("SnapshotAsOf(day 19) error = %v; want it to name the earliest available version 10", err)
	}
	if s, err := re.SnapshotAt(ctx, 10); err != nil || len(s.Files()) != 10 {
		t.Errorf("SnapshotAt(10) = %v, %v", s, err)
	}
	if h, err := re.History(ctx, 0); err != nil || len(h) != 1 || h[0].Version != 10 {
		t.Errorf("history after cleanup: %d entries, %v", len(h), err)
	}
	if _, err := re.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(5))}); err == nil ||
		!strings.Contains(err.Error(), "version 5 was removed from the log by log cleanup; the earliest available version is 10") {
		t.Errorf("Changes(5) error = %v", err)
	}
}

// delta.enableExpiredLogCleanup=false keeps the whole log; a short logRetentionDuration
// moves the cutoff.
func TestLogCleanupProperties(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		tbl, st, clock := cleanupTable(t, map[string]string{delta.PropEnableExpiredLogCleanup: "false"})
		clock.Advance(365 * 24 * time.Hour)
		res, err := tbl.CleanupLog(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.FilesDeleted) != 0 || !strings.Contains(res.Skipped, "false") {
			t.Errorf("result %+v; want nothing deleted", res)
		}
		if names := logNames(t, st); !slices.Contains(names, logName(0, "json")) {
			t.Errorf("version 0 deleted although cleanup is disabled: %v", names)
		}
	})
	t.Run("retention 1 week", func(t *testing.T) {
		_, st, _ := cleanupTable(t, map[string]string{delta.PropLogRetentionDuration: "interval 1 week"})
		// At v10 (day 50, 01:00) the cutoff is day 43 00:00: v8 (day 40) is the newest
		// expired commit and checkpoint 8 the one kept.
		names := logNames(t, st)
		if names[0] != logName(8, "checkpoint.parquet") {
			t.Errorf("log starts with %s, want checkpoint 8: %v", names[0], names)
		}
	})
}

// A checkpoint that does not load never replaces the log before it.
func TestLogCleanupKeepsLogBeforeBadCheckpoint(t *testing.T) {
	tbl, st, clock := cleanupTable(t, map[string]string{delta.PropEnableExpiredLogCleanup: "false"})
	ctx := context.Background()
	putFile(t, st, "wh/t/_delta_log/"+logName(10, "checkpoint.parquet"), "not parquet")
	if _, err := tbl.SetProperties(ctx, map[string]string{delta.PropEnableExpiredLogCleanup: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * day)
	_, err := tbl.CleanupLog(ctx)
	if err == nil || !strings.Contains(err.Error(), "checkpoint 10 cannot replace the log before it") {
		t.Fatalf("cleanup error = %v", err)
	}
	if names := logNames(t, st); !slices.Contains(names, logName(0, "json")) {
		t.Errorf("log deleted although the checkpoint is bad: %v", names)
	}
}

// A consumer's version caps what cleanup removes: the kept checkpoint is at or before it.
func TestLogCleanupKeepsConsumerVersions(t *testing.T) {
	tbl, st, clock := cleanupTable(t, map[string]string{delta.PropEnableExpiredLogCleanup: "false"})
	ctx := context.Background()
	if _, err := tbl.SetProperties(ctx, map[string]string{delta.PropEnableExpiredLogCleanup: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * day)
	res, err := tbl.CleanupLogWith(ctx, delta.CleanupOptions{KeepVersionsFrom: ptr(int64(7))})
	if err != nil {
		t.Fatal(err)
	}
	if res.CheckpointVersion != 6 {
		t.Errorf("kept checkpoint %d, want 6 (the newest at or before version 7)", res.CheckpointVersion)
	}
	if names := logNames(t, st); names[0] != logName(6, "checkpoint.parquet") {
		t.Errorf("log starts at %s: %v", names[0], names)
	}
	for v := int64(6); v <= 11; v++ {
		if _, err := tbl.SnapshotAt(ctx, v); err != nil {
			t.Errorf("version %d no longer readable: %v", v, err)
		}
	}
}
