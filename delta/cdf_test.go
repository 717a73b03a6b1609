package delta_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// scenarioStores returns the stores the scenario tests run on: mem (its mtimes follow
// clock), a local directory, and MinIO when available (required in CI). On fs and S3
// the mtimes are the real time of writing, which tests keep at or before clock.
func scenarioStores(t *testing.T, clock *manualClock) map[string]objectstore.Store {
	t.Helper()
	fsStore, err := fs.New(fs.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsStore.Close() })
	out := map[string]objectstore.Store{"mem": mem.New(mem.Config{Now: clock.Now}), "fs": fsStore}
	if s3 := s3Store(t); s3 != nil {
		out["s3"] = s3
	}
	return out
}

// row is one row of the test schema (id long, name string, part string).
type row struct {
	id   int64
	name string
	part string
}

func (r row) String() string { return fmt.Sprintf("id=%d name=%s part=%s", r.id, r.name, r.part) }

// record builds an Arrow record of rows, with a _change_type column when types is set.
func record(t testing.TB, schema *delta.StructType, rows []row, types []string) arrow.RecordBatch {
	t.Helper()
	if types != nil {
		schema = delta.ChangeDataSchema(schema)
	}
	as, err := delta.ArrowSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	for i, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.name)
		b.Field(2).(*array.StringBuilder).Append(r.part)
		if types != nil {
			b.Field(3).(*array.StringBuilder).Append(types[i])
		}
	}
	return b.NewRecordBatch()
}

// writeRows writes rows as data files of tbl and returns their adds.
func writeRows(t testing.TB, tbl *delta.Table, rows []row) []*delta.Add {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, snap.Schema(), rows, nil)
	defer rec.Release()
	adds, err := delta.WriteRecords(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(), []arrow.RecordBatch{rec},
		delta.WriteOptions{Now: tbl.Options().Now})
	if err != nil {
		t.Fatal(err)
	}
	return adds
}

// commitChange commits one transaction: removes of the live files named by path,
// new rows as adds, and change rows (with their types) as cdc files.
func commitChange(t testing.TB, tbl *delta.Table, op string, remove []string, add []row, changes []row, types []string) int64 {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: op})
	for _, p := range remove {
		var found *delta.Add
		for _, a := range snap.Files() {
			if a.Path == p {
				found = a
			}
		}
		if found == nil {
			t.Fatalf("no live file %s", p)
		}
		tx.RemoveAdds(found)
	}
	if len(add) > 0 {
		tx.AddFiles(writeRows(t, tbl, add)...)
	}
	if len(changes) > 0 {
		rec := record(t, snap.Schema(), changes, types)
		defer rec.Release()
		cdcs, err := delta.WriteChangeFiles(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(),
			[]arrow.RecordBatch{rec}, delta.WriteOptions{Now: tbl.Options().Now})
		if err != nil {
			t.Fatal(err)
		}
		tx.AddCDC(cdcs...)
	}
	v, err := tx.Commit(ctx)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return v
}

