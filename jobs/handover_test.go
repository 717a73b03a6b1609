package jobs

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A snapshot run whose table's keys fit its budget but whose changed rows do not hands
// what its second pass weighed (each key's standing row, kept or not) and the table's
// keys to spill files mid-way, and carries on without reading anything again: the
// table, its change feed and history are what a run in memory gives; with sequence_by
// rows of one key in files before and after the hand-over fold as in memory, and a key
// twice after it is named as in memory.
func TestSnapshotHandOverMidWeigh(t *testing.T) {
	const keys = 300
	// A pass holds the table's keys (their cost and about 8 bytes each) and 6 KiB more.
	budget := ByteSize((keys*(snapKeyCost+8) + 6<<10) * 4 / 3)
	for _, seq := range []bool{false, true} {
		t.Run(fmt.Sprintf("sequence_by=%v", seq), func(t *testing.T) {
			scenario := func(budget ByteSize) ([]string, int) {
				rng := rand.New(rand.NewPCG(7, 9))
				tbl := eventsTable(t)
				clock := &testClock{t: t0}
				env, landing := ingestEnv(t, mem.New(mem.Config{Now: clock.Now}), tbl)
				env.Delta.Now = clock.Now
				env.MemoryBudget, env.SpillDir = budget, t.TempDir()
				cfg := &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: "snapshot", Keys: []string{"id"}, DeleteWhen: "op = 'D'", MaxDeleteFraction: ptrTo(1.0)}
				if seq {
					cfg.SequenceBy = "updated_at"
				}
				stage := NewIngest("ingest", cfg)
				cities := []string{"", "Seattle", "Portland", "Leeds", "Rome"}
				line := func(k, city int, op string, at time.Duration) string {
					return fmt.Sprintf("C%04d,%s,%s,%s", k, cities[city%len(cities)], op, t0.Add(at).Format(time.RFC3339))
				}
				var out []string
				spills, file := 0, 0
				for run := range 3 {
					var files [][]string
					switch run {
					case 0: // the table
						var lines []string
						for k := range keys {
							lines = append(lines, line(k, k, "U", time.Hour))
						}
						files = append(files, lines)
					default: // most rows change, some keys come, some go, some are marked deleted
						files = make([][]string, 3)
						for k := range keys + 40 {
							if rng.IntN(12) == 0 {
								continue // absent today
							}
							op := "U"
							if rng.IntN(15) == 0 {
								op = "D"
							}
							f := rng.IntN(3)
							files[f] = append(files[f], line(k, k+run+rng.IntN(2), op, time.Duration(run+1)*time.Hour))
							if seq && rng.IntN(6) == 0 { // the key again in a later file, later or earlier
								g := min(2, f+1+rng.IntN(2))
								files[g] = append(files[g], line(k, k+run+2, "U", time.Duration(run+1)*time.Hour+time.Duration(rng.IntN(3)-1)*time.Minute))
							}
						}
						if run == 2 { // a key twice near the end (with sequence_by: two rows at one time)
							files[2] = append(files[2], line(5, 1, "U", 9*time.Hour), line(5, 2, "U", 9*time.Hour))
						}
					}
					for _, lines := range files {
						file++
						putFile(t, landing, fmt.Sprintf("c/%03d.csv", file), "id,city,op,updated_at\n"+strings.Join(lines, "\n")+"\n")
					}
					clock.Advance(time.Hour)
					res, err := stage.Run(t.Context(), env)
					if err != nil {
						out = append(out, fmt.Sprintf("run %d: %v", run, err))
					}
					if spilled(res) {
						spills++
					}
				}
				return append(out, observed(t, env, tbl, "")...), spills
			}
			want, n := scenario(0)
			if n > 0 {
				t.Fatalf("without a budget, %d runs went over spill files", n)
			}
			got, n := scenario(budget)
			if n == 0 {
				t.Fatalf("with a budget of %s, no run went over spill files", budget)
			}
			if i := firstDifference(got, want); i >= 0 {
				t.Fatalf("with a budget of %s (%d runs over spill files), line %d differs:\ngot  %s\nwant %s\n\nall got:\n%s", budget, n, i, at(got, i), at(want, i), strings.Join(got, "\n"))
			}
			if !strings.Contains(strings.Join(want, "\n"), "run 2: ") {
				t.Errorf("the last run did not fail on its key twice:\n%s", strings.Join(want[:3], "\n"))
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// A snapshot run whose table's keys do not fit its budget sets the table aside while it
// decodes the files: when a data file of the table cannot be read, the run fails with
// that file's error (not the decode's stop that follows it), commits nothing and leaves
// no spill file.
func TestSnapshotTableUnreadableOverBudget(t *testing.T) {
	tbl := eventsTable(t)
	warehouse := mem.New(mem.Config{})
	env, landing := ingestEnv(t, warehouse, tbl)
	stage := NewIngest("ingest", &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: "snapshot", Keys: []string{"id"}, MaxDeleteFraction: ptrTo(1.0)})
	var lines []string
	for k := range 2000 {
		lines = append(lines, fmt.Sprintf("C%04d,Seattle,U,2026-01-14T01:00:00Z", k))
	}
	putFile(t, landing, "c/001.csv", "id,city,op,updated_at\n"+strings.Join(lines, "\n")+"\n")
	runStage(t, stage, env)
	_, snap := latest(t, env, tbl)
	bad := snap.Files()[0].Path
	putFile(t, warehouse, tbl.Path+"/"+bad, "not a parquet file")
	for k := range lines {
		lines[k] = strings.Replace(lines[k], "Seattle", "Portland", 1)
	}
	for f := range 20 { // (many files: the decode is stopped, not run to its end)
		putFile(t, landing, fmt.Sprintf("c/%03d.csv", f+2), "id,city,op,updated_at\n"+strings.Join(lines, "\n")+"\n")
	}
	env.MemoryBudget, env.SpillDir = ByteSize(2000*snapKeyCost/2), t.TempDir()
	_, err := stage.Run(t.Context(), env)
	if err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("error %v, want the unreadable data file %s named", err, bad)
	}
	if _, after := latest(t, env, tbl); after.Version() != snap.Version() {
		t.Errorf("version %d after the failed run, want %d", after.Version(), snap.Version())
	}
	if n := spillFiles(t, env.SpillDir); n != 0 {
		t.Errorf("%d spill files left", n)
	}
}
