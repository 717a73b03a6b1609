package jobs

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// scd2Options is a set of scd2_merge options the change stream property runs with.
type scd2Options struct {
	name        string
	ignoreNulls bool
	openEnd     SCDTime
	firstFrom   SCDTime
	bothTracked bool // name and city tracked (else name is type 1)
	tombstone   bool // deletes: tombstone (else close)
}

var optionSets = []scd2Options{
	{name: "ignore_null_updates", ignoreNulls: true, bothTracked: true},
	{name: "ignore_null_updates+type1", ignoreNulls: true},
	{name: "open_end=null+first_valid_from", openEnd: SCDTime{Null: true}, firstFrom: SCDTime{Text: "1900-01-01"}},
	{name: "all+sentinel", ignoreNulls: true, openEnd: SCDTime{Text: "2999-12-31"}, firstFrom: SCDTime{Text: "2000-01-01 06:00:00"}, bothTracked: true},
	{name: "all+tombstone", ignoreNulls: true, openEnd: SCDTime{Null: true}, firstFrom: SCDTime{Text: "1900-01-01"}, bothTracked: true, tombstone: true},
}

// config is the stage's config: cdcPipeline's scd2_merge with the options.
func (o scd2Options) config() *SCD2Config {
	cfg := scd2Config()
	cfg.Source, cfg.Type1, cfg.DeleteWhen = "bronze.events", []string{"name"}, "op = 'D'"
	if o.bothTracked {
		cfg.Track, cfg.Type1 = []string{"name", "city"}, nil
	}
	if o.tombstone {
		cfg.Deletes = "tombstone"
	}
	cfg.IgnoreNullUpdates, cfg.OpenEnd, cfg.FirstValidFrom = o.ignoreNulls, o.openEnd, o.firstFrom
	return cfg
}

// spec is the reference's spec: the open end as the table shows it (NULL read as
// math.MaxInt64 by dimAsModel).
func (o scd2Options) spec(t *testing.T) scdSpec {
	spec := cdcSpec
	if o.bothTracked {
		spec.tracked, spec.type1 = []int{1, 2}, nil
	}
	if o.tombstone {
		spec.deletes = "tombstone"
	}
	if err := o.config().applyOptions(&spec); err != nil {
		t.Fatal(err)
	}
	if spec.endNull {
		spec.end = math.MaxInt64
	}
	return spec
}

func newOptionsPipeline(t *testing.T, warehouse objectstore.Store, o scd2Options) *cdcPipeline {
	p := newCDCModePipeline(t, warehouse, cdcSCD2)
	p.merge = NewSCD2Merge("merge", o.config())
	return p
}

// The change stream property with each option set, in memory and over a tiny budget:
// random event streams (upserts with NULLs, repeats, deletes, returns, duplicates) in
// random splits, orders and runs give exactly the reference fold of STAGES.md with the
// options (referenceFold): NULLs take the values of the version before them in sequence
// order, even for late events; current versions end at the declared open end (NULL,
// a sentinel); a key's first version starts at first_valid_from.
func TestSCD2OptionsAnyOrderAnySplit(t *testing.T) {
	for _, o := range optionSets {
		for _, budget := range []ByteSize{0, tinyBudget} {
			t.Run(o.name+"/budget="+budget.String(), func(t *testing.T) {
				t.Parallel()
				// Half a mode's streams each: a late event that only one option makes
				// different (a repeat before a first version at first_valid_from) took
				// more than the fifth it had.
				streams := max(2, cdcStreams/2)
				if budget > 0 {
					streams = max(1, cdcStreams/5)
				}
				spec := o.spec(t)
				for seed := range propertySeeds(streams) {
					rng := rand.New(rand.NewPCG(seed, 37))
					stream := randomCDCStream(rng)
					want, err := referenceFold(spec, cdcRefEvents(stream))
					if err != nil {
						t.Fatal(err)
					}
					want = withoutTombFlag(want)
					for d, runs := range cdcDeliveries(rng, stream) {
						p := newOptionsPipeline(t, mem.New(mem.Config{}), o)
						p.env.MemoryBudget = budget
						for i, r := range runs {
							if err := p.run(t, r); err != nil {
								t.Fatalf("seed %d delivery %d run %d: %v", seed, d, i, err)
							}
						}
						dimAsModel(t, p.env, p.dim).checkInvariants(t, spec)
						if got := withoutTombFlag(p.dimension(t)); got != want {
							t.Fatalf("seed %d delivery %d (%d runs): the table differs from the reference\nruns: %v\ngot:\n%s\nwant:\n%s", seed, d, len(runs), runs, got, want)
						}
					}
				}
			})
		}
	}
}

