package jobs

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The property of scd2_merge from a snapshot source (source_changes: false) whose rows
// only move forward in time: the source's full content changes at random between runs
// (keys that move, rename (type 1), leave and return), a run sees it whole, and after
// every run the dimension holds what a reference keeping each key's versions says: a
// new version where the tracked city changed, at the row's updated_at; the type 1 name
// the newest on every version of the key; a key the snapshot lacks closed at the
// snapshot's time (its newest updated_at), with a tombstone from there under deletes:
// tombstone, or left open under ignore. In memory and over a tiny budget. (Under
// tombstone no row is all NULLs: with no event log such a version reads as a tombstone,
// a documented limit.)

type scd2SnapVersion struct {
	city, name string // "" is NULL
	from, to   int64  // minutes after d1; to < 0: open
	tomb       bool
}

func TestSCD2SnapshotSourceProperty(t *testing.T) {
	ctx := context.Background()
	streams := 24
	if raceEnabled {
		streams = 4
	}
	cities := []string{"", "Seattle", "Portland"}
	names := []string{"Ada", "Ada L.", ""}
	for seed := range propertySeeds(streams) {
		rng := rand.New(rand.NewPCG(seed, 22))
		deletes := []string{"close", "tombstone", "ignore"}[rng.IntN(3)]
		var budget ByteSize
		if rng.IntN(3) == 0 {
			budget = tinyBudget
		}
		staging, dim := customerTables(t)
		clock := &testClock{t: d1.Add(100000 * time.Minute)}
		env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
		env.MemoryBudget = budget
		cfg := scd2Config()
		cfg.SourceChanges, cfg.Deletes, cfg.Type1 = false, deletes, []string{"name"}
		stage := NewSCD2Merge("merge", cfg)
		what := fmt.Sprintf("seed %d (deletes %s, budget %s)", seed, deletes, budget)
		names := names
		if deletes == "tombstone" {
			// A row of all NULLs reads like a tombstone in a dimension of a snapshot
			// source (no event log tells them apart; see docs/limits.md).
			names = names[:2]
		}

		type srcRow struct {
			name, city string
			at         int64
		}
		source := map[string]srcRow{} // the source's content, by key
		versions := map[string][]scd2SnapVersion{}
		var at int64
		tick := func() int64 { at += 1 + int64(rng.IntN(3)); return at }
		for step := range 6 + rng.IntN(8) {
			clock.Advance(time.Minute)
			for range 1 + rng.IntN(5) {
				k := fmt.Sprintf("C%d", rng.IntN(8))
				r, ok := source[k]
				switch op := rng.IntN(6); {
				case !ok || op < 2: // new, returning, or moving
					source[k] = srcRow{name: names[rng.IntN(len(names))], city: cities[rng.IntN(len(cities))], at: tick()}
				case op < 4: // renamed only (type 1)
					r.name, r.at = names[rng.IntN(len(names))], tick()
					source[k] = r
				default: // gone from the source
					delete(source, k)
				}
			}
			// A row updated in every extract, so that the snapshot's time (its newest
			// updated_at) is never older than a version the dimension holds.
			source["Z"] = srcRow{name: "hb", city: "hb", at: tick()}
			var rows [][]any
			for _, k := range slices.Sorted(maps.Keys(source)) {
				r := source[k]
				row := []any{k, nil, nil, d1.Add(time.Duration(r.at) * time.Minute)}
				if r.name != "" {
					row[1] = r.name
				}
				if r.city != "" {
					row[2] = r.city
				}
				rows = append(rows, row)
			}
			writeRows(t, env, staging, true, rows...)
			if step > 0 && rng.IntN(3) == 0 {
				continue // no run: the next one sees the newer snapshot only
			}
			if _, err := stage.Run(ctx, env); err != nil {
				t.Fatalf("%s step %d: %v", what, step, err)
			}
			// The reference.
			snapTime := source["Z"].at
			for _, k := range slices.Sorted(maps.Keys(source)) {
				r := source[k]
				vs := versions[k]
				var cur *scd2SnapVersion
				if n := len(vs); n > 0 && vs[n-1].to < 0 {
					cur = &vs[n-1]
				}
				switch {
				case cur != nil && !cur.tomb && cur.city == r.city: // a repeat: no version
				default:
					if cur != nil {
						cur.to = r.at
					}
					vs = append(vs, scd2SnapVersion{city: r.city, from: r.at, to: -1})
				}
				for i := range vs {
					if !vs[i].tomb {
						vs[i].name = r.name
					}
				}
				versions[k] = vs
			}
			for _, k := range slices.Sorted(maps.Keys(versions)) {
				vs := versions[k]
				n := len(vs)
				if _, ok := source[k]; ok || vs[n-1].to >= 0 || vs[n-1].tomb || deletes == "ignore" {
					continue
				}
				vs[n-1].to = snapTime
				if deletes == "tombstone" {
					vs = append(vs, scd2SnapVersion{from: snapTime, to: -1, tomb: true})
				}
				versions[k] = vs
			}
			var want []string
			for k, vs := range versions {
				for _, v := range vs {
					want = append(want, scd2SnapText(k, v))
				}
			}
			slices.Sort(want)
			got := tableRows(t, env, dim, "customer_id", "city", "name", "valid_from", "valid_to", "is_current")
			if !slices.Equal(got, want) {
				t.Fatalf("%s after step %d:\n%s", what, step, diff(got, want))
			}
		}
	}
}

func scd2SnapText(k string, v scd2SnapVersion) string {
	null := func(s string) string {
		if s == "" {
			return "NULL"
		}
		return s
	}
	ts := func(m int64) string { return d1.Add(time.Duration(m) * time.Minute).UTC().Format(time.RFC3339Nano) }
	to, cur := "9999-12-31T00:00:00Z", "true"
	if v.to >= 0 {
		to, cur = ts(v.to), "false"
	}
	return fmt.Sprintf("%s|%s|%s|%s|%s|%s", k, null(v.city), null(v.name), ts(v.from), to, cur)
}
