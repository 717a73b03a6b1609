package delta_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	fsstore "github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

const day = 24 * time.Hour

// clockedStore pins the mtimes of new files to a test clock where the store allows it:
// mem does by itself, a local directory through os.Chtimes; on S3 mtimes stay the real
// time of writing (clockOK false).
type clockedStore struct {
	objectstore.Store
	dir   string // fs only
	seen  map[string]bool
	clock *manualClock
}

func (c *clockedStore) clockOK() bool {
	_, isMem := c.Store.(*mem.Store)
	return isMem || c.dir != ""
}

// settle gives every file written since the last call the clock's current time.
func (c *clockedStore) settle(t testing.TB) {
	t.Helper()
	if c.dir == "" {
		return
	}
	now := c.clock.Now()
	err := filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || c.seen[p] {
			return err
		}
		c.seen[p] = true
		return os.Chtimes(p, now, now)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newClockedStore opens the named store kind ("mem", "fs" or "s3") with mtimes pinned
// to clock where possible; nil when S3 is not configured outside CI.
func newClockedStore(t *testing.T, kind string, clock *manualClock) *clockedStore {
	t.Helper()
	switch kind {
	case "mem":
		return &clockedStore{Store: mem.New(mem.Config{Now: clock.Now}), clock: clock}
	case "fs":
		dir := t.TempDir()
		st, err := fsstore.New(fsstore.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return &clockedStore{Store: st, dir: dir, seen: map[string]bool{}, clock: clock}
	case "s3":
		if st := s3Store(t); st != nil {
			return &clockedStore{Store: st, clock: clock}
		}
	}
	return nil
}

func putFile(t testing.TB, st objectstore.Store, key, body string) {
	t.Helper()
	if err := st.Put(context.Background(), key, strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
}

func exists(t testing.TB, st objectstore.Store, key string) bool {
	t.Helper()
	_, err := st.Stat(context.Background(), key)
	if err != nil && !errors.Is(err, objectstore.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// The vacuum scenario: a table whose files were removed 9 and 3 days ago, an orphan and
// hidden files. With 7 days retention VACUUM removes exactly the file removed 9 days ago,
// the old orphan and the old change file; time travel inside the window still works,
// and outside it (after log cleanup) fails naming the earliest version.
func TestVacuumScenario(t *testing.T) {
	for _, kind := range []string{"mem", "fs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			// The clock starts a minute before the real time, so files written on S3
			// (whose mtimes are real) are never in the clock's future.
			c := &manualClock{t: time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)}
			cs := newClockedStore(t, kind, c)
			if cs == nil {
				return
			}
			st := cs.Store
			tbl, err := delta.Create(ctx, st, "wh/t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
				Properties: map[string]string{delta.PropEnableChangeDataFeed: "true", "delta.checkpointInterval": "2"}},
				delta.Options{Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			key := func(p string) string { return "wh/t/" + p }
			// v1 (day 0): A; an orphan from a failed write; hidden files.
			commitChange(t, tbl, "WRITE", nil, []row{{1, "a1", "a"}, {2, "a2", "a"}}, nil, nil)
			fileA := filesWith(t, tbl, 1)[0]
			putFile(t, st, key("part=a/orphan-old.parquet"), "junk")
			for _, h := range []string{"_tmp/x.parquet", ".hidden", "part=a/_SUCCESS", "part=a/.f.crc"} {
				putFile(t, st, key(h), "keep")
			}
			cs.settle(t)
			// v2 (day 1): overwrite A with B.
			c.Advance(day)
			commitChange(t, tbl, "WRITE", []string{fileA}, []row{{3, "b", "b"}}, nil, nil)
			fileB := filesWith(t, tbl, 3)[0]
			cs.settle(t)
			// v3 (day 2): C, with a change file.
			c.Advance(day)
			commitChange(t, tbl, "MERGE", nil, []row{{4, "c", "c"}}, []row{{4, "c", "c"}}, []string{"insert"})
			fileC := filesWith(t, tbl, 4)[0]
			cs.settle(t)
			// v4 (day 7): overwrite B and C with D.
			c.Advance(5 * day)
			commitChange(t, tbl, "WRITE", []string{fileB, fileC}, []row{{5, "d", "d"}}, nil, nil)
			fileD := filesWith(t, tbl, 5)[0]
			cs.settle(t)
			// Now is day 10; a young orphan (a write in progress) must survive where mtimes
			// follow the clock.
			c.Advance(3 * day)
			putFile(t, st, key("part=a/orphan-young.parquet"), "in progress")
			cs.settle(t)

			infos, _ := st.List(ctx, key("_change_data/"), "")
			if len(infos) != 1 {
				t.Fatalf("want one change data file, got %v", infos)
			}
			cdcFile := strings.TrimPrefix(infos[0].Key, "wh/t/")
			wantDeleted := []string{cdcFile, fileA, "part=a/orphan-old.parquet"}
			if !cs.clockOK() {
				wantDeleted = append(wantDeleted, "part=a/orphan-young.parquet") // its mtime is real, days before the clock
			}
			slices.Sort(wantDeleted)

			// Too short a retention is refused, naming both durations.
			one := day
			if _, err := tbl.Vacuum(ctx, delta.VacuumOptions{Retain: &one}); err == nil || !errors.Is(err, delta.ErrRetentionTooShort) ||
				!strings.Contains(err.Error(), "asked to retain 1 day, but delta.deletedFileRetentionDuration is 1 week (7 days)") {
				t.Fatalf("1-day vacuum error = %v", err)
			}
			// Consumers still reading old versions clamp the vacuum.
			for _, tc := range []struct {
				from int64
				kept int
			}{{1, 2}, {2, 2}, {3, 1}, {4, 0}} {
				res, err := tbl.Vacuum(ctx, delta.VacuumOptions{DryRun: true, KeepVersionsFrom: ptr(tc.from), KeepFor: "stage history"})
				if err != nil {
					t.Fatal(err)
				}
				if res.FilesKept != tc.kept || len(res.FilesDeleted)+res.FilesKept != len(wantDeleted) {
					t.Errorf("keep from v%d: kept %d, deleting %v; want %d kept", tc.from, res.FilesKept, res.FilesDeleted, tc.kept)
				}
			}
			if _, err := tbl.Vacuum(ctx, delta.VacuumOptions{KeepVersionsFrom: ptr(int64(3)), KeepFor: `stage "history"`, RefuseKept: true}); err == nil ||
				!errors.Is(err, delta.ErrNeededByConsumer) ||
				!strings.Contains(err.Error(), `stage "history" still needs to read version 3 and later, and 1 of the files this vacuum would delete belong to them`) {
				t.Errorf("refused vacuum: %v", err)
			}
			// Dry run: the list, nothing deleted, nothing committed.
			before, _ := tbl.Snapshot(ctx)
			dry, err := tbl.Vacuum(ctx, delta.VacuumOptions{DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dry.FilesDeleted, wantDeleted) || !dry.DryRun || dry.BytesDeleted <= 8 {
				t.Fatalf("dry run = %v (%d bytes), want %v", dry.FilesDeleted, dry.BytesDeleted, wantDeleted)
			}
			for _, p := range wantDeleted {
				if !exists(t, st, key(p)) {
					t.Errorf("dry run deleted %s", p)
				}
			}
			if after, _ := tbl.Snapshot(ctx); after.Version() != before.Version() {
				t.Errorf("dry run committed version %d", after.Version())
			}

			res, err := tbl.Vacuum(ctx, delta.VacuumOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.FilesDeleted, wantDeleted) || res.BytesDeleted != dry.BytesDeleted {
				t.Errorf("vacuum deleted %v (%d bytes), want %v (%d bytes)", res.FilesDeleted, res.BytesDeleted, wantDeleted, dry.BytesDeleted)
			}
			for _, p := range wantDeleted {
				if exists(t, st, key(p)) {
					t.Errorf("%s survived", p)
				}
			}
			for _, p := range []string{fileB, fileC, fileD, "_tmp/x.parquet", ".hidden", "part=a/_SUCCESS", "part=a/.f.crc", "_delta_log/00000000000000000000.json"} {
				if !exists(t, st, key(p)) {
					t.Errorf("%s was deleted", p)
				}
			}
			if cs.clockOK() && !exists(t, st, key("part=a/orphan-young.parquet")) {
				t.Errorf("the young orphan was deleted")
			}
			hist, err := tbl.History(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if hist[0].Operation != "VACUUM END" || hist[1].Operation != "VACUUM START" ||
				hist[1].OperationMetrics["numFilesToDelete"] != "3" && hist[1].OperationMetrics["numFilesToDelete"] != "4" ||
				hist[0].OperationMetrics["numDeletedFiles"] != hist[1].OperationMetrics["numFilesToDelete"] ||
				hist[0].OperationParameters["status"] != "COMPLETED" {
				t.Errorf("history: %+v / %+v", hist[0], hist[1])
			}

			// Time travel inside the window reads its rows.
			for v, want := range map[int64][]string{2: {"id=3 name=b part=b"}, 3: {"id=3 name=b part=b", "id=4 name=c part=c"}, 4: {"id=5 name=d part=d"}} {
				s, err := tbl.SnapshotAt(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				if got := tableRows(t, s); !slices.Equal(got, want) {
					t.Errorf("v%d rows %v, want %v", v, got, want)
				}
			}
			// The change feed of v4 still reads the removed files; from v2 it cannot.
			r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(4)), EndVersion: ptr(int64(4))})
			if err != nil {
				t.Fatal(err)
			}
			if got := ownChangeRows(t, r); len(got) != 3 {
				t.Errorf("feed of v4 = %v, want 2 deletes and 1 insert", got)
			}
			r, err = tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(2)), EndVersion: ptr(int64(4))})
			if err != nil {
				t.Fatal(err)
			}
			for r.Next() {
			}
			if err := r.Err(); err == nil || !errors.Is(err, delta.ErrVersionCleaned) ||
				!strings.Contains(err.Error(), "a data file of version 2 was deleted") ||
				!strings.Contains(err.Error(), "the earliest version from which the feed up to 4 can still be read is 4") {
				t.Errorf("feed 2..4 after vacuum: %v", err)
			}
			r.Release()

			if !cs.clockOK() {
				return // log cleanup follows commit mtimes, which S3 sets itself
			}
			// Log cleanup with 7 days: cutoff day 3 00:00, newest expired commit v3 (or v2 when
			// the day starts late), checkpoint 2 kept.
			if _, err := tbl.SetProperties(ctx, map[string]string{delta.PropLogRetentionDuration: "interval 7 days"}, nil); err != nil {
				t.Fatal(err)
			}
			cs.settle(t)
			cl, err := tbl.CleanupLog(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if cl.CheckpointVersion != 2 {
				t.Fatalf("cleanup kept checkpoint %d: %+v", cl.CheckpointVersion, cl)
			}
			if _, err := tbl.SnapshotAt(ctx, 1); err == nil || !strings.Contains(err.Error(), "earliest available version is 2") {
				t.Errorf("time travel to v1 after cleanup: %v", err)
			}
			if _, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(1))}); err == nil ||
				!strings.Contains(err.Error(), "version 1 was removed from the log by log cleanup; the earliest available version is 2") {
				t.Errorf("feed from v1 after cleanup: %v", err)
			}
			if _, err := tbl.Vacuum(ctx, delta.VacuumOptions{DryRun: true, KeepVersionsFrom: ptr(int64(1)), KeepFor: `stage "history"`}); err == nil ||
				!strings.Contains(err.Error(), `stage "history" still needs version 1, which can no longer be read`) {
				t.Errorf("vacuum keeping cleaned v1: %v", err)
			}

			// Forced zero retention removes the tombstoned B and C too; the latest version
			// still reads.
			zero := time.Duration(0)
			res, err = tbl.Vacuum(ctx, delta.VacuumOptions{Retain: &zero, Force: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{fileB, fileC} {
				if !slices.Contains(res.FilesDeleted, p) {
					t.Errorf("forced vacuum kept %s: %v", p, res.FilesDeleted)
				}
			}
			latest, _ := tbl.Snapshot(ctx)
			if got := tableRows(t, latest); !slices.Equal(got, []string{"id=5 name=d part=d"}) {
				t.Errorf("latest rows after forced vacuum: %v", got)
			}
		})
	}
}