// at is the microseconds of minute m of the change stream tests.
func cdcAt(m int) int64 { return cdcBase.Add(time.Duration(m) * time.Minute).UnixMicro() }

// ignore_null_updates, the story: a partial row fills its NULLs from the version before
// it; a row whose only differences are NULLs makes no version; a late event changes
// the values that a later partial row's NULLs take.
func TestSCD2IgnoreNullUpdatesLateEvent(t *testing.T) {
	o := scd2Options{ignoreNulls: true, bothTracked: true}
	p := newOptionsPipeline(t, mem.New(mem.Config{}), o)
	for _, f := range [][]cdcEvent{
		{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 60}},
		{{id: "K1", city: "Portland", op: "U", at: 180}},              // name NULL: still Ada
		{{id: "K1", op: "U", at: 200}},                                // only NULLs: no version
		{{id: "K1", city: "Seattle", name: "Alan", op: "U", at: 120}}, // late: Portland's name becomes Alan
	} {
		if err := p.run(t, [][]cdcEvent{f}); err != nil {
			t.Fatal(err)
		}
	}
	want := strings.Join([]string{
		fmt.Sprintf("[K1 Ada Seattle] [%d,%d) current=false tomb=false", cdcAt(60), cdcAt(120)),
		fmt.Sprintf("[K1 Alan Portland] [%d,%d) current=true tomb=false", cdcAt(180), int64(SeqMax)),
		fmt.Sprintf("[K1 Alan Seattle] [%d,%d) current=false tomb=false", cdcAt(120), cdcAt(180)),
	}, "\n")
	if got := p.dimension(t); got != want {
		t.Fatalf("dimension:\n%s\nwant:\n%s", got, want)
	}
}

// first_valid_from, the story: a key's first version starts at the constant; a late
// event before the key's first event becomes the first version (from the constant)
// and the former first version starts at its own sequence; open_end: null leaves the
// current version's valid_to NULL.
func TestSCD2FirstValidFromLateEvent(t *testing.T) {
	o := scd2Options{openEnd: SCDTime{Null: true}, firstFrom: SCDTime{Text: "1900-01-01"}}
	p := newOptionsPipeline(t, mem.New(mem.Config{}), o)
	first := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	if err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 120}}}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("[K1 Ada Seattle] [%d,%d) current=true tomb=false", first, int64(math.MaxInt64))
	if got := p.dimension(t); got != want {
		t.Fatalf("after the first event:\n%s\nwant:\n%s", got, want)
	}
	if err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Leeds", name: "Ada", op: "U", at: 60}}}); err != nil {
		t.Fatal(err)
	}
	want = strings.Join([]string{
		fmt.Sprintf("[K1 Ada Leeds] [%d,%d) current=false tomb=false", first, cdcAt(120)),
		fmt.Sprintf("[K1 Ada Seattle] [%d,%d) current=true tomb=false", cdcAt(120), int64(math.MaxInt64)),
	}, "\n")
	if got := p.dimension(t); got != want {
		t.Fatalf("after the late event:\n%s\nwant:\n%s", got, want)
	}
	rows := tableRows(t, p.env, p.dim, "customer_id", "city", "valid_to", "is_current")
	if want := "K1|Seattle|NULL|true"; !strings.Contains(strings.Join(rows, "\n"), want) {
		t.Fatalf("rows %q: want the current version with valid_to NULL (%s)", rows, want)
	}
}

