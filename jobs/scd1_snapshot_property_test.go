package jobs

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The property of scd1_merge from a snapshot source (source_changes: false): the source
// table changes at random between runs (appends, in-place updates and deletes, with
// deletion vectors or without, overwrites; with sequence_by several rows of a key, the
// newest of which is the key's row), and after every run the target holds what a
// reference says: each key of the source's snapshot with its row (the newest by
// sequence_by), and, with deletes: ignore, the keys the source lost with the row they
// had; with deletes: delete, nothing else. In memory and over a tiny budget.

type scd1SnapRow struct {
	id, owner string // owner "" is NULL
	at        int64  // minutes after d1, unique over the test
}

func (r scd1SnapRow) values() []any {
	var owner any
	if r.owner != "" {
		owner = r.owner
	}
	return []any{r.id, owner, d1.Add(time.Duration(r.at) * time.Minute)}
}

func (r scd1SnapRow) text() string {
	owner := r.owner
	if owner == "" {
		owner = "NULL"
	}
	return fmt.Sprintf("%s|%s|%s", r.id, owner, d1.Add(time.Duration(r.at)*time.Minute).UTC().Format(time.RFC3339Nano))
}

func TestSCD1SnapshotSourceProperty(t *testing.T) {
	ctx := context.Background()
	streams := 24
	if raceEnabled {
		streams = 4
	}
	owners := []string{"", "ann", "bob", "cy"}
	for seed := range propertySeeds(streams) {
		rng := rand.New(rand.NewPCG(seed, 21))
		seqBy := rng.IntN(3) > 0
		deletes := []string{"delete", "ignore"}[rng.IntN(2)]
		var budget ByteSize
		if rng.IntN(3) == 0 {
			budget = tinyBudget
		}
		src, dst := scd1Tables(t)
		if rng.IntN(2) == 0 {
			src.Properties[delta.PropEnableDeletionVectors] = "true"
		}
		clock := &testClock{t: d1}
		env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, src, dst)
		env.MemoryBudget = budget
		cfg := &SCD1Config{Source: src.Name, Target: dst.Name, Keys: []string{"id"}, Deletes: deletes}
		if seqBy {
			cfg.SequenceBy = "updated_at"
		}
		stage := NewSCD1Merge("accounts", cfg)
		what := fmt.Sprintf("seed %d (sequence_by %v, deletes %s, budget %s)", seed, seqBy, deletes, budget)

		var source []scd1SnapRow // the source table's rows
		var at int64
		next := func(id string) scd1SnapRow {
			at++
			return scd1SnapRow{id: id, owner: owners[rng.IntN(len(owners))], at: at}
		}
		want := map[string]scd1SnapRow{} // the target, by key
		ran := false
		for step := range 8 + rng.IntN(10) {
			clock.Advance(time.Minute)
			ids := map[string]bool{}
			for _, r := range source {
				ids[r.id] = true
			}
			live := slices.Sorted(maps.Keys(ids))
			switch op := rng.IntN(10); {
			case op < 4 || len(live) == 0: // an append: new keys, and with sequence_by newer rows of present ones
				var rows [][]any
				for range 1 + rng.IntN(4) {
					id := fmt.Sprintf("A%d", rng.IntN(10))
					if ids[id] && !seqBy {
						continue // without sequence_by a key has one row
					}
					r := next(id)
					ids[id] = true
					source = append(source, r)
					rows = append(rows, r.values())
				}
				if len(rows) > 0 {
					appendRows(t, env, src, rows...)
				}
			case op < 6: // an UPDATE of a key's owner in place
				id := live[rng.IntN(len(live))]
				owner := owners[rng.IntN(len(owners))]
				var v any
				if owner != "" {
					v = owner
				}
				tbl, _ := latest(t, env, src)
				if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", id), Set: map[string]any{"owner": v}}); err != nil {
					t.Fatal(err)
				}
				for i := range source {
					if source[i].id == id {
						source[i].owner = owner
					}
				}
			case op < 8: // a DELETE of a key
				id := live[rng.IntN(len(live))]
				tbl, _ := latest(t, env, src)
				if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", id)}); err != nil {
					t.Fatal(err)
				}
				source = slices.DeleteFunc(source, func(r scd1SnapRow) bool { return r.id == id })
			default: // an overwrite with a new content
				source = nil
				var rows [][]any
				seen := map[string]bool{}
				for range 1 + rng.IntN(5) {
					id := fmt.Sprintf("A%d", rng.IntN(10))
					if seen[id] && !seqBy {
						continue
					}
					seen[id] = true
					r := next(id)
					source = append(source, r)
					rows = append(rows, r.values())
				}
				writeRows(t, env, src, true, rows...)
			}
			if rng.IntN(2) == 0 && step > 0 {
				continue // no run after this change
			}
			if _, err := stage.Run(ctx, env); err != nil {
				t.Fatalf("%s step %d: %v", what, step, err)
			}
			ran = true
			// The reference: the snapshot's newest row per key, and with ignore the rest.
			snap := map[string]scd1SnapRow{}
			for _, r := range source {
				if cur, ok := snap[r.id]; !ok || r.at > cur.at {
					snap[r.id] = r
				}
			}
			if deletes == "delete" {
				want = snap
			} else {
				maps.Copy(want, snap)
			}
			var wantRows []string
			for _, r := range want {
				wantRows = append(wantRows, r.text())
			}
			slices.Sort(wantRows)
			if got := tableRows(t, env, dst, "id", "owner", "updated_at"); !slices.Equal(got, wantRows) {
				t.Fatalf("%s after step %d:\n%s", what, step, diff(got, wantRows))
			}
		}
		if !ran {
			t.Fatalf("%s: no run", what)
		}
	}
}
