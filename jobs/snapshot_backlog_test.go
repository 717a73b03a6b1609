package jobs

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A backlog of dated full extracts (snapshot_date), through the pipeline: several days'
// extracts wait at once, an ingest with mode: snapshot loads them in date order in one
// run (dated by a pattern on their names, or by their as_of column), and a merge of the
// staging table's change feed (scd2_merge with deletes: close or tombstone, scd1_merge)
// takes them. However the days are grouped into ingest runs and merge runs, in memory or
// over a tiny budget, the table equals the reference fold of the events the extracts
// mean: per day, an upsert at the day of every key present, a delete at the day of
// every key absent.

// backlogPattern dates the extracts by name; a re-delivery (customers_2026-02-02_fix.csv)
// matches it too.
const backlogPattern = `customers_(\d{4}-\d{2}-\d{2})[^/]*\.csv`

type backlogPipeline struct {
	*snapPipeline
	byColumn bool
	batch    int // files delivered (names of column-dated extracts)
}

// newBacklogPipeline makes the pipeline on warehouse: byColumn dates the extracts by
// their as_of column (and the merge orders by it), else by their names.
func newBacklogPipeline(t *testing.T, warehouse objectstore.Store, mode cdcMode, byColumn bool) *backlogPipeline {
	p := newSnapshotPipeline(t, mode, !byColumn)
	// (newSnapshotPipeline's store replaced: the tables and landing on warehouse)
	env, landing := ingestEnv(t, warehouse, p.env.Tables["staging.customers"], p.dim)
	env.Delta.Now = p.clock.Now
	p.env, p.landing = env, landing
	cfg := p.ingest.cfg
	cfg.SnapshotTime = ""
	if byColumn {
		cfg.SnapshotDate = &SnapshotDate{From: SnapshotDateFromColumn, Column: "as_of"}
	} else {
		cfg.SnapshotDate = &SnapshotDate{From: SnapshotDateFromFileName, Pattern: backlogPattern}
	}
	return &backlogPipeline{snapPipeline: p, byColumn: byColumn}
}

// extract is the CSV of day d's extract (rows in a random order).
func extract(rng *rand.Rand, d int, day snapDay) string {
	lines := []string{}
	for k, city := range day {
		lines = append(lines, fmt.Sprintf("%s,n,%s,%s\n", k, city, snapDate(d).Format(time.DateOnly)))
	}
	rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	return "customer_id,name,city,as_of\n" + strings.Join(lines, "")
}

// deliver puts the extracts of days (numbered from first) in the landing directory, in a
// random order of puts: by name customers_<date>.csv, or by column batch_<n>.csv with
// names whose order is not the days' order. Now and then a day comes in two parts (two
// files of one date: one snapshot).
func (p *backlogPipeline) deliver(t *testing.T, rng *rand.Rand, first int, days []snapDay) {
	t.Helper()
	order := rng.Perm(len(days))
	for _, i := range order {
		parts := []snapDay{days[i]}
		if len(days[i]) >= 2 && rng.IntN(3) == 0 {
			parts = []snapDay{{}, {}}
			for k, city := range days[i] {
				parts[len(parts[0])%2][k] = city // (at least one key in each)
			}
		}
		for j, part := range parts {
			name := fmt.Sprintf("extracts/customers_%s_part%d.csv", snapDate(first+i).Format(time.DateOnly), j)
			if j == 0 {
				name = fmt.Sprintf("extracts/customers_%s.csv", snapDate(first+i).Format(time.DateOnly))
			}
			if p.byColumn {
				p.batch++
				name = fmt.Sprintf("extracts/batch_%03d_%d.csv", 999-p.batch, rng.IntN(1000))
			}
			putFile(t, p.landing, name, extract(rng, first+i, part))
		}
	}
}

