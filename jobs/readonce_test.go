package jobs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// countOpens counts, until the test ends, every opening of a stage's input: a source
// file decoded, a source table's change feed or snapshot read.
func countOpens(t *testing.T) map[string]int {
	opens := map[string]int{}
	was := openedSource
	openedSource = func(name string) { opens[name]++ }
	t.Cleanup(func() { openedSource = was })
	return opens
}

// No keyed stage reads its input twice: in memory, and over a budget so small that its
// batch goes to spill files at its first record (the rows read so far handed over, not
// read again), each source file is decoded once and each source table read once a run.
func TestInputReadOnce(t *testing.T) {
	for _, budget := range []ByteSize{0, tinyBudget} {
		for _, mode := range []string{"upsert", "upsert_sequence", "snapshot"} {
			t.Run(fmt.Sprintf("budget=%d/%s", budget, mode), func(t *testing.T) {
				tbl := eventsTable(t)
				clock := &testClock{t: t0}
				env, landing := ingestEnv(t, mem.New(mem.Config{Now: clock.Now}), tbl)
				env.Delta.Now = clock.Now
				env.MemoryBudget, env.SpillDir = budget, t.TempDir()
				cfg := &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: strings.TrimSuffix(mode, "_sequence"), Keys: []string{"id"}, BatchSize: 64}
				if mode == "upsert_sequence" {
					cfg.SequenceBy = "updated_at"
				}
				stage := NewIngest("ingest", cfg)
				file := 0
				for run := range 3 {
					var names []string
					for part := range 2 {
						file++
						var lines []string
						for k := range 80 {
							lines = append(lines, fmt.Sprintf("C%04d,city %d,U,2026-01-14T%02d:00:00Z", k+part*80, (k+run)%5, run))
						}
						name := fmt.Sprintf("c/%03d.csv", file)
						putFile(t, landing, name, "id,city,op,updated_at\n"+strings.Join(lines, "\n")+"\n")
						names = append(names, "/landing/"+name)
					}
					clock.Advance(time.Hour)
					opens := countOpens(t)
					res := runStage(t, stage, env)
					if (budget > 0) != spilled(res) && !(run == 0 && mode == "snapshot" && budget == 0) {
						t.Errorf("run %d: over spill files %v with a budget of %d", run, spilled(res), budget)
					}
					for _, n := range names {
						if opens[n] != 1 {
							t.Errorf("run %d: %s decoded %d times, want once (all: %v)", run, n, opens[n], opens)
						}
					}
					if len(opens) != len(names) {
						t.Errorf("run %d: opened %v, want each of %v once", run, opens, names)
					}
				}
			})
		}
		for _, kind := range []string{"scd1", "scd1_snapshot", "scd2", "scd2_snapshot"} {
			t.Run(fmt.Sprintf("budget=%d/%s", budget, kind), func(t *testing.T) {
				staging, dim := customerTables(t)
				snapshotSource := strings.HasSuffix(kind, "_snapshot")
				if snapshotSource {
					staging.Properties = nil
				}
				target := dim
				var stage Stage
				if strings.HasPrefix(kind, "scd1") {
					target = &Table{Name: "current.customer", Path: "current/customer",
						Schema: schemaOf(t, "customer_id string", "name string", "city string", "updated_at timestamp")}
					stage = NewSCD1Merge("merge", &SCD1Config{Source: staging.Name, SourceChanges: !snapshotSource, Target: target.Name, Keys: []string{"customer_id"}, SequenceBy: "updated_at", Deletes: "delete"})
				} else {
					cfg := scd2Config()
					cfg.SourceChanges = !snapshotSource
					stage = NewSCD2Merge("merge", cfg)
				}
				clock := &testClock{t: d1}
				env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, target)
				env.MemoryBudget, env.SpillDir = budget, t.TempDir()
				for day := range 3 {
					var rows [][]any
					for k := range 60 {
						rows = append(rows, []any{fmt.Sprintf("C%04d", k), "Ada", fmt.Sprintf("city %d", (k+day)%5), clock.t})
					}
					writeRows(t, env, staging, snapshotSource, rows...)
					clock.Advance(time.Hour)
					opens := countOpens(t)
					res := runStage(t, stage, env)
					if (budget > 0) != spilled(res) {
						t.Errorf("day %d: over spill files %v with a budget of %d", day, spilled(res), budget)
					}
					if len(opens) != 1 || opens[staging.Path] != 1 {
						t.Errorf("day %d: opened %v, want %s once", day, opens, staging.Path)
					}
					clock.t = clock.t.Add(24 * time.Hour)
				}
			})
		}
	}
}