// filesWith returns the live files holding a row with one of the ids.
func filesWith(t testing.TB, tbl *delta.Table, ids ...int64) []string {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range snap.Files() {
		sc, err := delta.Scan(ctx, tbl.Store(), tbl.Root(), snap.Schema(), snap.PartitionColumns(), []*delta.Add{a}, delta.ScanOptions{Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		hit := false
		for sc.Next() {
			col := sc.RecordBatch().Column(0).(*array.Int64)
			for i := 0; i < col.Len(); i++ {
				hit = hit || slices.Contains(ids, col.Value(i))
			}
		}
		if sc.Err() != nil {
			t.Fatal(sc.Err())
		}
		sc.Release()
		if hit {
			out = append(out, a.Path)
		}
	}
	return out
}

// tableRows scans a snapshot into sorted row strings.
func tableRows(t testing.TB, snap *delta.Snapshot) []string {
	t.Helper()
	sc, err := snap.Scan(context.Background(), delta.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, row{rec.Column(0).(*array.Int64).Value(i), rec.Column(1).(*array.String).Value(i),
				rec.Column(2).(*array.String).Value(i)}.String())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// change is one expected change feed row.
func change(r row, typ string, v int64) string {
	return fmt.Sprintf("%s _change_type=%s _commit_version=%d", r, typ, v)
}

var changeColumns = []string{"id", "name", "part", "_change_type", "_commit_version"}

func ownChangeRows(t testing.TB, r *delta.ChangesReader) []string {
	t.Helper()
	return changeRows(t, r, changeColumns)
}

// A table with the change feed on goes through appends, an update (cdc files with pre
// and post images), a whole-file delete, an overwrite and a compaction; every sub-range
// of versions returns exactly its rows, by version and by timestamp.
func TestChangeDataFeedOwnTable(t *testing.T) {
	clock := &manualClock{t: time.Now().UTC().Truncate(time.Millisecond)}
	for name, st := range scenarioStores(t, clock) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tbl, err := delta.Create(ctx, st, "wh/cdf", delta.CreateOptions{Schema: testSchema(), PartitionColumns: []string{"part"},
				Properties: map[string]string{delta.PropEnableChangeDataFeed: "true"}}, delta.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64][]string{}
			step := func(v int64, rows ...string) {
				want[v] = append(want[v], rows...)
				clock.Advance(time.Minute)
			}
			r1, r2, r3, r4 := row{1, "ann", "a"}, row{2, "bob", "a"}, row{3, "cy", "b"}, row{4, "dee", "b"}
			v := commitChange(t, tbl, "WRITE", nil, []row{r1, r2, r3}, nil, nil)
			step(v, change(r1, "insert", v), change(r2, "insert", v), change(r3, "insert", v))
			v = commitChange(t, tbl, "WRITE", nil, []row{r4}, nil, nil)
			step(v, change(r4, "insert", v))
			// UPDATE bob -> bo: rewrite part a, with pre/post images; ann is copied and never
			// appears in the feed.
			r2b := row{2, "bo", "a"}
			v = commitChange(t, tbl, "UPDATE", filesWith(t, tbl, 2), []row{r1, r2b}, []row{r2, r2b}, []string{"update_preimage", "update_postimage"})
			step(v, change(r2, "update_preimage", v), change(r2b, "update_postimage", v))
			// DELETE cy: its file holds only cy, so a remove is enough.
			v = commitChange(t, tbl, "DELETE", filesWith(t, tbl, 3), nil, nil, nil)
			step(v, change(r3, "delete", v))
			// Overwrite everything.
			snap, _ := tbl.Snapshot(ctx)
			r10, r11 := row{10, "ten", "a"}, row{11, "eleven", "c"}
			v = commitChange(t, tbl, "WRITE", fileNames(snap.Files()), []row{r10, r11}, nil, nil)
			step(v, change(r1, "delete", v), change(r2b, "delete", v), change(r4, "delete", v), change(r10, "insert", v), change(r11, "insert", v))
			// Compaction (dataChange=false) gives nothing.
			snap, _ = tbl.Snapshot(ctx)
			tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "OPTIMIZE"})
			for _, a := range writeRows(t, tbl, []row{r10, r11}) {
				a.DataChange = false
				tx.AddFiles(a)
			}
			for _, a := range snap.Files() {
				sz := a.Size
				tx.RemoveFiles(&delta.Remove{Path: a.Path, DataChange: false, Size: &sz})
			}
			if v, err = tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			step(v)
			latest := v

			hist, err := tbl.History(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			stamp := map[int64]time.Time{}
			for _, h := range hist {
				stamp[h.Version] = h.Timestamp
			}
			for s := int64(0); s <= latest; s++ {
				for e := s; e <= latest; e++ {
					var exp []string
					for x := s; x <= e; x++ {
						exp = append(exp, want[x]...)
					}
					slices.Sort(exp)
					for _, byTime := range []bool{false, true} {
						o := delta.ChangesOptions{StartVersion: ptr(s), EndVersion: ptr(e)}
						if byTime {
							o = delta.ChangesOptions{StartTime: stamp[s], EndTime: stamp[e]}
						}
						r, err := tbl.Changes(ctx, o)
						if err != nil {
							t.Fatalf("%d..%d (by time %v): %v", s, e, byTime, err)
						}
						if got := ownChangeRows(t, r); !slices.Equal(got, exp) {
							t.Errorf("%d..%d (by time %v):\ngot  %v\nwant %v", s, e, byTime, got, exp)
						}
					}
				}
			}
			// _commit_timestamp is the history timestamp of the version.
			r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(0))})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range changeRows(t, r, []string{"_commit_version", "_commit_timestamp"}) {
				var ver int64
				var ts string
				fmt.Sscanf(s, "_commit_version=%d _commit_timestamp=%s", &ver, &ts)
				if w := stamp[ver].UTC().Format("2006-01-02T15:04:05.000"); ts != w {
					t.Errorf("version %d: _commit_timestamp %s, want %s", ver, ts, w)
				}
			}
			// Projection and a type filter.
			r, err = tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(int64(0)), Columns: []string{"name"}, Types: []string{"update_postimage", "insert"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Schema().String(); !strings.Contains(got, "name: type=utf8") || strings.Contains(got, "id:") {
				t.Errorf("projected schema %s", got)
			}
			got := changeRows(t, r, []string{"name", "_change_type"})
			exp := []string{"name=ann _change_type=insert", "name=bo _change_type=update_postimage", "name=bob _change_type=insert",
				"name=cy _change_type=insert", "name=dee _change_type=insert", "name=eleven _change_type=insert", "name=ten _change_type=insert"}
			if !slices.Equal(got, exp) {
				t.Errorf("projection + filter: got %v, want %v", got, exp)
			}
		})
	}
}

