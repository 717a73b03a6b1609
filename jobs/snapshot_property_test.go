package jobs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The daily snapshot property, through the pipeline: dated full extracts (an as_of
// column) are loaded into a staging table with mode: snapshot and sequence_by: as_of,
// and merged from its change feed by scd2_merge (deletes: close or tombstone) or
// scd1_merge, with sequence_by: as_of. Keys come, change, repeat, vanish and return.
// However the loads are grouped into merge runs, and whatever the order of an extract's
// rows, the table equals the reference fold of the events the extracts mean: per day,
// an upsert at the day of every key present and a delete at the day of every key absent.

// snapDay is one day's extract: per key its city ("" NULL), absent when not in the map.
type snapDay map[string]string

func randomSnapshotDays(rng *rand.Rand) []snapDay {
	keys := []string{"A", "B", "C", "D", "E"}
	cities := []string{"", "Oslo", "Rome"}
	days := make([]snapDay, 3+rng.IntN(8))
	for d := range days {
		days[d] = snapDay{}
		for _, k := range keys {
			if rng.IntN(4) > 0 { // present three days in four
				days[d][k] = cities[rng.IntN(len(cities))]
			}
		}
	}
	return days
}

var snapBase = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

func snapDate(d int) time.Time { return snapBase.AddDate(0, 0, d) }

// datableDays are the days an ingest dating its snapshots by their rows' as_of loads:
// an empty extract after a non-empty one (keys to close, no time to close them at) is
// refused, nil here.
func datableDays(days []snapDay) []snapDay {
	out := make([]snapDay, len(days))
	held := false // the table has keys
	for d, day := range days {
		if len(day) == 0 && held {
			continue
		}
		out[d], held = day, len(day) > 0
	}
	return out
}

// snapshotEvents are the events the extracts mean, over the dimension's data columns
// (customer_id, name, city); a nil day was not loaded.
func snapshotEvents(days []snapDay) []cdcEvent {
	var out []cdcEvent
	for d, day := range days {
		if day == nil {
			continue
		}
		at := int64(snapDate(d).Sub(cdcBase) / time.Minute)
		for _, k := range []string{"A", "B", "C", "D", "E"} {
			if city, ok := day[k]; ok {
				out = append(out, cdcEvent{id: k, city: city, name: "n", op: "U", at: at})
			} else {
				out = append(out, cdcEvent{id: k, op: "D", at: at})
			}
		}
	}
	return out
}

type snapPipeline struct {
	*cdcPipeline
	day int
}

// newSnapshotPipeline makes the pipeline; byFileName takes the snapshot's time from the
// extracts' names (snapshot_time: file_name) instead of as_of, in the merge too.
func newSnapshotPipeline(t *testing.T, mode cdcMode, byFileName bool) *snapPipeline {
	p := newCDCModePipeline(t, mem.New(mem.Config{}), mode)
	staging := &Table{
		Name: "staging.customers", Path: "staging/customers",
		Schema:     schemaOf(t, "customer_id string", "name string", "city string", "as_of date", "source_file string", "load_timestamp timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
	p.env.Tables = map[string]*Table{staging.Name: staging, p.dim.Name: p.dim}
	all := 1.0
	p.ingest = NewIngest("ingest", &IngestConfig{Source: "/landing/extracts/*.csv", Target: staging.Name, Mode: "snapshot",
		Keys: []string{"customer_id"}, SequenceBy: "as_of", MaxDeleteFraction: &all})
	seq := "as_of"
	if byFileName {
		p.ingest.cfg.SequenceBy, p.ingest.cfg.SnapshotTime, seq = "", SnapshotTimeFromFileName, ""
	}
	switch mode {
	case cdcSCD1:
		p.merge = NewSCD1Merge("merge", &SCD1Config{Source: staging.Name, SourceChanges: true, Target: p.dim.Name, Keys: []string{"customer_id"}, SequenceBy: seq, Deletes: "delete"})
	default:
		cfg := scd2Config()
		cfg.SequenceBy, cfg.Type1 = seq, []string{"name"}
		if mode == cdcTombstone {
			cfg.Deletes, cfg.Track, cfg.Type1 = "tombstone", []string{"name", "city"}, nil
		}
		p.merge = NewSCD2Merge("merge", cfg)
	}
	return &snapPipeline{cdcPipeline: p}
}

// load delivers the next day's extract (rows in a random order) and runs the ingest
// (which refuses an undatable one: see datableDays).
func (p *snapPipeline) load(t *testing.T, rng *rand.Rand, day snapDay, undatable bool) {
	t.Helper()
	lines := []string{}
	for k, city := range day {
		lines = append(lines, fmt.Sprintf("%s,n,%s,%s", k, city, snapDate(p.day).Format(time.DateOnly)))
	}
	rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	putFile(t, p.landing, fmt.Sprintf("extracts/%s.csv", snapDate(p.day).Format(time.DateOnly)), "customer_id,name,city,as_of\n"+strings.Join(lines, "\n")+"\n")
	if len(lines) == 0 {
		putFile(t, p.landing, fmt.Sprintf("extracts/%s.csv", snapDate(p.day).Format(time.DateOnly)), "customer_id,name,city,as_of\n")
	}
	p.day++
	p.clock.Advance(time.Minute)
	if undatable {
		// No rows to take the snapshot's time from, and keys to close: refused.
		if _, err := p.ingest.Run(t.Context(), p.env); err == nil || !strings.Contains(err.Error(), "this snapshot has no rows, so no as_of to date it by") {
			t.Fatalf("an empty extract dated by as_of after a non-empty one: %v, want it refused", err)
		}
	} else {
		runStage(t, p.ingest, p.env)
	}
	// The extract is consumed: the next run sees only the next day's file.
	if err := p.landing.Delete(t.Context(), fmt.Sprintf("extracts/%s.csv", snapDate(p.day-1).Format(time.DateOnly))); err != nil {
		t.Fatal(err)
	}
}

func TestDailySnapshotsWithBusinessTime(t *testing.T) {
	for _, mode := range []cdcMode{cdcSCD2, cdcTombstone, cdcSCD1, cdcSCD2 + "/file_name"} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			mode, byName := cdcMode(strings.TrimSuffix(string(mode), "/file_name")), strings.HasSuffix(string(mode), "/file_name")
			for seed := range propertySeeds(cdcStreams) {
				rng := rand.New(rand.NewPCG(seed, 21))
				days := randomSnapshotDays(rng)
				loaded := days
				if !byName {
					loaded = datableDays(days)
				}
				want := mode.reference(t, snapshotEvents(loaded))
				for split := range 4 { // merged after every load, then three random groupings
					p := newSnapshotPipeline(t, mode, byName)
					for d, day := range days {
						p.load(t, rng, day, loaded[d] == nil)
						if split == 0 || rng.IntN(3) == 0 || d == len(days)-1 {
							p.clock.Advance(time.Minute)
							runStage(t, p.merge, p.env)
						}
					}
					if got := mode.table(t, p.cdcPipeline); got != want {
						t.Fatalf("seed %d split %d: the table differs from the reference\ndays: %v\ngot:\n%s\nwant:\n%s", seed, split, days, got, want)
					}
				}
			}
		})
	}
}

