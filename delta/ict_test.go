package delta_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// firstAction returns the key of the first action of a commit file and its commitInfo.
func firstAction(t testing.TB, st objectstore.Store, key string) (string, map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(readObject(t, st, key)))
	sc.Buffer(nil, 1<<24)
	if !sc.Scan() {
		t.Fatalf("%s is empty", key)
	}
	var line map[string]map[string]any
	if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	for k, v := range line {
		return k, v
	}
	return "", nil
}

// ictOf reads the in-commit timestamp of a version's commit file.
func ictOf(t testing.TB, st objectstore.Store, root string, v int64) time.Time {
	t.Helper()
	kind, ci := firstAction(t, st, fmt.Sprintf("%s/_delta_log/%020d.json", root, v))
	if kind != "commitInfo" {
		t.Fatalf("v%d starts with %s, want commitInfo", v, kind)
	}
	n, ok := ci["inCommitTimestamp"].(float64)
	if !ok {
		t.Fatalf("v%d commitInfo has no inCommitTimestamp: %v", v, ci)
	}
	return time.UnixMilli(int64(n))
}

// A table created with delta.enableInCommitTimestamps writes commitInfo first with an
// in-commit timestamp that never goes back, even when the clock does; time travel,
// history, snapshot timestamps and change-feed time ranges follow the in-commit
// timestamps even after every commit file's mtime was reset to one instant.
func TestInCommitTimestampsWrittenAndUsed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := &manualClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	opts := delta.Options{Now: clock.Now}
	tbl, err := delta.Create(ctx, st, "t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
		Properties: map[string]string{"delta.enableInCommitTimestamps": "true", "delta.enableChangeDataFeed": "true"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	if p := snap.Protocol(); p.MinWriterVersion != 7 || !slices.Contains(p.WriterFeatures, "inCommitTimestamp") {
		t.Fatalf("protocol %+v lacks inCommitTimestamp", p)
	}
	if _, ok := snap.Properties()["delta.inCommitTimestampEnablementVersion"]; ok {
		t.Errorf("a table created with in-commit timestamps records an enablement version: %v", snap.Properties())
	}
	for i := int64(1); i <= 4; i++ {
		clock.Advance(time.Hour)
		if i == 4 {
			clock.Advance(-3 * time.Hour) // the clock goes back past v3's time
		}
		commitChange(t, tbl, "WRITE", nil, []row{{i, "n" + strconv.FormatInt(i, 10), "a"}}, nil, nil)
	}
	ict := make([]time.Time, 5)
	for v := int64(0); v <= 4; v++ {
		ict[v] = ictOf(t, st, "t", v)
		if v > 0 && !ict[v].After(ict[v-1]) {
			t.Errorf("ICT v%d %v is not after v%d's %v", v, ict[v], v-1, ict[v-1])
		}
	}
	if want := ict[3].Add(time.Millisecond); !ict[4].Equal(want) {
		t.Errorf("ICT v4 = %v, want v3's + 1 ms = %v (the clock went back)", ict[4], want)
	}

	// Every commit file gets one mtime, as after a copy.
	same := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	logs, _ := filepath.Glob(filepath.Join(dir, "t", "_delta_log", "*.json"))
	for _, f := range logs {
		if err := os.Chtimes(f, same, same); err != nil {
			t.Fatal(err)
		}
	}
	re, err := delta.Open(ctx, st, "t", opts)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v <= 4; v++ {
		for _, at := range []time.Time{ict[v], ict[v].Add(time.Millisecond / 2)} {
			if v < 4 && at.Equal(ict[v+1]) {
				continue
			}
			got, err := re.VersionAsOf(ctx, at)
			if err != nil || got != v {
				t.Errorf("VersionAsOf(%v) = %d, %v; want %d", at, got, err, v)
			}
		}
		s, err := re.SnapshotAt(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Timestamp().Equal(ict[v]) {
			t.Errorf("v%d snapshot timestamp %v, want its ICT %v", v, s.Timestamp(), ict[v])
		}
	}
	if got, err := re.VersionAsOf(ctx, ict[2].Add(30*time.Minute)); err != nil || got != 2 {
		t.Errorf("between v2 and v3: %d, %v", got, err)
	}
	if _, err := re.VersionAsOf(ctx, ict[0].Add(-time.Millisecond)); err == nil {
		t.Errorf("a time before v0 resolved")
	}
	if _, err := re.VersionAsOf(ctx, ict[4].Add(time.Millisecond)); err == nil {
		t.Errorf("a time after v4 resolved")
	}
	hist, err := re.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if !h.Timestamp.Equal(ict[h.Version]) {
			t.Errorf("history v%d timestamp %v, want its ICT %v", h.Version, h.Timestamp, ict[h.Version])
		}
	}
	r, err := re.Changes(ctx, delta.ChangesOptions{StartTime: ict[2], EndTime: ict[3]})
	if err != nil {
		t.Fatal(err)
	}
	got := changeRows(t, r, []string{"id", "_commit_version", "_commit_timestamp"})
	want := []string{
		fmt.Sprintf("id=2 _commit_version=2 _commit_timestamp=%s", ict[2].UTC().Format("2006-01-02T15:04:05.000")),
		fmt.Sprintf("id=3 _commit_version=3 _commit_timestamp=%s", ict[3].UTC().Format("2006-01-02T15:04:05.000")),
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes between v2's and v3's ICT:\ngot  %v\nwant %v", got, want)
	}
}

// Turning in-commit timestamps on for a table with commits records the enabling version
// and its timestamp; times before it resolve by file times among the earlier versions,
// times from it on by in-commit timestamps.
func TestInCommitTimestampsEnabledLater(t *testing.T) {
	tbl, st, _ := newTestTable(t, nil)
	ctx := context.Background()
	appendFiles(t, tbl, addFile("part=a/f1.parquet", "a", 1))
	appendFiles(t, tbl, addFile("part=a/f2.parquet", "a", 1))
	v, err := tbl.SetProperties(ctx, map[string]string{"delta.enableInCommitTimestamps": "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendFiles(t, tbl, addFile("part=a/f3.parquet", "a", 1))
	snap, _ := tbl.Snapshot(ctx)
	props := snap.Properties()
	enableTS := ictOf(t, st, "warehouse/t", v)
	if props["delta.inCommitTimestampEnablementVersion"] != strconv.FormatInt(v, 10) ||
		props["delta.inCommitTimestampEnablementTimestamp"] != strconv.FormatInt(enableTS.UnixMilli(), 10) {
		t.Errorf("enablement properties %v; want version %d and timestamp %d", props, v, enableTS.UnixMilli())
	}
	if !slices.Contains(snap.Protocol().WriterFeatures, "inCommitTimestamp") {
		t.Errorf("protocol %+v lacks inCommitTimestamp", snap.Protocol())
	}
	if kind, ci := firstAction(t, st, fmt.Sprintf("warehouse/t/_delta_log/%020d.json", v-1)); kind != "commitInfo" || ci["inCommitTimestamp"] != nil {
		t.Errorf("v%d (before enabling) has an in-commit timestamp: %v", v-1, ci)
	}
	hist, err := tbl.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	stamp := map[int64]time.Time{}
	for _, h := range hist {
		stamp[h.Version] = h.Timestamp
	}
	for want := int64(0); want <= v+1; want++ {
		got, err := tbl.VersionAsOf(ctx, stamp[want])
		if err != nil || got != want {
			t.Errorf("VersionAsOf(v%d's time %v) = %d, %v", want, stamp[want], got, err)
		}
	}
	if got := ictOf(t, st, "warehouse/t", v+1); !got.After(enableTS) {
		t.Errorf("ICT after enabling %v is not after the enabling commit's %v", got, enableTS)
	}
}
