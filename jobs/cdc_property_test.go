package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The change stream property, through the pipeline: event files with an op column are
// appended to a bronze table (ingest), and scd2_merge (or scd1_merge) reads its change
// feed with sequence_by, delete_when: "op = 'D'" and deletes: close. Whatever the order
// the files arrive in and however they are split into runs, the dimension equals that of
// one run with every file, which equals a reference fold written here from the rules.

// cdcEvent is one line of an event file: key, city (tracked), name (type 1), op, time.
type cdcEvent struct {
	id, city, name, op string // "" city or name is NULL
	at                 int64  // minutes after cdcBase
}

var cdcBase = time.Date(2026, 1, 14, 0, 0, 0, 0, time.UTC)

func (e cdcEvent) csv() string {
	return fmt.Sprintf("%s,%s,%s,%s,%s", e.id, e.city, e.name, e.op, cdcBase.Add(time.Duration(e.at)*time.Minute).Format(time.RFC3339))
}

// randomCDCStream makes events over a few keys: upserts with NULLs and repeats of
// values (no-op confirmations), deletes, returns, same-sequence delete and upsert, and
// exact duplicate deliveries; never two different upserts of a key at one sequence.
func randomCDCStream(rng *rand.Rand) []cdcEvent {
	keys := []string{"K1", "K2", "K3", "K4"}
	cities := []string{"", "Seattle", "Portland"}
	names := []string{"", "Ada", "Alan"}
	var evs []cdcEvent
	upserted := map[string]bool{}
	for range 10 + rng.IntN(50) {
		e := cdcEvent{id: keys[rng.IntN(len(keys))], op: "U", at: int64(rng.IntN(48))}
		id := fmt.Sprint(e.id, "@", e.at)
		switch {
		case rng.IntN(5) == 0:
			e.op = "D"
		case upserted[id]:
			continue
		default:
			e.city, e.name = cities[rng.IntN(len(cities))], names[rng.IntN(len(names))]
			upserted[id] = true
		}
		evs = append(evs, e)
		if rng.IntN(6) == 0 {
			evs = append(evs, e) // delivered twice
		}
	}
	return evs
}

// cdcRefEvents turns events into the fold's events over the dimension's data columns
// (id, name, city): key 0, tracked 2, type 1 1.
func cdcRefEvents(evs []cdcEvent) []scdEvent {
	var out []scdEvent
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	for _, e := range evs {
		out = append(out, scdEvent{seq: cdcBase.Add(time.Duration(e.at) * time.Minute).UnixMicro(), delete: e.op == "D", row: []any{e.id, null(e.name), null(e.city)}})
	}
	return out
}

var cdcSpec = scdSpec{keys: []int{0}, tracked: []int{2}, type1: []int{1}, deletes: "close", end: SeqMax}

type cdcPipeline struct {
	env     *Env
	landing objectstore.Store
	ingest  *Ingest
	merge   Stage
	dim     *Table
	clock   *testClock
	files   int
}

// cdcMode is the merge a change stream pipeline runs: scd2_merge with deletes: close (city
// tracked, name type 1) or tombstone (both tracked), or scd1_merge with deletes: delete.
type cdcMode string

const (
	cdcSCD2      cdcMode = "scd2"
	cdcTombstone cdcMode = "scd2-tombstone"
	cdcSCD1      cdcMode = "scd1"
)

func (m cdcMode) spec() scdSpec {
	spec := cdcSpec
	if m == cdcTombstone {
		// Every column tracked: a version of NULLs then holds NULLs, as a tombstone does
		// (a type 1 column would carry the newest name onto it).
		spec.deletes, spec.tracked, spec.type1 = "tombstone", []int{1, 2}, nil
	}
	return spec
}

// reference is what the mode's table must hold after merging events (in any runs).
func (m cdcMode) reference(t *testing.T, events []cdcEvent) string {
	t.Helper()
	if m == cdcSCD1 {
		return referenceSCD1(cdcRefEvents(events))
	}
	ref, err := referenceFold(m.spec(), cdcRefEvents(events))
	if err != nil {
		t.Fatal(err)
	}
	return withoutTombFlag(ref)
}

// table renders the pipeline's table as the mode's reference does.
func (m cdcMode) table(t *testing.T, p *cdcPipeline) string {
	t.Helper()
	if m == cdcSCD1 {
		return cdcSCD1Rows(t, p)
	}
	dimAsModel(t, p.env, p.dim).checkInvariants(t, m.spec())
	return withoutTombFlag(p.dimension(t))
}