// An extract older than the one the table holds is refused: its differences from a
// newer snapshot are not what changed.
func TestSnapshotOutOfOrderRefused(t *testing.T) {
	p := newSnapshotPipeline(t, cdcSCD2, false)
	rng := rand.New(rand.NewPCG(1, 2))
	p.day = 3
	p.load(t, rng, snapDay{"A": "Oslo"}, false)
	p.day = 1
	putFile(t, p.landing, "extracts/2026-02-02.csv", "customer_id,name,city,as_of\nA,n,Rome,2026-02-02\n")
	_, err := p.ingest.Run(t.Context(), p.env)
	if err == nil || !strings.Contains(err.Error(), "older than the one the table holds") {
		t.Fatalf("an older extract: %v, want it refused", err)
	}
}

// A header-only extract of a table whose snapshots are dated by their rows' as_of
// (max_delete_fraction raised, so that it may empty the table) has no time to close
// the keys it lacks at: it is refused naming the file, and nothing is written. Dated by
// its file name, the same extract closes every key at its date.
func TestSnapshotEmptyExtractNeedsItsTime(t *testing.T) {
	for _, byName := range []bool{false, true} {
		t.Run(fmt.Sprintf("file_name=%v", byName), func(t *testing.T) {
			p := newSnapshotPipeline(t, cdcSCD2, byName)
			rng := rand.New(rand.NewPCG(1, 2))
			p.load(t, rng, snapDay{"A": "Oslo", "B": "Rome"}, false)
			before := tableVersion(t, p.env, p.env.Tables["staging.customers"])
			p.load(t, rng, snapDay{}, !byName)
			after := tableVersion(t, p.env, p.env.Tables["staging.customers"])
			if !byName {
				if after != before {
					t.Fatalf("the refused extract committed version %d", after)
				}
				return
			}
			runStage(t, p.merge, p.env)
			rows := tableRows(t, p.env, p.dim, "customer_id", "valid_to", "is_current")
			want := []string{"A|2026-02-02T00:00:00Z|false", "B|2026-02-02T00:00:00Z|false"}
			if !slices.Equal(rows, want) {
				t.Fatalf("dimension after the empty extract dated by its name: %q, want both keys closed on its date %q", rows, want)
			}
		})
	}
}