// first_valid_from, a late repeat: the key's first version starts at the constant, so
// the dimension no longer shows where its events start (here after a delete that came
// with them and changed nothing then). A late event with the first version's values,
// before that delete, is no repeat of it: the key's first version now runs from the
// constant to the delete, and the upsert after the delete starts a version of its own.
// (The dimension's scan took such an event for a repeat of the current version.)
func TestSCD2FirstValidFromLateRepeat(t *testing.T) {
	o := scd2Options{openEnd: SCDTime{Null: true}, firstFrom: SCDTime{Text: "1900-01-01"}}
	p := newOptionsPipeline(t, mem.New(mem.Config{}), o)
	first := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	if err := p.run(t, [][]cdcEvent{{{id: "K1", op: "D", at: 120}, {id: "K1", city: "Austin", name: "Ada", op: "U", at: 180}}}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("[K1 Ada Austin] [%d,%d) current=true tomb=false", first, int64(math.MaxInt64))
	if got := p.dimension(t); got != want {
		t.Fatalf("after the delete and the first upsert:\n%s\nwant:\n%s", got, want)
	}
	if err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Austin", name: "Ada", op: "U", at: 60}}}); err != nil {
		t.Fatal(err)
	}
	want = strings.Join([]string{
		fmt.Sprintf("[K1 Ada Austin] [%d,%d) current=false tomb=false", first, cdcAt(120)),
		fmt.Sprintf("[K1 Ada Austin] [%d,%d) current=true tomb=false", cdcAt(180), int64(math.MaxInt64)),
	}, "\n")
	if got := p.dimension(t); got != want {
		t.Fatalf("after the late repeat:\n%s\nwant:\n%s", got, want)
	}
	// A repeat after the key's events start is one: nothing changes.
	if err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Austin", name: "Ada", op: "U", at: 240}}}); err != nil {
		t.Fatal(err)
	}
	if got := p.dimension(t); got != want {
		t.Fatalf("after a repeat of the current version:\n%s\nwant:\n%s", got, want)
	}
}

// Bad option values and combinations are refused by the config's validation, naming
// the field.
func TestSCD2OptionsValidation(t *testing.T) {
	for _, c := range []struct {
		set   func(*SCD2Config)
		field string
		msg   string
	}{
		{func(c *SCD2Config) { c.OpenEnd = SCDTime{Text: "someday"} }, "open_end", `"someday" is no timestamp or date`},
		{func(c *SCD2Config) { c.FirstValidFrom = SCDTime{Text: "yesterday"} }, "first_valid_from", `"yesterday" is no timestamp or date`},
		{func(c *SCD2Config) { c.FirstValidFrom = SCDTime{Null: true} }, "first_valid_from", "expected sequence or a timestamp"},
		{func(c *SCD2Config) {
			c.FirstValidFrom, c.OpenEnd = SCDTime{Text: "2100-01-01"}, SCDTime{Text: "2099-12-31"}
		}, "first_valid_from", "is not before open_end 2099-12-31"},
		{func(c *SCD2Config) { c.SourceChanges, c.IgnoreNullUpdates = false, true }, "ignore_null_updates", "needs source_changes: true"},
		{func(c *SCD2Config) { c.SourceChanges, c.FirstValidFrom = false, SCDTime{Text: "1900-01-01"} }, "first_valid_from", "needs source_changes: true"},
	} {
		cfg := scd2Config()
		c.set(cfg)
		errs := cfg.Validate()
		found := false
		for _, e := range errs {
			found = found || e.Field == c.field && strings.Contains(e.Msg, c.msg)
		}
		if !found {
			t.Errorf("%s: errors %v; want one on %s saying %q", c.field, errs, c.field, c.msg)
		}
	}
	cfg := scd2Config()
	cfg.OpenEnd, cfg.FirstValidFrom, cfg.IgnoreNullUpdates = SCDTime{Null: true}, SCDTime{Text: FirstValidFromSequence}, true
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Errorf("valid options refused: %v", errs)
	}
}

