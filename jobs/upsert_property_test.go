package jobs

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The property of an upsert ingest: random files of upserts and deletes (delete_when),
// delivered in random runs, in memory and over a tiny memory budget, with sequence_by or
// without, give after every run exactly the table of a reference written in the test:
//
//   - without sequence_by each file is merged in its own commit, in name order within a
//     run: its rows set their keys' rows, its deletes remove them; a key twice in a file
//     fails the run naming it, and nothing of the run is written;
//   - with sequence_by the run's rows fold per key to the last by sequence (a delete wins
//     a tie, exact repeats drop out; two different rows at one sequence fail the run),
//     and the last row of a key older than the table's row changes nothing (a deleted
//     key keeps no sequence: an older row brings it back).
func TestUpsertIngestProperty(t *testing.T) {
	for _, seq := range []bool{false, true} {
		for _, budget := range []ByteSize{0, tinyBudget} {
			t.Run(fmt.Sprintf("sequence_by=%v/budget=%s", seq, budget), func(t *testing.T) {
				t.Parallel()
				streams := cdcStreams / 2
				if budget > 0 {
					streams = max(1, cdcStreams/4)
				}
				for seed := range propertySeeds(streams) {
					upsertProperty(t, seed, seq, budget)
				}
			})
		}
	}
}

// upsertRow is a row of an upsert file: a key's city, or its delete, at a time.
type upsertRow struct {
	id, city string
	del      bool
	at       int // minutes after t0
}

func (r upsertRow) line() string {
	op := "U"
	if r.del {
		op = "D"
	}
	return fmt.Sprintf("%s,%s,%s,%s", r.id, r.city, op, t0.Add(time.Duration(r.at)*time.Minute).Format(time.RFC3339))
}

func upsertProperty(t *testing.T, seed uint64, seq bool, budget ByteSize) {
	rng := rand.New(rand.NewPCG(seed, 43))
	tbl := eventsTable(t)
	clock := &testClock{t: t0}
	env, landing := ingestEnv(t, mem.New(mem.Config{Now: clock.Now}), tbl)
	env.Delta.Now = clock.Now
	env.MemoryBudget = budget
	cfg := &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: "upsert", Keys: []string{"id"}, DeleteWhen: "op = 'D'"}
	if seq {
		cfg.SequenceBy = "updated_at"
	}
	stage := NewIngest("ingest", cfg)
	cities := []string{"Seattle", "Portland", "Leeds", ""}
	table := map[string]upsertRow{} // the reference's table
	file, runs := 0, 4+rng.IntN(6)
	for run := range runs {
		var files [][]upsertRow
		for range 1 + rng.IntN(3) {
			var rows []upsertRow
			used := map[string]bool{}
			for range 1 + rng.IntN(8) {
				r := upsertRow{id: fmt.Sprintf("C%d", rng.IntN(8)), city: cities[rng.IntN(len(cities))], del: rng.IntN(5) == 0, at: rng.IntN(600)}
				if used[r.id] && !seq && rng.IntN(12) > 0 {
					continue // (now and then a key twice in a file, which fails the run)
				}
				used[r.id] = true
				rows = append(rows, r)
				switch n := rng.IntN(30); { // at the same time: an exact repeat, a delete, another row
				case n < 3 && seq:
					rows = append(rows, r)
				case n < 6 && seq:
					rows = append(rows, upsertRow{id: r.id, del: true, at: r.at})
				case n == 6 && seq:
					rows = append(rows, upsertRow{id: r.id, city: r.city + "-2", at: r.at})
				}
			}
			rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			files = append(files, rows)
		}
		// The files of the run, named in the order they are merged.
		names := make([]string, len(files))
		for i, rows := range files {
			file++
			names[i] = fmt.Sprintf("c/%04d.csv", file)
			var b strings.Builder
			b.WriteString("id,city,op,updated_at\n")
			for _, r := range rows {
				b.WriteString(r.line() + "\n")
			}
			putFile(t, landing, names[i], b.String())
		}
		next, problem := upsertReference(table, files, seq)
		clock.Advance(time.Hour)
		_, err := stage.Run(t.Context(), env)
		switch {
		case problem != "" && (err == nil || !strings.Contains(err.Error(), problem)):
			t.Fatalf("seed %d run %d: err %v, want one naming %s\nfiles: %v", seed, run, err, problem, files)
		case problem == "" && err != nil:
			t.Fatalf("seed %d run %d: %v\nfiles: %v", seed, run, err, files)
		case problem != "":
			for _, n := range names { // (the failed run's files stay out of the next ones)
				if err := landing.Delete(t.Context(), n); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		table = next
		var want []string
		for _, r := range table {
			city := r.city
			if city == "" {
				city = "NULL"
			}
			want = append(want, fmt.Sprintf("%s|%s|%s", r.id, city, t0.Add(time.Duration(r.at)*time.Minute).UTC().Format(time.RFC3339Nano)))
		}
		slices.Sort(want)
		got := tableRows(t, env, tbl, "id", "city", "updated_at")
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d run %d (sequence_by %v, budget %s): the table differs from the reference\nfiles: %v\n%s", seed, run, seq, budget, files, diff(got, want))
		}
	}
}

// upsertReference applies a run's files (in merge order) to the reference's table: the
// new table, or what makes the run fail (the table unchanged).
func upsertReference(table map[string]upsertRow, files [][]upsertRow, seq bool) (map[string]upsertRow, string) {
	next := map[string]upsertRow{}
	for k, v := range table {
		next[k] = v
	}
	if !seq {
		for _, rows := range files {
			seen := map[string]bool{}
			for _, r := range rows {
				if seen[r.id] {
					return nil, "key " + r.id
				}
				seen[r.id] = true
			}
			for _, r := range rows {
				if r.del {
					delete(next, r.id)
				} else {
					next[r.id] = r
				}
			}
		}
		return next, ""
	}
	// Fold the run's rows per key: the last by sequence, a delete winning a tie.
	last := map[string]upsertRow{}
	var ids []string
	for _, rows := range files {
		for _, r := range rows {
			l, ok := last[r.id]
			switch {
			case !ok:
				ids = append(ids, r.id)
				last[r.id] = r
			case r.at > l.at || r.at == l.at && r.del && !l.del:
				last[r.id] = r
			case r.at == l.at && !r.del && !l.del && r.city != l.city:
				return nil, "key " + r.id
			}
		}
	}
	slices.SortFunc(ids, cmp.Compare)
	for _, id := range ids {
		r := last[id]
		if cur, ok := next[id]; ok && r.at < cur.at {
			continue // older than the table's row
		}
		if r.del {
			delete(next, id)
		} else {
			next[id] = r
		}
	}
	return next, ""
}