func TestSnapshotBacklogAnyRunsAnyBudget(t *testing.T) {
	for _, c := range []struct {
		mode     cdcMode
		byColumn bool
	}{{cdcSCD2, false}, {cdcSCD2, true}, {cdcTombstone, false}, {cdcSCD1, true}} {
		for _, budget := range []ByteSize{0, tinyBudget} {
			name := fmt.Sprintf("%s/by_column=%v/budget=%s", c.mode, c.byColumn, budget)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				streams := cdcStreams / 2
				if budget > 0 {
					streams = max(1, cdcStreams/6)
				}
				spills := 0
				for seed := range propertySeeds(streams) {
					rng := rand.New(rand.NewPCG(seed, 37))
					days := randomSnapshotDays(rng)
					if c.byColumn {
						for _, day := range days {
							if len(day) == 0 { // (a header-only extract has no date in its rows)
								day["A"] = "Oslo"
							}
						}
					}
					want := c.mode.reference(t, snapshotEvents(days))
					for split := range 3 {
						p := newBacklogPipeline(t, mem.New(mem.Config{}), c.mode, c.byColumn)
						p.env.MemoryBudget = budget
						var runs []int
						for d := 0; d < len(days); {
							n := 1 + rng.IntN(len(days)-d)
							if split == 0 {
								n = len(days) - d // the whole backlog in one run
							}
							runs = append(runs, n)
							p.deliver(t, rng, d, days[d:d+n])
							p.clock.Advance(time.Minute)
							runStage(t, p.ingest, p.env)
							d += n
							if d == len(days) || rng.IntN(2) == 0 {
								p.clock.Advance(time.Minute)
								if spilled(runStage(t, p.merge, p.env)) {
									spills++
								}
							}
						}
						if got := c.mode.table(t, p.cdcPipeline); got != want {
							t.Fatalf("seed %d split %d (runs of %v days): the table differs from the reference\ndays: %v\ngot:\n%s\nwant:\n%s", seed, split, runs, days, got, want)
						}
						// The staging table holds the newest extract.
						if got, want := len(tableRows(t, p.env, p.env.Tables["staging.customers"])), len(days[len(days)-1]); got != want {
							t.Fatalf("seed %d split %d: staging holds %d rows, want the last extract's %d", seed, split, got, want)
						}
					}
				}
				if budget > 0 && spills == 0 {
					t.Fatalf("with a budget of %s, no merge worked over spill files", budget)
				}
			})
		}
	}
}

// A crash at any store operation of a run that loads a backlog of three extracts and
// merges it, then reruns: the dimension is exactly that of an uninterrupted run, and
// that is the replay of the four days in date order.
func TestSnapshotBacklogCrashAtEveryOperation(t *testing.T) {
	budgets := []ByteSize{0, tinyBudget}
	if raceEnabled {
		budgets = budgets[1:] // (the passes over spill files; both without -race)
	}
	for _, budget := range budgets {
		t.Run("budget="+budget.String(), func(t *testing.T) {
			t.Parallel()
			days := []snapDay{
				{"A": "Oslo", "B": "Rome", "C": "Lima"},
				{"A": "Oslo", "B": "Pisa"},              // B moves, C is gone
				{"A": "Bern", "B": "Pisa", "C": "Lima"}, // A moves, C returns
				{"B": "Pisa", "C": "Kiev"},              // A is gone, C moves
			}
			var p *backlogPipeline
			setup := func() (*faultstore.Store, *Env, *Table) {
				fs := faultstore.New(mem.New(mem.Config{}))
				p = newBacklogPipeline(t, fs, cdcSCD2, false)
				p.env.MemoryBudget = budget
				rng := rand.New(rand.NewPCG(1, 2))
				p.deliver(t, rng, 0, days[:1])
				runStage(t, p.ingest, p.env)
				runStage(t, p.merge, p.env)
				p.deliver(t, rng, 1, days[1:])
				p.clock.Advance(time.Minute)
				return fs, p.env, p.dim
			}
			_, _, _ = setup()
			got := crashAtEveryOperation(t, stages{p.ingest, p.merge}, setup, rowsOf(t, "customer_id", "city", "valid_from", "valid_to", "is_current"))
			want := []string{
				"A|Bern|2026-02-03T00:00:00Z|2026-02-04T00:00:00Z|false",
				"A|Oslo|2026-02-01T00:00:00Z|2026-02-03T00:00:00Z|false",
				"B|Pisa|2026-02-02T00:00:00Z|9999-12-31T00:00:00Z|true",
				"B|Rome|2026-02-01T00:00:00Z|2026-02-02T00:00:00Z|false",
				"C|Kiev|2026-02-04T00:00:00Z|9999-12-31T00:00:00Z|true",
				"C|Lima|2026-02-01T00:00:00Z|2026-02-02T00:00:00Z|false",
				"C|Lima|2026-02-03T00:00:00Z|2026-02-04T00:00:00Z|false",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("uninterrupted run:\n%s", diff(got, want))
			}
		})
	}
}

