package jobs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The dimension and its source gain a column that becomes tracked, after the dimension
// has versions: a key's first value of it opens a version as any change does; a late
// event from before the change that repeats its predecessor's values opens nothing, nor
// does a logged event that repeats a late one's (the event log's events, hashed before
// the column existed, compare equal to events without it); a late event with a new value
// splits its interval exactly.
func TestSCD2NewTrackedColumn(t *testing.T) {
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
	cfg := scd2Config()
	at := func(h int) time.Time { return d1.Add(time.Duration(h) * time.Hour) }
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", at(0)}, []any{"C2", "Grace", "Boston", at(0)},
		[]any{"C3", "Alan", "London", at(0)}, []any{"C3", "Alan", "Paris", at(10)})
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", at(10)})
	runStage(t, NewSCD2Merge("merge", cfg), env)

	clock.Advance(time.Hour)
	staging.Schema = schemaOf(t, "customer_id string", "name string", "city string", "updated_at timestamp", "segment string")
	dim.Schema = schemaOf(t, "customer_sk bigint", "customer_id string", "name string", "city string", "valid_from timestamp", "valid_to timestamp", "is_current boolean", "segment string")
	customerSK(dim)
	cfg.Track = []string{"city", "segment"}
	appendRows(t, env, staging,
		[]any{"C1", "Ada", "Portland", at(20), "retail"}, // first segment: a new version
		[]any{"C2", "Grace", "Boston", at(20), nil},      // no segment: no change
		[]any{"C1", "Ada", "Seattle", at(5), nil},        // late, repeats its predecessor
		[]any{"C2", "Grace", "Austin", at(5), nil},       // late, a new city
		[]any{"C3", "Alan", "Paris", at(5), nil})         // late, what a logged event repeats
	runStage(t, NewSCD2Merge("merge", cfg), env)
	got := tableRows(t, env, dim, "customer_id", "city", "segment", "valid_from", "valid_to")
	want := []string{
		"C1|Portland|NULL|2026-01-14T18:00:00Z|2026-01-15T04:00:00Z",
		"C1|Portland|retail|2026-01-15T04:00:00Z|9999-12-31T00:00:00Z",
		"C1|Seattle|NULL|2026-01-14T08:00:00Z|2026-01-14T18:00:00Z",
		"C2|Austin|NULL|2026-01-14T13:00:00Z|2026-01-15T04:00:00Z",
		"C2|Boston|NULL|2026-01-14T08:00:00Z|2026-01-14T13:00:00Z",
		"C2|Boston|NULL|2026-01-15T04:00:00Z|9999-12-31T00:00:00Z",
		"C3|London|NULL|2026-01-14T08:00:00Z|2026-01-14T13:00:00Z",
		"C3|Paris|NULL|2026-01-14T13:00:00Z|9999-12-31T00:00:00Z",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dimension:\n%s", diff(got, want))
	}
}

// customerSK makes the dimension's first column its identity surrogate key again.
func customerSK(dim *Table) {
	sk := dim.Schema.Fields[0]
	sk.Nullable = false
	sk.Metadata = map[string]any{"delta.identity.start": int64(1), "delta.identity.step": int64(1), "delta.identity.allowExplicitInsert": false}
}

// new_columns: fill: the open versions take the new tracked column's value from the
// source's newest row of each key, in one UPDATE commit (the change feed shows the
// updates), once; closed versions keep NULL; the merge after it opens no version for
// those values; a later change of the column opens one as any change does.
func TestSCD2NewColumnsFill(t *testing.T) {
	ctx := context.Background()
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
	cfg := scd2Config()
	cfg.NewColumns = "fill"
	at := func(h int) time.Time { return d1.Add(time.Duration(h) * time.Hour) }
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", at(0)}, []any{"C2", "Grace", "Boston", at(0)})
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", at(10)})
	runStage(t, NewSCD2Merge("merge", cfg), env)

	clock.Advance(time.Hour)
	staging.Schema = schemaOf(t, "customer_id string", "name string", "city string", "updated_at timestamp", "segment string")
	dim.Schema = schemaOf(t, "customer_sk bigint", "customer_id string", "name string", "city string", "valid_from timestamp", "valid_to timestamp", "is_current boolean", "segment string")
	customerSK(dim)
	cfg.Track = []string{"city", "segment"}
	appendRows(t, env, staging, []any{"C1", "Ada", "Portland", at(20), "retail"}, []any{"C2", "Grace", "Boston", at(20), "b2b"})
	res := runStage(t, NewSCD2Merge("merge", cfg), env)
	got := tableRows(t, env, dim, "customer_sk", "customer_id", "city", "segment", "valid_from", "valid_to")
	want := []string{
		"1|C1|Seattle|NULL|2026-01-14T08:00:00Z|2026-01-14T18:00:00Z",
		"2|C1|Portland|retail|2026-01-14T18:00:00Z|9999-12-31T00:00:00Z",
		"3|C2|Boston|b2b|2026-01-14T08:00:00Z|9999-12-31T00:00:00Z",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dimension after the fill:\n%s\nnotes %q", diff(got, want), res.Notes)
	}
	tbl, snap := latest(t, env, dim)
	h, err := tbl.History(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if h[1].Operation != "UPDATE" || h[2].Operation != delta.OpAddColumns {
		t.Fatalf("history %s, %s, %s: want the merge, the fill (UPDATE), ADD COLUMNS", h[0].Operation, h[1].Operation, h[2].Operation)
	}
	fill := h[1].Version
	feed, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &fill, EndVersion: &fill})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for feed.Next() {
		rec := feed.RecordBatch()
		col := rec.Column(rec.Schema().FieldIndices(delta.ChangeTypeColumn)[0])
		for i := range int(rec.NumRows()) {
			types = append(types, col.ValueStr(i))
		}
	}
	feed.Release()
	slices.Sort(types)
	if !slices.Equal(types, []string{"update_postimage", "update_postimage", "update_preimage", "update_preimage"}) {
		t.Fatalf("the fill's change feed: %v, want two updates", types)
	}
	// Once only; a later change of the column is a change.
	clock.Advance(time.Hour)
	appendRows(t, env, staging, []any{"C2", "Grace", "Boston", at(30), "retail"})
	runStage(t, NewSCD2Merge("merge", cfg), env)
	got = tableRows(t, env, dim, "customer_id", "segment", "valid_from", "valid_to")
	want = []string{
		"C1|NULL|2026-01-14T08:00:00Z|2026-01-14T18:00:00Z",
		"C1|retail|2026-01-14T18:00:00Z|9999-12-31T00:00:00Z",
		"C2|b2b|2026-01-14T08:00:00Z|2026-01-15T14:00:00Z",
		"C2|retail|2026-01-15T14:00:00Z|9999-12-31T00:00:00Z",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dimension after a change of the filled column:\n%s", diff(got, want))
	}
	if _, snap2 := latest(t, env, dim); snap2.Version() != snap.Version()+1 {
		t.Fatalf("versions %d -> %d, want one merge commit and no second fill", snap.Version(), snap2.Version())
	}
}