// An event the declared bounds leave no room for is refused with a clear error, and
// nothing is written.
func TestSCD2OptionsRefuseEventsOutsideBounds(t *testing.T) {
	for _, o := range []scd2Options{
		{openEnd: SCDTime{Text: "2026-01-14 02:00:00"}},
		{firstFrom: SCDTime{Text: "2026-01-14 03:00:00"}},
	} {
		p := newOptionsPipeline(t, mem.New(mem.Config{}), o)
		err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 180}}})
		if err == nil || !strings.Contains(err.Error(), "sequence_by value 2026-01-14T03:00:00") {
			t.Fatalf("%+v: error %v; want a refusal naming the sequence", o, err)
		}
		if exists, err := delta.Exists(t.Context(), p.env.Warehouse, p.dim.Path); err != nil || exists {
			t.Fatalf("%+v: the dimension exists (%v) after the refusal", o, err)
		}
	}
}

// fact_load reads a dimension with declared options: a version whose valid_to is the
// open end (NULL, or a sentinel) is open; the unknown member row ends there too; a fact
// before a key's first event falls in its first version when first_valid_from is a
// constant; a late dimension event re-keys the facts it concerns.
func TestFactLoadWithSCD2Options(t *testing.T) {
	for name, open := range map[string]SCDTime{"null": {Null: true}, "sentinel": {Text: "2999-12-31"}} {
		t.Run("open_end="+name, func(t *testing.T) {
			staging, dim := customerTables(t)
			raw, facts := salesTables(t)
			clock := &testClock{t: d1}
			env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim, raw, facts)
			cfg := scd2Config()
			cfg.OpenEnd, cfg.FirstValidFrom = open, SCDTime{Text: "1900-01-01"}
			merge := NewSCD2Merge("customers", cfg)
			fc := factConfig(true, "")
			fc.Lookups[0].SetDimensionOpenEnd(open)
			load := NewFactLoad("sales", fc)
			city := func() map[string]string {
				sks := map[string]string{}
				for _, r := range tableRows(t, env, dim, "customer_sk", "customer_id", "city") {
					parts := strings.Split(r, "|")
					sks[parts[0]] = parts[2]
					if parts[1] == "NULL" {
						sks[parts[0]] = "unknown"
					}
				}
				out := map[string]string{}
				for _, r := range tableRows(t, env, facts, "sale_id", "customer_sk") {
					id, sk, _ := strings.Cut(r, "|")
					out[id] = sks[sk]
				}
				return out
			}
			appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", day(3)})
			runStage(t, merge, env)
			appendRows(t, env, staging, []any{"C1", "Ada", "Portland", day(10)})
			runStage(t, merge, env)
			appendRows(t, env, raw, []any{"S0", "C1", 5, day(1)}, []any{"S1", "C1", 10, day(5)}, []any{"S2", "C1", 20, day(12)},
				[]any{"S3", "C2", 30, day(6)}, []any{"S4", "C1", 40, day(8)})
			runStage(t, load, env)
			want := map[string]string{"S0": "Seattle", "S1": "Seattle", "S2": "Portland", "S3": "unknown", "S4": "Seattle"}
			if got := city(); !maps.Equal(got, want) {
				t.Fatalf("first load: got %v, want %v", got, want)
			}
			end := "NULL"
			if !open.Null {
				end = "2999-12-31T00:00:00Z"
			}
			rows := tableRows(t, env, dim, "customer_sk", "customer_id", "city", "valid_from", "valid_to", "is_current")
			for _, w := range []string{"-1|NULL|NULL|1900-01-01T00:00:00Z|" + end + "|true", "|C1|Seattle|1900-01-01T00:00:00Z|2026-01-10T12:00:00Z|false", "|C1|Portland|2026-01-10T12:00:00Z|" + end + "|true"} {
				if !slices.ContainsFunc(rows, func(r string) bool { return strings.HasSuffix(r, w) || r == w }) {
					t.Fatalf("dimension rows:\n%s\nwant a row ending %s", strings.Join(rows, "\n"), w)
				}
			}
			// Late events: C1 lived in Leeds from day 2, before its first event (day 3):
			// Leeds becomes the first version, from 1900, and Seattle starts at day 3, so
			// S0 (day 1) moves to Leeds; Tacoma from day 7 re-keys S4; C2 arrives.
			appendRows(t, env, staging, []any{"C1", "Ada", "Leeds", day(2)}, []any{"C1", "Ada", "Tacoma", day(7)}, []any{"C2", "Grace", "Boston", day(4)})
			runStage(t, merge, env)
			runStage(t, load, env)
			want = map[string]string{"S0": "Leeds", "S1": "Seattle", "S2": "Portland", "S3": "Boston", "S4": "Tacoma"}
			if got := city(); !maps.Equal(got, want) {
				t.Fatalf("after the late events: got %v, want %v\ndimension:\n%s", got, want,
					strings.Join(tableRows(t, env, dim, "customer_sk", "customer_id", "city", "valid_from", "valid_to", "is_current"), "\n"))
			}
			// The table check scd2_invariants reads the open end as open.
			_, snap := latest(t, env, dim)
			r := &ExpectationResult{}
			if err := checkSCD2(t.Context(), snap, cfg, r); err != nil || r.Failed != 0 {
				t.Errorf("scd2_invariants: %v, %d failed: %s", err, r.Failed, r.Detail)
			}
		})
	}
}

