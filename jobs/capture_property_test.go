package jobs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The property of capture_history: random writes to its source (appends, updates and
// deletes by key, overwrites; the source with deletion vectors or without), captured by
// runs at random moments, with ignore_deletes and starting_version at random, and
// vacuums with no retention (forced) between them, give after every run exactly the
// history of a reference written in the test: every change of every version from the
// starting one through the source's version at the run, once, with its version and
// time (inserts, deletes, and an update's pre and post images).
func TestCaptureHistoryProperty(t *testing.T) {
	for seed := range propertySeeds(cdcStreams) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			captureProperty(t, seed)
		})
	}
}

// captureChange is a row of the reference history.
type captureChange struct {
	id      string
	amount  int64
	kind    string
	version int64
	at      time.Time
}

func (c captureChange) String() string {
	return fmt.Sprintf("%s|%d|%s|%d|%s", c.id, c.amount, c.kind, c.version, c.at.Format(time.RFC3339Nano))
}

func captureProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	clock := &testClock{t: t0}
	src, dst := historyTables(t)
	if seed%2 == 1 {
		src.Properties = map[string]string{"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
	}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, src, dst)
	ctx := t.Context()
	cfg := &CaptureHistoryConfig{Source: src.Name, Target: dst.Name, IgnoreDeletes: rng.IntN(3) == 0}
	var start int64
	if rng.IntN(3) == 0 {
		start = 1 + rng.Int64N(4)
		cfg.StartingVersion = &start
	}
	capture := NewCaptureHistory("capture", cfg)
	consumers := []Consumer{{Pipeline: "p", Stage: "capture", Source: src, History: dst, AppID: capture.AppID(), StartingVersion: cfg.StartingVersion}}
	vacuum := NewVacuum("vacuum", &VacuumConfig{TableNames: []string{src.Name}, Retain: new(Duration), Force: true}, consumers)

	cur := map[string]int64{} // the source's rows
	var ref []captureChange   // every change of every version
	version := int64(0)       // the source's version (0 creates it)
	var last time.Time        // the last version's commit time, made monotonic as Delta reads it
	commit := func(changes ...captureChange) {
		version++
		at := time.UnixMicro(tableVersionTime(t, env, src, version)).UTC()
		if !at.After(last) {
			at = last.Add(time.Millisecond) // (a commit in the same instant as the one before)
		}
		last = at
		for _, c := range changes {
			c.version, c.at = version, at
			ref = append(ref, c)
		}
	}
	ids := func() []string {
		var out []string
		for id := range cur {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	next := 0
	newRows := func(n int) ([][]any, []captureChange) {
		var rows [][]any
		var chs []captureChange
		for range n {
			id, amount := fmt.Sprintf("T%03d", next), rng.Int64N(100)
			next++
			rows = append(rows, []any{id, amount})
			chs = append(chs, captureChange{id: id, amount: amount, kind: delta.ChangeInsert})
			cur[id] = amount
		}
		return rows, chs
	}
	// Version 0 creates the table, version 1 adds its first rows.
	rows, chs := newRows(1 + rng.IntN(4))
	if v := appendRows(t, env, src, rows...); v != 1 {
		t.Fatalf("first append at version %d", v)
	}
	last = time.UnixMicro(tableVersionTime(t, env, src, 0)).UTC()
	commit(chs...)
	tbl, err := env.openTable(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	steps := 8 + rng.IntN(12)
	for step := range steps {
		clock.Advance(time.Duration(1+rng.IntN(90)) * time.Minute)
		have := ids()
		switch op := rng.IntN(10); {
		case op < 4 || len(have) == 0: // an append
			rows, chs := newRows(1 + rng.IntN(3))
			appendRows(t, env, src, rows...)
			commit(chs...)
		case op < 6: // an update of one row
			id := have[rng.IntN(len(have))]
			old, amount := cur[id], cur[id]+1+rng.Int64N(50)
			if _, err := tbl.Update(ctx, delta.UpdateOptions{Where: expr.Eq("id", id), Set: map[string]any{"amount": amount}}); err != nil {
				t.Fatal(err)
			}
			cur[id] = amount
			commit(captureChange{id: id, amount: old, kind: delta.ChangeUpdatePreimage}, captureChange{id: id, amount: amount, kind: delta.ChangeUpdatePostimage})
		case op < 8: // a delete of one row
			id := have[rng.IntN(len(have))]
			if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("id", id)}); err != nil {
				t.Fatal(err)
			}
			commit(captureChange{id: id, amount: cur[id], kind: delta.ChangeDelete})
			delete(cur, id)
		default: // an overwrite: every row deleted, new ones inserted
			var chs []captureChange
			for _, id := range have {
				chs = append(chs, captureChange{id: id, amount: cur[id], kind: delta.ChangeDelete})
				delete(cur, id)
			}
			rows, ins := newRows(1 + rng.IntN(3))
			writeRows(t, env, src, true, rows...)
			commit(append(chs, ins...)...)
		}
		if rng.IntN(4) == 0 && step > 0 {
			clock.Advance(time.Hour)
			runStage(t, vacuum, env)
			version = tableVersion(t, env, src) // (VACUUM START and END, when it deleted files: no changes)
		}
		if rng.IntN(3) == 0 || step == steps-1 {
			clock.Advance(time.Minute)
			runStage(t, capture, env)
			var want []string
			for _, c := range ref {
				if c.version >= start && !(cfg.IgnoreDeletes && c.kind == delta.ChangeDelete) {
					want = append(want, c.String())
				}
			}
			slices.Sort(want)
			got := tableRows(t, env, dst, "id", "amount", "_change_type", "_commit_version", "_commit_timestamp")
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, after step %d (source at version %d, ignore_deletes %v, starting_version %d):\n%s", seed, step, version, cfg.IgnoreDeletes, start, diff(got, want))
			}
		}
	}
}