// Turning the feed off inside a range, or starting before it was turned on, is refused
// naming the versions.
func TestChangeDataFeedDisabledInRange(t *testing.T) {
	tbl, _, _ := newTestTable(t, nil) // feed off at version 0
	ctx := context.Background()
	v1, err := tbl.SetProperties(ctx, map[string]string{delta.PropEnableChangeDataFeed: "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "x"}}, nil, nil)
	v3, err := tbl.SetProperties(ctx, map[string]string{delta.PropEnableChangeDataFeed: "false"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start, end int64
		want       string
	}{
		{0, 2, fmt.Sprintf("change data feed not enabled at start version 0: delta.enableChangeDataFeed is not true there; it was turned on at version %d, so start at %d or later", v1, v1)},
		{v1, v3, fmt.Sprintf("change data feed not enabled at version %d: delta.enableChangeDataFeed was turned off there (the range is %d to %d)", v3, v1, v3)},
	} {
		_, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(tc.start), EndVersion: ptr(tc.end)})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, delta.ErrChangeDataFeedDisabled) {
			t.Errorf("Changes(%d, %d) error = %v\nwant %q", tc.start, tc.end, err, tc.want)
		}
	}
	if _, err := tbl.ChangeDataFeedStart(ctx); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("change data feed not enabled at the latest version %d", v3)) {
		t.Errorf("ChangeDataFeedStart with the feed off: %v", err)
	}
	v4, err := tbl.SetProperties(ctx, map[string]string{delta.PropEnableChangeDataFeed: "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if from, err := tbl.ChangeDataFeedStart(ctx); err != nil || from != v4 {
		t.Errorf("ChangeDataFeedStart = %d, %v; want %d", from, err, v4)
	}
	r, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: ptr(v1), EndVersion: ptr(v3 - 1)})
	if err != nil {
		t.Fatal(err)
	}
	if got := ownChangeRows(t, r); len(got) != 1 {
		t.Errorf("feed %d..%d = %v, want the one insert", v1, v3-1, got)
	}
}