// The Spark plan of an scd2_merge with an option is refused (the loader refuses it
// first; this holds for any other caller of Plan).
func TestSCD2OptionsPlanRefused(t *testing.T) {
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1})
	for _, set := range []func(*SCD2Config){
		func(c *SCD2Config) { c.OpenEnd = SCDTime{Null: true} },
		func(c *SCD2Config) { c.OpenEnd = SCDTime{Text: "2999-12-31"} },
		func(c *SCD2Config) { c.FirstValidFrom = SCDTime{Text: "1900-01-01"} },
		func(c *SCD2Config) { c.IgnoreNullUpdates = true },
	} {
		cfg := scd2Config()
		set(cfg)
		_, err := NewSCD2Merge("customers", cfg).Plan(t.Context(), env)
		if err == nil || !strings.Contains(err.Error(), "run on the local engine only") {
			t.Errorf("%+v: Plan gave %v; want a refusal", cfg, err)
		}
	}
	if _, err := NewSCD2Merge("customers", scd2Config()).Plan(t.Context(), env); err != nil {
		t.Errorf("without options: %v", err)
	}
}

// A dimension written with one open end and merged with another sentinel is refused,
// naming the key and both ends, rather than taking its current rows for closed ones.
// (open_end: null reads a former 9999-12-31 as open too.)
func TestSCD2OpenEndChangedIsRefused(t *testing.T) {
	p := newOptionsPipeline(t, mem.New(mem.Config{}), scd2Options{})
	if err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Seattle", name: "Ada", op: "U", at: 60}}}); err != nil {
		t.Fatal(err)
	}
	p.merge = NewSCD2Merge("merge", scd2Options{openEnd: SCDTime{Text: "2999-12-31"}}.config())
	err := p.run(t, [][]cdcEvent{{{id: "K1", city: "Portland", name: "Ada", op: "U", at: 120}}})
	if err == nil || !strings.Contains(err.Error(), "the current version of key K1 ends at 9999-12-31T00:00:00Z, not at the open end 2999-12-31T00:00:00Z") {
		t.Fatalf("error %v; want a refusal naming the key and both ends", err)
	}
}