// withoutTombFlag drops the tombstone flags of rendered versions: a stored tombstone
// and a version whose non-key columns are all NULL hold the same values.
func withoutTombFlag(s string) string {
	return strings.NewReplacer(" tomb=true", "", " tomb=false", "").Replace(s)
}

func newCDCPipeline(t *testing.T, warehouse objectstore.Store, scd1 bool) *cdcPipeline {
	mode := cdcSCD2
	if scd1 {
		mode = cdcSCD1
	}
	return newCDCModePipeline(t, warehouse, mode)
}

func newCDCModePipeline(t *testing.T, warehouse objectstore.Store, mode cdcMode) *cdcPipeline {
	bronze := &Table{
		Name: "bronze.events", Path: "bronze/events",
		Schema:     schemaOf(t, "customer_id string", "city string", "name string", "op string", "updated_at timestamp", "source_file string", "load_timestamp timestamp"),
		Properties: map[string]string{"delta.enableChangeDataFeed": "true"},
	}
	_, dim := customerTables(t)
	clock := &testClock{t: cdcBase.Add(1000 * time.Hour)}
	p := &cdcPipeline{clock: clock, dim: dim}
	var merge Stage
	if mode == cdcSCD1 {
		dim = &Table{Name: "sales.customer", Path: "sales/customer", Schema: schemaOf(t, "customer_id string", "name string", "city string")}
		p.dim = dim
		merge = NewSCD1Merge("merge", &SCD1Config{Source: bronze.Name, SourceChanges: true, Target: dim.Name, Keys: []string{"customer_id"}, SequenceBy: "updated_at", Deletes: "delete", DeleteWhen: "op = 'D'"})
	} else {
		cfg := scd2Config()
		cfg.Source, cfg.Type1, cfg.DeleteWhen = bronze.Name, []string{"name"}, "op = 'D'"
		if mode == cdcTombstone {
			cfg.Deletes, cfg.Track, cfg.Type1 = "tombstone", []string{"name", "city"}, nil
		}
		merge = NewSCD2Merge("merge", cfg)
	}
	env, landing := ingestEnv(t, warehouse, bronze, dim)
	env.Delta.Now = clock.Now
	p.env, p.landing, p.merge = env, landing, merge
	p.ingest = NewIngest("ingest", &IngestConfig{Source: "/landing/events/*.csv", Target: bronze.Name})
	return p
}

// run delivers files (one per event list) and runs the ingest and the merge.
func (p *cdcPipeline) run(t *testing.T, files [][]cdcEvent) error {
	t.Helper()
	for _, evs := range files {
		p.files++
		var lines []string
		for _, e := range evs {
			lines = append(lines, e.csv())
		}
		putFile(t, p.landing, fmt.Sprintf("events/%05d.csv", p.files), "customer_id,city,name,op,updated_at\n"+strings.Join(lines, "\n")+"\n")
	}
	p.clock.Advance(time.Minute)
	runStage(t, p.ingest, p.env)
	p.clock.Advance(time.Minute)
	_, err := p.merge.Run(t.Context(), p.env)
	return err
}