// stagingVersion is the staging table's version.
func (p *backlogPipeline) stagingVersion(t *testing.T) int64 {
	t.Helper()
	tbl, err := p.env.openTable(t.Context(), p.env.Tables["staging.customers"])
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version()
}

// An extract older than (or as of) the last snapshot loaded is refused with its name and
// both dates, before anything is written, even beside newer ones.
func TestSnapshotBacklogOutOfOrderRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := newBacklogPipeline(t, mem.New(mem.Config{}), cdcSCD2, false)
	p.deliver(t, rng, 0, []snapDay{{"A": "Oslo"}, {"A": "Rome"}, {"A": "Lima"}})
	runStage(t, p.ingest, p.env)
	before := p.stagingVersion(t)
	for _, c := range []struct{ file, date, why string }{
		{"customers_2026-02-02_fix.csv", "2026-02-02", "older than"},
		{"customers_2026-02-03_fix.csv", "2026-02-03", "as of the same time as"},
	} {
		putFile(t, p.landing, "extracts/"+c.file, "customer_id,name,city,as_of\nA,n,Pisa,2026-02-02\n")
		putFile(t, p.landing, "extracts/customers_2026-02-09.csv", "customer_id,name,city,as_of\nA,n,Bern,2026-02-09\n")
		_, err := p.ingest.Run(t.Context(), p.env)
		want := fmt.Sprintf("/landing/extracts/%s: this snapshot is as of %s, %s the last snapshot staging.customers holds (as of 2026-02-03); nothing was loaded", c.file, c.date, c.why)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s waiting: %v\nwant: %s", c.file, err, want)
		}
		if v := p.stagingVersion(t); v != before {
			t.Fatalf("%s refused, yet staging moved from version %d to %d", c.file, before, v)
		}
		if err := p.landing.Delete(t.Context(), "extracts/"+c.file); err != nil {
			t.Fatal(err)
		}
	}
	// Without the stray file the newer one loads.
	runStage(t, p.ingest, p.env)
	if v := p.stagingVersion(t); v != before+1 {
		t.Fatalf("staging at version %d after the newer extract, want %d", v, before+1)
	}
}

