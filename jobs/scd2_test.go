package jobs

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

func customerTables(t testing.TB) (staging, dim *Table) {
	staging = &Table{
		Name:       "staging.customers",
		Path:       "staging/customers",
		Schema:     schemaOf(t, "customer_id string", "name string", "city string", "updated_at timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
	dim = &Table{
		Name:       "sales.customer",
		Path:       "sales/customer",
		Schema:     schemaOf(t, "customer_sk bigint", "customer_id string", "name string", "city string", "valid_from timestamp", "valid_to timestamp", "is_current boolean"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
	sk := dim.Schema.Fields[0]
	sk.Nullable = false
	sk.Metadata = map[string]any{"delta.identity.start": int64(1), "delta.identity.step": int64(1), "delta.identity.allowExplicitInsert": false}
	return staging, dim
}

func scd2Config() *SCD2Config {
	return &SCD2Config{
		Source: "staging.customers", SourceChanges: true, Target: "sales.customer",
		Keys: []string{"customer_id"}, Track: []string{"city"}, SequenceBy: "updated_at", Deletes: "close",
		Columns: SCDColumns{SurrogateKey: "customer_sk"},
	}
}

var (
	d1 = time.Date(2026, 1, 14, 8, 0, 0, 0, time.UTC)
	d2 = time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
)

// TestSCD2CustomerMoves is the seeds' story: a customer moving from Seattle to Portland
// gets a closed row and a new current row; a point-in-time query returns one row per
// customer; reruns change nothing; the dimension's change feed shows the closed row's
// pre- and post-image and the new version's insert.
func TestSCD2CustomerMoves(t *testing.T) {
	for name, newStore := range map[string]func(t *testing.T) objectstore.Store{
		"mem":   func(t *testing.T) objectstore.Store { return mem.New(mem.Config{}) },
		"minio": func(t *testing.T) objectstore.Store { return testenv.S3Store(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			staging, dim := customerTables(t)
			clock := &testClock{t: d1}
			env := newTestEnv(newStore(t), clock, staging, dim)
			stage := NewSCD2Merge("merge_customers", scd2Config())

			appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1}, []any{"C2", "Grace", "Boston", d1})
			runStage(t, stage, env)
			want := []string{
				"1|C1|Ada|Seattle|2026-01-14T08:00:00Z|9999-12-31T00:00:00Z|true",
				"2|C2|Grace|Boston|2026-01-14T08:00:00Z|9999-12-31T00:00:00Z|true",
			}
			if got := tableRows(t, env, dim); !slices.Equal(got, want) {
				t.Fatalf("after day 1:\n%s", diff(got, want))
			}

			clock.t = d2
			appendRows(t, env, staging, []any{"C1", "Ada", "Portland", d2}, []any{"C2", "Grace Hopper", "Boston", d2})
			res := runStage(t, stage, env)
			if len(res.VersionsWritten) != 1 {
				t.Fatalf("day 2 result %+v, want one commit", res)
			}
			want = []string{
				"1|C1|Ada|Seattle|2026-01-14T08:00:00Z|2026-01-15T09:30:00Z|false",
				"2|C2|Grace Hopper|Boston|2026-01-14T08:00:00Z|9999-12-31T00:00:00Z|true",
				"3|C1|Ada|Portland|2026-01-15T09:30:00Z|9999-12-31T00:00:00Z|true",
			}
			if got := tableRows(t, env, dim); !slices.Equal(got, want) {
				t.Fatalf("after day 2 (name is type 1, city tracked):\n%s", diff(got, want))
			}
			// Point in time: valid_from <= T < valid_to gives one row per customer.
			for _, at := range []time.Time{d1.Add(time.Hour), d2.Add(time.Hour)} {
				rows := tableRows(t, env, dim, "customer_id", "city", "valid_from", "valid_to")
				seen := map[string]string{}
				for _, r := range rows {
					p := strings.Split(r, "|")
					from, _ := time.Parse(time.RFC3339, p[2])
					to, _ := time.Parse(time.RFC3339, p[3])
					if !from.After(at) && at.Before(to) {
						if prev, dup := seen[p[0]]; dup {
							t.Fatalf("at %s customer %s has two rows: %s and %s", at, p[0], prev, p[1])
						}
						seen[p[0]] = p[1]
					}
				}
				wantCity := "Seattle"
				if at.After(d2) {
					wantCity = "Portland"
				}
				if len(seen) != 2 || seen["C1"] != wantCity {
					t.Errorf("at %s: %v, want C1 in %s and C2", at, seen, wantCity)
				}
			}
			// Reruns write nothing.
			v := tableVersion(t, env, dim)
			for range 2 {
				runStage(t, stage, env)
			}
			if got := tableVersion(t, env, dim); got != v {
				t.Fatalf("rerun moved the dimension from version %d to %d", v, got)
			}
			// The dimension's change feed for day 2.
			tbl, _ := env.openTable(ctx, dim)
			rd, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &v, EndVersion: &v})
			if err != nil {
				t.Fatal(err)
			}
			var feed []string
			for rd.Next() {
				rec := rd.RecordBatch()
				idx := func(n string) int { return rec.Schema().FieldIndices(n)[0] }
				for i := range int(rec.NumRows()) {
					feed = append(feed, rec.Column(idx("_change_type")).ValueStr(i)+" "+rec.Column(idx("customer_id")).ValueStr(i)+" "+rec.Column(idx("city")).ValueStr(i)+" "+rec.Column(idx("is_current")).ValueStr(i))
				}
			}
			if err := rd.Err(); err != nil {
				t.Fatal(err)
			}
			rd.Release()
			slices.Sort(feed)
			wantFeed := []string{
				"insert C1 Portland true",
				"update_postimage C1 Seattle false",
				"update_postimage C2 Boston true",
				"update_preimage C1 Seattle true",
				"update_preimage C2 Boston true",
			}
			if !slices.Equal(feed, wantFeed) {
				t.Errorf("dimension change feed:\n%s", diff(feed, wantFeed))
			}
		})
	}
}