// LITE mode deletes only the files of expired tombstones: orphans stay.
func TestVacuumLite(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	st := mem.New(mem.Config{Now: clock.Now})
	ctx := context.Background()
	tbl, err := delta.Create(ctx, st, "wh/t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}}, delta.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "a"}}, nil, nil)
	fileA := filesWith(t, tbl, 1)[0]
	putFile(t, st, "wh/t/part=a/orphan.parquet", "junk")
	commitChange(t, tbl, "WRITE", []string{fileA}, []row{{2, "b", "b"}}, nil, nil)
	clock.Advance(8 * day)
	res, err := tbl.Vacuum(ctx, delta.VacuumOptions{Lite: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.FilesDeleted, []string{fileA}) || !exists(t, st, "wh/t/part=a/orphan.parquet") {
		t.Errorf("lite vacuum deleted %v", res.FilesDeleted)
	}
	h, _ := tbl.History(ctx, 2)
	if h[1].OperationParameters["vacuumType"] != "LITE" {
		t.Errorf("VACUUM START parameters %v", h[1].OperationParameters)
	}
}

// The writer gate runs before anything is listed or deleted: a table with a writer
// feature this writer does not implement is refused.
func TestVacuumWriterGate(t *testing.T) {
	dir := goldenDir(t)
	root := copyDir(t, filepath.Join(dir, "delta-rs", "cdc_ict_table"))
	v0 := filepath.Join(root, "_delta_log", "00000000000000000000.json")
	b, err := os.ReadFile(v0)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"writerFeatures":["`, `"writerFeatures":["fancyNewWriterThing","`, 1))
	if err := os.WriteFile(v0, b, 0o644); err != nil {
		t.Fatal(err)
	}
	putFile(t, fsStoreAt(t, root), "orphan.parquet", "junk")
	tbl, err := openDir(t, root)
	if err != nil {
		t.Fatal(err)
	}
	zero := time.Duration(0)
	_, err = tbl.Vacuum(context.Background(), delta.VacuumOptions{Retain: &zero, Force: true})
	if err == nil || !strings.Contains(err.Error(), "unsupported table feature: fancyNewWriterThing") {
		t.Fatalf("vacuum error = %v; want the writer gate to refuse fancyNewWriterThing", err)
	}
	if _, err := os.Stat(filepath.Join(root, "orphan.parquet")); err != nil {
		t.Errorf("refused vacuum deleted a file: %v", err)
	}
}

func fsStoreAt(t testing.TB, dir string) objectstore.Store {
	t.Helper()
	st, err := fsstore.New(fsstore.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Files named by absolute URI count as referenced once TableURI places them; without it
// vacuum refuses rather than deleting them.
func TestVacuumAbsolutePaths(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	st := mem.New(mem.Config{Now: clock.Now})
	ctx := context.Background()
	tbl, err := delta.Create(ctx, st, "wh/t", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"}}, delta.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, "wh/t/part=a/abs.parquet", "data")
	putFile(t, st, "wh/t/part=a/orphan.parquet", "junk")
	a := addFile("s3://bucket/wh/t/part=a/abs.parquet", "a", 1)
	appendFiles(t, tbl, a)
	clock.Advance(30 * day)
	if _, err := tbl.Vacuum(ctx, delta.VacuumOptions{DryRun: true}); err == nil || !strings.Contains(err.Error(), "location is not known") || strings.Contains(err.Error(), "TableURI") {
		t.Fatalf("vacuum without TableURI: %v", err)
	}
	res, err := tbl.Vacuum(ctx, delta.VacuumOptions{DryRun: true, TableURI: "s3://bucket/wh/t/"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.FilesDeleted, []string{"part=a/orphan.parquet"}) {
		t.Errorf("would delete %v, want only the orphan", res.FilesDeleted)
	}
}