// Every extract of a backlog is checked on its own, naming it: a header-only one that
// would delete the whole table stops the run there (the days before it loaded, once), a
// 0-byte one stops it before anything is read; so do an extract dated twice by its
// rows, a NULL date, and a name the pattern does not date.
func TestSnapshotBacklogBadExtractsNamed(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	p := newBacklogPipeline(t, mem.New(mem.Config{}), cdcSCD2, false)
	p.ingest.cfg.MaxDeleteFraction = nil
	p.deliver(t, rng, 0, []snapDay{{"A": "Oslo", "B": "Rome"}, {"A": "Oslo", "B": "Pisa"}})
	putFile(t, p.landing, "extracts/customers_2026-02-03.csv", "customer_id,name,city,as_of\n")
	putFile(t, p.landing, "extracts/customers_2026-02-04.csv", "customer_id,name,city,as_of\nA,n,Lima,2026-02-04\n")
	_, err := p.ingest.Run(ctx, p.env)
	if err == nil || !strings.Contains(err.Error(), "/landing/extracts/customers_2026-02-03.csv: this snapshot lacks 2 of the 2 rows of staging.customers") ||
		!strings.Contains(err.Error(), "snapshots before it are loaded: 2026-02-01, 2026-02-02") {
		t.Fatalf("a header-only extract in the backlog: %v", err)
	}
	if got := strings.Join(tableRows(t, p.env, p.env.Tables["staging.customers"], "customer_id", "city"), " "); got != "A|Oslo B|Pisa" {
		t.Fatalf("staging after the refusal: %s, want the second day's extract", got)
	}
	// A rerun does not load the first two days again, and stops at the same extract.
	runs := p.stagingVersion(t)
	if _, err = p.ingest.Run(ctx, p.env); err == nil || !strings.Contains(err.Error(), "customers_2026-02-03.csv: this snapshot lacks") {
		t.Fatalf("rerun: %v", err)
	}
	if v := p.stagingVersion(t); v != runs {
		t.Fatalf("the rerun moved staging from %d to %d", runs, v)
	}

	putFile(t, p.landing, "extracts/customers_2026-02-03.csv", "")
	if _, err = p.ingest.Run(ctx, p.env); err == nil || !strings.Contains(err.Error(), "source file /landing/extracts/customers_2026-02-03.csv is empty (0 bytes)") {
		t.Fatalf("a 0-byte extract: %v", err)
	}
	if err := p.landing.Delete(ctx, "extracts/customers_2026-02-03.csv"); err != nil {
		t.Fatal(err)
	}
	putFile(t, p.landing, "extracts/customers-latest.csv", "customer_id,name,city,as_of\nA,n,Lima,2026-02-04\n")
	if _, err = p.ingest.Run(ctx, p.env); err == nil || !strings.Contains(err.Error(), "/landing/extracts/customers-latest.csv: its name does not match snapshot_date.pattern") {
		t.Fatalf("an undated name: %v", err)
	}

	q := newBacklogPipeline(t, mem.New(mem.Config{}), cdcSCD2, true)
	for _, c := range []struct{ body, want string }{
		{"customer_id,name,city,as_of\nA,n,Oslo,2026-02-01\nB,n,Rome,2026-02-02\n",
			"/landing/extracts/mixed.csv: line 2 is as of 2026-02-01, line 3 as of 2026-02-02 (column as_of); a file is one snapshot"},
		{"customer_id,name,city,as_of\nA,n,Oslo,2026-02-01\nB,n,Rome,\n", "/landing/extracts/mixed.csv line 3: column as_of is NULL"},
		{"customer_id,name,city,as_of\n", "/landing/extracts/mixed.csv: no rows, so no snapshot date in column as_of"},
	} {
		putFile(t, q.landing, "extracts/mixed.csv", c.body)
		if _, err := q.ingest.Run(ctx, q.env); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%q: %v\nwant: %s", c.body, err, c.want)
		}
	}
}