func TestSCD2DeletesAndLateEvents(t *testing.T) {
	ctx := context.Background()
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
	stage := NewSCD2Merge("merge", scd2Config())
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1}, []any{"C3", "Alan", "London", d1})
	runStage(t, stage, env)

	// A late event (before d1) prepends a version to C1; C3 is deleted on d2.
	clock.t = d2
	appendRows(t, env, staging, []any{"C1", "Ada", "Tacoma", d1.Add(-24 * time.Hour)})
	tbl, err := env.openTable(ctx, staging)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("customer_id", "C3")}); err != nil {
		t.Fatal(err)
	}
	runStage(t, stage, env)
	got := tableRows(t, env, dim, "customer_id", "city", "valid_from", "valid_to", "is_current")
	want := []string{
		"C1|Seattle|2026-01-14T08:00:00Z|9999-12-31T00:00:00Z|true",
		"C1|Tacoma|2026-01-13T08:00:00Z|2026-01-14T08:00:00Z|false",
		"C3|London|2026-01-14T08:00:00Z|2026-01-15T09:31:00Z|false", // closed at the delete's commit
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dimension:\n%s", diff(got, want))
	}
	// The key comes back: a new version, new surrogate key.
	clock.Advance(time.Hour)
	appendRows(t, env, staging, []any{"C3", "Alan", "Manchester", d2.Add(time.Hour)})
	runStage(t, stage, env)
	got = tableRows(t, env, dim, "customer_sk", "customer_id", "city", "is_current")
	want = []string{"1|C1|Seattle|true", "2|C3|London|false", "3|C1|Tacoma|false", "4|C3|Manchester|true"}
	if !slices.Equal(got, want) {
		t.Fatalf("after the key returns:\n%s", diff(got, want))
	}
}