// dimension renders the SCD2 dimension as the reference fold does.
func (p *cdcPipeline) dimension(t *testing.T) string {
	d := dimAsModel(t, p.env, p.dim)
	var lines []string
	for _, v := range d.rows {
		lines = append(lines, fmt.Sprintf("%v [%d,%d) current=%v tomb=false", []any{v.Row[0], v.Row[1], v.Row[2]}, v.From, v.To, v.Current))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// referenceSCD1 is the table an SCD1 merge of events leaves: per key the last event by
// sequence (a delete winning a tie) decides: a delete leaves no row.
func referenceSCD1(events []scdEvent) string {
	last := map[string]scdEvent{}
	for _, e := range events {
		k := e.row[0].(string)
		if l, ok := last[k]; !ok || e.seq > l.seq || e.seq == l.seq && e.delete {
			last[k] = e
		}
	}
	var lines []string
	for _, e := range last {
		if !e.delete {
			lines = append(lines, fmt.Sprint(e.row))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func cdcSCD1Rows(t *testing.T, p *cdcPipeline) string {
	var lines []string
	for _, r := range tableRows(t, p.env, p.dim, "customer_id", "name", "city") {
		parts := strings.Split(r, "|")
		row := make([]any, len(parts))
		for i, s := range parts {
			if s != "NULL" {
				row[i] = s
			}
		}
		lines = append(lines, fmt.Sprint(row))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// cdcSplits cuts a stream into files in random order and the files into runs.
func cdcSplits(rng *rand.Rand, evs []cdcEvent) [][][]cdcEvent {
	evs = slices.Clone(evs)
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	var files [][]cdcEvent
	for len(evs) > 0 {
		n := 1 + rng.IntN(min(len(evs), 6))
		files = append(files, evs[:n])
		evs = evs[n:]
	}
	var runs [][][]cdcEvent
	for len(files) > 0 {
		n := 1 + rng.IntN(min(len(files), 4))
		runs = append(runs, files[:n])
		files = files[n:]
	}
	return runs
}

// cdcDeliveries are the ways a stream is delivered: all at once, then in three random
// splits into files and runs, each in its random order and in the reverse order.
func cdcDeliveries(rng *rand.Rand, stream []cdcEvent) [][][][]cdcEvent {
	out := [][][][]cdcEvent{{{stream}}}
	for range 3 {
		runs := cdcSplits(rng, stream)
		var reversed [][][]cdcEvent
		for i := len(runs) - 1; i >= 0; i-- {
			files := slices.Clone(runs[i])
			slices.Reverse(files)
			reversed = append(reversed, files)
		}
		out = append(out, runs, reversed)
	}
	return out
}

// cdcStreams is the number of random streams per mode (a few under the race detector:
// see raceEnabled).
var cdcStreams = map[bool]int{false: 32, true: 4}[raceEnabled]

// The property, for every keyed merge of a change feed (scd2_merge with deletes: close
// and tombstone, scd1_merge), in memory and over the memory budget (a budget so small
// that every run works over spill files, in many passes): whatever the order the files
// arrive in and however they are split into runs, the table equals the reference.
func TestCDCStreamsAnyOrderAnySplit(t *testing.T) {
	for _, mode := range []cdcMode{cdcSCD2, cdcTombstone, cdcSCD1} {
		for _, budget := range []ByteSize{0, tinyBudget} {
			t.Run(string(mode)+"/budget="+budget.String(), func(t *testing.T) {
				t.Parallel()
				streams := cdcStreams
				if budget > 0 {
					streams = max(1, cdcStreams/3) // the passes over spill files, on fewer streams
				}
				for seed := range propertySeeds(streams) {
					rng := rand.New(rand.NewPCG(seed, 14))
					stream := randomCDCStream(rng)
					want := mode.reference(t, stream)
					for d, runs := range cdcDeliveries(rng, stream) {
						p := newCDCModePipeline(t, mem.New(mem.Config{}), mode)
						p.env.MemoryBudget = budget
						for i, r := range runs {
							if err := p.run(t, r); err != nil {
								t.Fatalf("seed %d delivery %d run %d: %v", seed, d, i, err)
							}
						}
						if got := mode.table(t, p); got != want {
							t.Fatalf("seed %d delivery %d (%d runs): the table differs from the reference\nruns: %v\ngot:\n%s\nwant:\n%s", seed, d, len(runs), runs, got, want)
						}
					}
				}
			})
		}
	}
}

// One seed of the property on MinIO.
func TestCDCStreamOnMinIO(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	stream := randomCDCStream(rng)
	want, err := referenceFold(cdcSpec, cdcRefEvents(stream))
	if err != nil {
		t.Fatal(err)
	}
	p := newCDCPipeline(t, testenv.S3Store(t), false)
	for i, r := range cdcSplits(rng, stream) {
		if err := p.run(t, r); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if got := p.dimension(t); got != want {
		t.Fatalf("dimension differs from the reference\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// The event log outlives the source's change feed: a late event after the bronze
// table's history is vacuumed is still placed between the folded confirmations.
func TestCDCLateEventAfterVacuum(t *testing.T) {
	ctx := t.Context()
	p := newCDCPipeline(t, mem.New(mem.Config{}), false)
	for _, f := range [][]cdcEvent{
		{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 60}},
		{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 180}}, // a confirmation
	} {
		if err := p.run(t, [][]cdcEvent{f}); err != nil {
			t.Fatal(err)
		}
	}
	bronze, err := p.env.openTable(ctx, p.env.Tables["bronze.events"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bronze.Delete(ctx, delta.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.merge.Run(ctx, p.env); err != nil {
		t.Fatal(err)
	}
	p.clock.Advance(30 * 24 * time.Hour)
	if _, err := bronze.Vacuum(ctx, delta.VacuumOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Portland", name: "Ada", op: "U", at: 120}}}); err != nil {
		t.Fatal(err)
	}
	// The bronze delete removed K1's rows from the source: a delete in its change feed,
	// at its commit time (after every event), closes the last version.
	at := func(min int) int64 { return cdcBase.Add(time.Duration(min) * time.Minute).UnixMicro() }
	deleted := tableVersionTime(t, p.env, p.env.Tables["bronze.events"], 3) / 1000 * 1000 // commit times are in ms
	want := strings.Join([]string{
		fmt.Sprintf("[K1 Ada Portland] [%d,%d) current=false tomb=false", at(120), at(180)),
		fmt.Sprintf("[K1 Ada Seattle] [%d,%d) current=false tomb=false", at(60), at(120)),
		fmt.Sprintf("[K1 Ada Seattle] [%d,%d) current=false tomb=false", at(180), deleted),
	}, "\n")
	if got := p.dimension(t); got != want {
		t.Fatalf("dimension:\n%s\nwant the late Portland version between the Seattle ones:\n%s", got, want)
	}
}

// tableVersionTime is the commit time (microseconds) of version v of a declared table.
func tableVersionTime(t *testing.T, env *Env, decl *Table, v int64) int64 {
	t.Helper()
	tbl, err := env.openTable(t.Context(), decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.SnapshotAt(t.Context(), v)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Timestamp().UnixMicro()
}

// stages runs stages one after the other as one stage (for crash tests of a pipeline).
type stages []Stage

func (ss stages) Name() string { return "pipeline" }
func (ss stages) Kind() Kind   { return KindIngest }
func (ss stages) Run(ctx context.Context, env *Env) (Result, error) {
	var all Result
	for _, s := range ss {
		res, err := s.Run(ctx, env)
		all.add(res)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// A crash at any store operation of a run (ingest, then scd2_merge with delete_when and
// its event log), then reruns: the dimension, and a later run with a late event, are
// exactly those of uninterrupted runs.
func TestCDCCrashAtEveryOperation(t *testing.T) {
	for _, budget := range []ByteSize{0, tinyBudget} {
		t.Run("budget="+budget.String(), func(t *testing.T) { cdcCrashAtEveryOperation(t, budget) })
	}
}

// spillProbe runs a stage and counts its runs that worked over spill files.
type spillProbe struct {
	Stage
	spills *int
}

func (p spillProbe) Run(ctx context.Context, env *Env) (Result, error) {
	res, err := p.Stage.Run(ctx, env)
	if spilled(res) {
		*p.spills++
	}
	return res, err
}

func cdcCrashAtEveryOperation(t *testing.T, budget ByteSize) {
	events := [][]cdcEvent{
		{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 60}, {id: "K2", city: "Leeds", name: "Alan", op: "U", at: 60}},
		{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 180}, {id: "K2", op: "D", at: 120}, {id: "K1", city: "Portland", name: "Ada", op: "U", at: 240}},
	}
	setup := func() (*faultstore.Store, *Env, *Table) {
		fs := faultstore.New(mem.New(mem.Config{}))
		p := newCDCPipeline(t, fs, false)
		p.env.MemoryBudget = budget
		if err := p.run(t, [][]cdcEvent{events[0]}); err != nil {
			t.Fatal(err)
		}
		putFile(t, p.landing, "events/late.csv", "customer_id,city,name,op,updated_at\n"+events[1][0].csv()+"\n"+events[1][1].csv()+"\n"+events[1][2].csv()+"\n")
		return fs, p.env, p.dim
	}
	p := newCDCPipeline(t, mem.New(mem.Config{}), false)
	spills := 0
	want := crashAtEveryOperation(t, stages{p.ingest, spillProbe{p.merge, &spills}}, setup, rowsOf(t, "customer_id", "city", "valid_from", "valid_to", "is_current"))
	if budget > 0 && spills == 0 {
		t.Fatalf("with a budget of %s, no merge worked over spill files", budget)
	}
	exp := []string{
		"K1|Portland|2026-01-14T04:00:00Z|9999-12-31T00:00:00Z|true",
		"K1|Seattle|2026-01-14T01:00:00Z|2026-01-14T04:00:00Z|false",
		"K2|Leeds|2026-01-14T01:00:00Z|2026-01-14T02:00:00Z|false",
	}
	if !slices.Equal(want, exp) {
		t.Fatalf("uninterrupted run:\n%s", diff(want, exp))
	}
}
