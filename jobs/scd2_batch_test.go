package jobs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The stage (columnar batch, dimension scan that settles repeats, MERGE) must give
// exactly the dimension the fold model gives for the same batches: random snapshot
// batches with repeats of current rows (settled without the fold), late events,
// several events per key, duplicates, NULL transitions, type 1 changes and, with
// deletes: close, keys missing from a snapshot closed and returning later.
func TestSCD2StageMatchesFoldModel(t *testing.T) {
	for _, deletes := range []string{"ignore", "close"} {
		for seed := range uint64(10) {
			t.Run(fmt.Sprintf("%s/seed%d", deletes, seed), func(t *testing.T) {
				stageMatchesModel(t, deletes, seed)
			})
		}
	}
}

func stageMatchesModel(t *testing.T, deletes string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	staging, dim := customerTables(t)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := &testClock{t: base.Add(1000 * time.Hour)}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
	cfg := scd2Config()
	cfg.SourceChanges, cfg.Deletes, cfg.Type1 = false, deletes, []string{"name"}
	stage := NewSCD2Merge("merge", cfg)
	// The dimension's data columns are customer_id, name, city: key, type 1, tracked.
	spec := scdSpec{keys: []int{0}, tracked: []int{2}, type1: []int{1}, deletes: deletes, end: SeqMax}
	model := newMemDim()
	cities := []any{nil, "Seattle", "Portland", "Tacoma"}
	names := []any{"Ada", "Ada L."}

	for batch := range 8 {
		clock.Advance(time.Hour)
		var rows [][]any
		var events []scdEvent
		at := map[string][]any{} // key@seq → row, so one batch never holds two different rows there
		add := func(row []any, seq time.Time) {
			k := fmt.Sprintf("%v@%d", row[0], seq.UnixMicro())
			if prev, ok := at[k]; ok && !rowsEqual(prev, row) {
				return
			}
			at[k] = row
			rows = append(rows, append(slices.Clone(row), seq))
			events = append(events, scdEvent{seq: seq.UnixMicro(), row: row})
		}
		for range 4 + rng.IntN(12) {
			key := fmt.Sprintf("C%d", rng.IntN(16))
			var cur *scdVersion
			for _, v := range model.rows {
				if v.Current && v.Row[0] == key {
					cur = &v
				}
			}
			switch r := rng.IntN(10); {
			case r < 4 && cur != nil:
				// A repeat of the current row: at or after its start it is settled by the
				// scan; before it, it moves the start back (the fold).
				seq := time.UnixMicro(cur.From).Add(time.Duration(rng.IntN(5)-2) * time.Hour)
				add(slices.Clone(cur.Row), seq.UTC())
			default:
				// Anything, possibly late (before stored versions) or a NULL transition.
				seq := base.Add(time.Duration(rng.IntN(60)) * time.Hour)
				row := []any{key, names[rng.IntN(len(names))], cities[rng.IntN(len(cities))]}
				add(row, seq)
				if rng.IntN(5) == 0 {
					add(row, seq) // an exact duplicate
				}
			}
		}
		if len(rows) == 0 {
			continue
		}
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		writeRows(t, env, staging, true, rows...)
		if deletes == "close" {
			// The model deletes the current keys the snapshot lacks at its commit time.
			inBatch := map[any]bool{}
			for _, e := range events {
				inBatch[e.row[0]] = true
			}
			for _, v := range model.rows {
				if v.Current && !inBatch[v.Row[0]] {
					events = append(events, scdEvent{seq: clock.t.UnixMicro(), delete: true, row: []any{v.Row[0], nil, nil}})
				}
			}
		}
		if err := model.merge(t, spec, events); err != nil {
			t.Fatal(err)
		}
		model.checkInvariants(t, spec)
		runStage(t, stage, env)

		got := tableRows(t, env, dim, "customer_id", "name", "city", "valid_from", "valid_to", "is_current")
		var want []string
		for _, v := range model.rows {
			city := "NULL"
			if v.Row[2] != nil {
				city = v.Row[2].(string)
			}
			want = append(want, fmt.Sprintf("%s|%s|%s|%s|%s|%v", v.Row[0], v.Row[1], city, stamp(v.From), stamp(v.To), v.Current))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d: stage and model differ\n%s", batch, diff(got, want))
		}
	}
}

func stamp(micros int64) string {
	return time.UnixMicro(micros).UTC().Format("2006-01-02T15:04:05Z")
}