// A crash at any store operation of an SCD2 merge, followed by reruns, gives exactly the
// dimension an uninterrupted run gives: no lost, doubled or extra versions.
func TestSCD2CrashAtEveryOperation(t *testing.T) {
	// The second batch moves C1 and adds C3; with late, it also has a C2 event before
	// everything merged, which is folded with C2's history read from the change feed.
	for name, wantRows := range map[string]int{"in order": 4, "late": 5, "deletion vectors": 4,
		"in order/budget": 4, "late/budget": 5, "deletion vectors/budget": 4} {
		t.Run(name, func(t *testing.T) {
			budget := ByteSize(0)
			if n, ok := strings.CutSuffix(name, "/budget"); ok {
				name, budget = n, tinyBudget // every run over spill files
			}
			setup := func() (*faultstore.Store, *Env, *Table) {
				staging, dim := customerTables(t)
				if name == "deletion vectors" { // the MERGE writes a vector file, then commits
					dim.Properties = maps.Clone(dim.Properties)
					dim.Properties[delta.PropEnableDeletionVectors] = "true"
				}
				clock := &testClock{t: d1}
				fs := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
				env := newTestEnv(fs, clock, staging, dim)
				env.MemoryBudget = budget
				appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1}, []any{"C2", "Grace", "Boston", d1})
				runStage(t, NewSCD2Merge("merge", scd2Config()), env)
				clock.t = d2
				rows := [][]any{{"C1", "Ada", "Portland", d2}, {"C3", "Alan", "London", d2}}
				if name == "late" {
					rows = append(rows, []any{"C2", "Grace", "Tacoma", d1.Add(-time.Hour)})
				}
				appendRows(t, env, staging, rows...)
				return fs, env, dim
			}
			spills := 0
			stage := spillProbe{NewSCD2Merge("merge", scd2Config()), &spills}
			if want := crashAtEveryOperation(t, stage, setup, rowsOf(t)); len(want) != wantRows {
				t.Fatalf("clean run: %d rows, want %d", len(want), wantRows)
			}
			if budget > 0 && spills == 0 {
				t.Fatalf("with a budget of %s, no merge worked over spill files", budget)
			}
			if name == "deletion vectors" && budget == 0 { // (in parts, each inserted row has a file of its own: no vector needed)
				_, env, dim := setup()
				runStage(t, stage, env)
				tbl, err := env.openTable(t.Context(), dim)
				if err != nil {
					t.Fatal(err)
				}
				snap, err := tbl.Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(snap.Files(), func(a *delta.Add) bool { return a.DeletionVector != nil }) {
					t.Fatal("the merge wrote no deletion vector")
				}
			}
		})
	}
}

// interposer runs hook (once it is set) before the first Put of a key with the given
// prefix (with onGet, before the first Get or GetRange).
type interposer struct {
	objectstore.Store
	prefix string
	onGet  bool
	once   sync.Once
	hook   func()
}

func (s *interposer) at(key string, get bool) {
	if s.hook != nil && get == s.onGet && strings.HasPrefix(key, s.prefix) {
		s.once.Do(s.hook)
	}
}

func (s *interposer) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.at(key, false)
	return s.Store.Put(ctx, key, r, size)
}

func (s *interposer) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.at(key, true)
	return s.Store.Get(ctx, key)
}

func (s *interposer) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	s.at(key, true)
	return s.Store.(objectstore.RangeGetter).GetRange(ctx, key, offset, length)
}

// A writer that commits to the dimension while the merge is writing makes the merge's
// commit conflict; the stage merges again on the new snapshot, so neither the other
// writer's row nor the batch is lost, and nothing is doubled.
func TestSCD2RetriesAfterConcurrentCommit(t *testing.T) {
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	inner := mem.New(mem.Config{Now: clock.Now})
	store := &interposer{Store: inner, prefix: dim.Path + "/part-"}
	env := newTestEnv(store, clock, staging, dim)
	cfg := scd2Config()
	stage := NewSCD2Merge("merge_customers", cfg)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1})
	runStage(t, stage, env)

	clock.t = d2
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", d2}, []any{"C2", "Grace", "Boston", d2})
	fired := false
	store.hook = func() {
		fired = true
		// Another writer's row, committed while the merge writes its files.
		other := newTestEnv(inner, clock, dim)
		writeRows(t, other, dim, false, []any{int64(100), "C9", "Linus", "Helsinki", d1, time.UnixMicro(SeqMax).UTC(), true})
	}
	res := runStage(t, stage, env)
	if !fired {
		t.Fatal("the concurrent writer never ran")
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "ran again after 1 concurrent commits") }) {
		t.Errorf("notes %q do not say the merge ran again", res.Notes)
	}
	want := []string{
		"100|C9|Linus|Helsinki|2026-01-14T08:00:00Z|9999-12-31T00:00:00Z|true",
		"1|C1|Ada|Seattle|2026-01-14T08:00:00Z|2026-01-15T09:30:00Z|false",
		"2|C1|Ada|Portland|2026-01-15T09:30:00Z|9999-12-31T00:00:00Z|true",
		"3|C2|Grace|Boston|2026-01-15T09:30:00Z|9999-12-31T00:00:00Z|true",
	}
	if got := tableRows(t, env, dim); !slices.Equal(got, want) {
		t.Fatalf("after the retried merge:\n%s", diff(got, want))
	}
}