func TestSnapshotDateValidation(t *testing.T) {
	for _, c := range []struct {
		cfg  IngestConfig
		want string
	}{
		{IngestConfig{Mode: "append", SnapshotDate: &SnapshotDate{From: "file_name"}}, "snapshot_date: only used with mode: snapshot"},
		{IngestConfig{Mode: "snapshot", SnapshotTime: "file_name", SnapshotDate: &SnapshotDate{From: "file_name"}}, "snapshot_date: use either snapshot_time"},
		{IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{}}, "snapshot_date.from: required"},
		{IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{From: "name"}}, `snapshot_date.from: unknown value "name"`},
		{IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{From: "file_name", Pattern: "a(b"}}, "snapshot_date.pattern: bad regular expression"},
		{IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{From: "file_name", Pattern: `\d{8}`}}, "snapshot_date.pattern: \"\\\\d{8}\" has no group"},
		{IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{From: "file_name", Column: "as_of"}}, "snapshot_date.column: only used with from: column"},
		{IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{From: "column"}}, "snapshot_date.column: required with from: column"},
		{IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{From: "column", Column: "d", Pattern: "(x)"}}, "snapshot_date.pattern: only used with from: file_name"},
	} {
		c.cfg.Source, c.cfg.Target, c.cfg.Format = "landing/*.csv", "t", "csv"
		if c.cfg.Mode == "snapshot" {
			c.cfg.Keys = []string{"id"}
		}
		var got []string
		for _, e := range c.cfg.Validate() {
			got = append(got, e.Error())
		}
		if !strings.Contains(strings.Join(got, "\n"), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.SnapshotDate, got, c.want)
		}
	}
	ok := IngestConfig{Source: "landing/*.csv", Target: "t", Mode: "snapshot", Keys: []string{"id"}, SnapshotDate: &SnapshotDate{From: "file_name", Pattern: backlogPattern}}
	if errs := ok.Validate(); len(errs) > 0 {
		t.Fatalf("a valid snapshot_date: %v", errs)
	}
}

// How a file is dated by its name: the default finds the last date in its path (a
// directory per day too), a pattern's first group may be a compact date or a timestamp;
// a group that is no date, or a name without one, fails naming the file.
func TestSnapshotDateFromFileName(t *testing.T) {
	for _, c := range []struct {
		pattern, name, want, err string
	}{
		{"", "/landing/extracts/2026-01-15/accounts.csv", "2026-01-15", ""},
		{"", "/landing/2025-12-31/accounts_20260115.csv", "2026-01-15", ""},
		{"", "/landing/accounts.csv", "", "/landing/accounts.csv: no date (YYYY-MM-DD or YYYYMMDD) in its name"},
		{`accounts_(\d{8})\.csv`, "/landing/accounts_20261101.csv", "2026-11-01", ""},
		{`accounts_(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)\.csv`, "/l/accounts_2026-11-01T06:00:00Z.csv", "2026-11-01T06:00:00Z", ""},
		{`accounts_(\d{4}-\d{2}-\d{2})\.csv`, "/landing/accounts_2026-13-45.csv", "", `/landing/accounts_2026-13-45.csv: "2026-13-45", the first group of snapshot_date.pattern`},
	} {
		s := NewIngest("load", &IngestConfig{Mode: "snapshot", SnapshotDate: &SnapshotDate{From: SnapshotDateFromFileName, Pattern: c.pattern}})
		d, err := s.fileDate(t.Context(), nil, &sourceFile{Name: c.name})
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s with pattern %q: %v, want %q", c.name, c.pattern, err, c.err)
			}
		case err != nil:
			t.Errorf("%s with pattern %q: %v", c.name, c.pattern, err)
		case snapshotDateText(d.at) != c.want:
			t.Errorf("%s with pattern %q: dated %s, want %s", c.name, c.pattern, snapshotDateText(d.at), c.want)
		}
	}
}

// With snapshot_time: file_name, extracts of two dates waiting at once are refused, and
// the error points to snapshot_date.
func TestSnapshotTimeFromNamePointsToBacklog(t *testing.T) {
	p := newSnapshotPipeline(t, cdcSCD2, true)
	putFile(t, p.landing, "extracts/2026-02-01.csv", "customer_id,name,city,as_of\nA,n,Oslo,2026-02-01\n")
	putFile(t, p.landing, "extracts/2026-02-02.csv", "customer_id,name,city,as_of\nB,n,Rome,2026-02-02\n")
	_, err := p.ingest.Run(t.Context(), p.env)
	if err == nil || !strings.Contains(err.Error(), "name different dates") || !strings.Contains(err.Error(), "declare snapshot_date: {from: file_name} instead of snapshot_time") {
		t.Fatalf("two dates with snapshot_time: file_name: %v", err)
	}
}
