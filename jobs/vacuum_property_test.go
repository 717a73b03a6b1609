package jobs

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The property of vacuum: random appends, updates, deletes and overwrites of a table
// (with deletion vectors or without), with vacuums at random moments and retentions
// (none, forced; a day; three days), never lose what a user may still read: after each
// vacuum the latest version holds the reference's rows, and so does every version
// whose files the retentions kept (one whose successor came after every vacuum's
// cutoff); and a vacuum with no retention leaves no file behind but the live data
// files, their deletion vectors and the log.
func TestVacuumProperty(t *testing.T) {
	for seed := range propertySeeds(cdcStreams) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			vacuumProperty(t, seed)
		})
	}
}

func vacuumProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 53))
	ctx := t.Context()
	clock := &testClock{t: t0}
	src, _ := historyTables(t)
	if seed%2 == 1 {
		src.Properties = map[string]string{"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
	}
	store := mem.New(mem.Config{Now: clock.Now})
	env := newTestEnv(store, clock, src)
	type state struct {
		rows map[string]int64
		at   time.Time // the version's commit time
	}
	versions := []state{{rows: map[string]int64{}}} // by version (0 creates the table)
	cur := map[string]int64{}
	commit := func() {
		v := int64(len(versions))
		for tableVersion(t, env, src) >= v { // (a vacuum's START and END commits change no rows)
			versions = append(versions, state{rows: maps.Clone(versions[len(versions)-1].rows), at: time.UnixMicro(tableVersionTime(t, env, src, v))})
			v++
		}
		versions[len(versions)-1].rows = maps.Clone(cur)
	}
	rendered := func(rows map[string]int64) []string {
		var out []string
		for id, a := range rows {
			out = append(out, fmt.Sprintf("%s|%d", id, a))
		}
		slices.Sort(out)
		return out
	}
	next := 0
	add := func(n int) [][]any {
		var rows [][]any
		for range n {
			id, a := fmt.Sprintf("T%03d", next), rng.Int64N(100)
			next++
			rows = append(rows, []any{id, a})
			cur[id] = a
		}
		return rows
	}
	appendRows(t, env, src, add(1+rng.IntN(4))...)
	versions[0].at = time.UnixMicro(tableVersionTime(t, env, src, 0))
	commit()
	tbl, err := env.openTable(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	var cutoff time.Time
	for step := range 10 + rng.IntN(10) {
		clock.Advance(time.Duration(1+rng.IntN(48)) * time.Hour)
		var ids []string
		for id := range cur {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		switch op := rng.IntN(10); {
		case op < 3 || len(ids) == 0:
			appendRows(t, env, src, add(1+rng.IntN(3))...)
		case op < 6:
			id := ids[rng.IntN(len(ids))]
			cur[id] += 1 + rng.Int64N(9)
			if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", id), Set: map[string]any{"amount": cur[id]}}); err != nil {
				t.Fatal(err)
			}
		case op < 8:
			id := ids[rng.IntN(len(ids))]
			delete(cur, id)
			if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", id)}); err != nil {
				t.Fatal(err)
			}
		default:
			clear(cur)
			writeRows(t, env, src, true, add(1+rng.IntN(3))...)
		}
		commit()
		if rng.IntN(3) > 0 {
			continue
		}
		clock.Advance(time.Hour)
		retain := []time.Duration{0, 24 * time.Hour, 72 * time.Hour}[rng.IntN(3)]
		d := Duration(retain)
		runStage(t, NewVacuum("vacuum", &VacuumConfig{TableNames: []string{src.Name}, Retain: &d, Force: true}, nil), env)
		commit()
		if c := clock.t.Add(-retain); c.After(cutoff) {
			cutoff = c // (the latest of all vacuums' cutoffs so far)
		}
		for v, st := range versions {
			latest := v == len(versions)-1
			if !latest && !versions[v+1].at.After(cutoff) {
				continue // (its files may be gone: outside a vacuum's retention)
			}
			snap, err := tbl.SnapshotAt(ctx, int64(v))
			if err != nil {
				t.Fatal(err)
			}
			got, err := scanRendered(t, snap)
			if err != nil {
				var times []string
				for _, s := range versions {
					times = append(times, s.at.Format("01-02T15:04"))
				}
				t.Fatalf("seed %d step %d: after a vacuum at %s retaining %s (cutoff %s), version %d (of %d) fails: %v\nversion times %v", seed, step, clock.t.Format("01-02T15:04"), retain, cutoff.Format("01-02T15:04"), v, len(versions)-1, err, times)
			}
			if want := rendered(st.rows); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: after a vacuum retaining %s, version %d (of %d) reads\n%s", seed, step, retain, v, len(versions)-1, diff(got, want))
			}
		}
		if retain > 0 {
			continue
		}
		// Nothing left behind: the live files, their deletion vectors, the log.
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		live, dvs := map[string]bool{}, 0
		for _, a := range snap.Files() {
			live[src.Path+"/"+a.Path] = true
			if a.DeletionVector != nil && a.DeletionVector.StorageType == "u" {
				dvs++
			}
		}
		keys, err := store.List(ctx, src.Path+"/", "")
		if err != nil {
			t.Fatal(err)
		}
		var stray []string
		for _, k := range keys {
			switch {
			case strings.Contains(k.Key, "/_delta_log/"), live[k.Key]:
			case strings.Contains(k.Key, "deletion_vector_"):
				dvs--
			default:
				stray = append(stray, k.Key)
			}
		}
		if len(stray) > 0 || dvs != 0 {
			t.Fatalf("seed %d step %d: after a vacuum with no retention, files left behind %v, deletion vector files %+d against the live files'", seed, step, stray, -dvs)
		}
	}
}

// scanRendered is a snapshot's id|amount rows, sorted.
func scanRendered(t *testing.T, snap *delta.Snapshot) ([]string, error) {
	t.Helper()
	sc, err := snap.Scan(t.Context(), delta.ScanOptions{Columns: []string{"id", "amount"}})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		out = appendRendered(out, sc.RecordBatch())
	}
	slices.Sort(out)
	return out, sc.Err()
}
