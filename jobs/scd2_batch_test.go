package jobs

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// The stage (columnar batch, dimension scan that settles repeats, MERGE) must give
// exactly the dimension the fold model gives for the same batches: random snapshot
// batches with repeats of current rows (settled without the fold), late events,
// several events per key, duplicates, NULL transitions, type 1 changes and, with
// deletes: close, keys missing from a snapshot closed and returning later.
func TestSCD2StageMatchesFoldModel(t *testing.T) {
	for _, deletes := range []string{"ignore", "close"} {
		for seed := range propertySeeds(10) {
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
	model.snapshot = true
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
			// The model deletes the current keys the snapshot lacks as of the snapshot's
			// time: its newest sequence_by value, as its versions start at theirs; a key
			// whose current version is newer than that at the snapshot's commit time.
			inBatch := map[any]bool{}
			var asOf int64
			for _, e := range events {
				inBatch[e.row[0]] = true
				asOf = max(asOf, e.seq)
			}
			for _, v := range model.rows {
				if v.Current && !inBatch[v.Row[0]] {
					at := asOf
					if at <= v.From {
						at = clock.t.UnixMicro()
					}
					events = append(events, scdEvent{seq: at, delete: true, row: []any{v.Row[0], nil, nil}})
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

// The SCD2 property test at the stage: a random event stream over a change feed
// source (events in random order, so many arrive late; duplicates, NULL transitions,
// deletes, returning keys), merged after random runs of source commits, gives the
// dimension one big batch gives, and rule 7 holds after every merge.
func TestSCD2ChangeFeedSplitsMatchOneBatch(t *testing.T) {
	for _, deletes := range []string{"ignore", "close", "tombstone"} {
		for seed := range propertySeeds(8) {
			t.Run(fmt.Sprintf("%s/seed%d", deletes, seed), func(t *testing.T) {
				changeFeedMatchesOneBatch(t, deletes, seed)
			})
		}
	}
}

func changeFeedMatchesOneBatch(t *testing.T, deletes string, seed uint64) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 11))
	staging, dim := customerTables(t)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := &testClock{t: base}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
	cfg := scd2Config()
	cfg.Deletes, cfg.Type1 = deletes, []string{"name"}
	stage := NewSCD2Merge("merge", cfg)
	// Deletes of staging rows are placed by commit order (sequence_by is set).
	spec := scdSpec{keys: []int{0}, tracked: []int{2}, type1: []int{1}, deletes: deletes, end: SeqMax, physByCommit: true}
	cities := []any{nil, "Seattle", "Portland"}
	names := []any{"Ada", "Ada L."}

	var all []scdEvent              // every event, for the one big batch
	present := map[string][]int64{} // staging rows per key: their updated_at
	used := map[string]bool{}       // key@seq of upserts, kept unique
	for commit := range 24 {
		// Each commit is half an hour after a whole hour; upserts are on whole hours
		// anywhere up to now, so most commits carry late events.
		clock.t = base.Add(time.Duration(commit+1)*4*time.Hour + 30*time.Minute)
		key := fmt.Sprintf("C%d", rng.IntN(4))
		if rng.IntN(5) == 0 && len(present[key]) > 0 {
			tbl, err := env.openTable(ctx, staging)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("customer_id", key)}); err != nil {
				t.Fatal(err)
			}
			for _, at := range present[key] {
				all = append(all, scdEvent{seq: max(at, clock.t.UnixMicro()), delete: true, phys: true, rowSeq: at, commit: int64(commit + 1), row: []any{key, nil, nil}})
			}
			delete(present, key)
		} else {
			var rows [][]any
			for range 1 + rng.IntN(4) {
				k := fmt.Sprintf("C%d", rng.IntN(4))
				at := base.Add(time.Duration(rng.IntN((commit+1)*4)) * time.Hour)
				if used[fmt.Sprint(k, at)] {
					continue
				}
				used[fmt.Sprint(k, at)] = true
				row := []any{k, names[rng.IntN(len(names))], cities[rng.IntN(len(cities))]}
				rows = append(rows, append(slices.Clone(row), at))
				all = append(all, scdEvent{seq: at.UnixMicro(), row: row, commit: int64(commit + 1)})
				present[k] = append(present[k], at.UnixMicro())
				if rng.IntN(4) == 0 {
					rows = append(rows, append(slices.Clone(row), at)) // an exact duplicate
					all = append(all, scdEvent{seq: at.UnixMicro(), row: row, commit: int64(commit + 1)})
				}
			}
			if len(rows) == 0 {
				continue
			}
			appendRows(t, env, staging, rows...)
		}
		if rng.IntN(3) == 0 || commit == 23 {
			clock.Advance(time.Minute)
			runStage(t, stage, env)
			dimAsModel(t, env, dim).checkInvariants(t, spec)
		}
	}
	whole := newMemDim()
	if err := whole.merge(t, spec, all); err != nil {
		t.Fatal(err)
	}
	got := dimAsModel(t, env, dim).canonical()
	if want := whole.canonical(); got != want {
		t.Fatalf("merged in batches, the dimension differs from one big batch\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// dimAsModel reads the customer dimension into a memDim (data columns customer_id,
// name, city), to check invariants and compare with the model.
func dimAsModel(t *testing.T, env *Env, dim *Table) *memDim {
	t.Helper()
	ctx := t.Context()
	_, snap := latest(t, env, dim)
	sc, err := snap.Scan(ctx, delta.ScanOptions{Columns: []string{"customer_sk", "customer_id", "name", "city", "valid_from", "valid_to", "is_current"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	d := newMemDim()
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := range int(rec.NumRows()) {
			vals := make([]any, rec.NumCols())
			for c := range vals {
				if vals[c], err = keyed.Value(rec.Column(c), i); err != nil {
					t.Fatal(err)
				}
			}
			to, ok := vals[5].(int64)
			if !ok {
				to = math.MaxInt64 // NULL (open_end: null)
			}
			v := scdVersion{SK: vals[0].(int64), Row: vals[1:4], From: vals[4].(int64), To: to, Current: vals[6].(bool)}
			v.Tombstone = vals[2] == nil && vals[3] == nil // the tests' names are never null
			if _, dup := d.rows[v.SK]; dup {
				t.Fatalf("surrogate key %d appears twice", v.SK)
			}
			d.rows[v.SK] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// A late event is folded with its key's logged events, and stays exact when the
// source's change feed has been vacuumed: the event log keeps what the dimension does
// not (here a confirmation of Seattle).
func TestSCD2LateEventsAfterVacuum(t *testing.T) {
	ctx := t.Context()
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
	stage := NewSCD2Merge("merge", scd2Config())
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d1}, []any{"C2", "Alan", "London", d1})
	runStage(t, stage, env)
	// Seattle again at d2 changes nothing, so the dimension does not keep it; a late
	// Tacoma between d1 and d2 must end at d2, where Seattle was confirmed.
	clock.Advance(time.Hour)
	appendRows(t, env, staging, []any{"C1", "Ada", "Seattle", d2})
	runStage(t, stage, env)
	clock.Advance(time.Hour)
	appendRows(t, env, staging, []any{"C1", "Ada", "Tacoma", d1.Add(time.Hour)})
	res := runStage(t, stage, env)
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "1 keys had late events: folded with their 2 logged events")
	}) {
		t.Errorf("notes %q do not report the late key", res.Notes)
	}
	got := tableRows(t, env, dim, "customer_id", "city", "valid_from", "valid_to", "is_current")
	want := []string{
		"C1|Seattle|2026-01-14T08:00:00Z|2026-01-14T09:00:00Z|false",
		"C1|Seattle|2026-01-15T09:30:00Z|9999-12-31T00:00:00Z|true",
		"C1|Tacoma|2026-01-14T09:00:00Z|2026-01-15T09:30:00Z|false",
		"C2|London|2026-01-14T08:00:00Z|9999-12-31T00:00:00Z|true",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dimension:\n%s", diff(got, want))
	}

	// The source drops C2 and its old files are vacuumed: C2's history is gone from the
	// source. A late event for C2 is still placed exactly, from the event log.
	tbl, err := env.openTable(ctx, staging)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("customer_id", "C2")}); err != nil {
		t.Fatal(err)
	}
	runStage(t, stage, env)
	clock.Advance(8 * 24 * time.Hour)
	if _, err := tbl.Vacuum(ctx, delta.VacuumOptions{}); err != nil {
		t.Fatal(err)
	}
	appendRows(t, env, staging, []any{"C2", "Alan", "Leeds", d1.Add(-time.Hour)})
	res = runStage(t, stage, env)
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "1 keys had late events") }) {
		t.Errorf("notes %q do not report the late key", res.Notes)
	}
	dimAsModel(t, env, dim).checkInvariants(t, scdSpec{keys: []int{0}, tracked: []int{2}, end: SeqMax})
	got = tableRows(t, env, dim, "customer_id", "city", "valid_from", "valid_to", "is_current")
	if !slices.Contains(got, "C2|Leeds|2026-01-14T07:00:00Z|2026-01-14T08:00:00Z|false") || !slices.Contains(got, "C2|London|2026-01-14T08:00:00Z|2026-01-14T11:00:00Z|false") {
		t.Fatalf("the late C2 event is missing:\n%s", strings.Join(got, "\n"))
	}
}

// A batch large enough to be folded on several cores gives exactly the dimension
// (surrogate keys included) that one core gives.
func TestSCD2FoldIndependentOfCores(t *testing.T) {
	run := func(procs int) []string {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		staging, dim := customerTables(t)
		clock := &testClock{t: d1}
		env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
		cfg := scd2Config()
		cfg.SourceChanges = false
		stage := NewSCD2Merge("merge", cfg)
		const n = 20_000
		var rows [][]any
		for i := range n {
			rows = append(rows, []any{fmt.Sprintf("C%05d", i), "name", "Seattle", d1})
		}
		writeRows(t, env, staging, true, rows...)
		runStage(t, stage, env)
		clock.t = d2
		rows = rows[:0]
		for i := range n + n/10 {
			city := "Seattle"
			if i%3 == 0 {
				city = "Portland"
			}
			if i%7 != 0 { // every 7th key is missing: closed
				rows = append(rows, []any{fmt.Sprintf("C%05d", i), "name", city, d2})
			}
		}
		writeRows(t, env, staging, true, rows...)
		if res := runStage(t, stage, env); len(res.VersionsWritten) != 1 {
			t.Fatalf("second merge wrote %v", res.VersionsWritten)
		}
		return tableRows(t, env, dim, "customer_sk", "customer_id", "city", "valid_from", "valid_to", "is_current")
	}
	one, many := run(1), run(4)
	if len(one) < 25_000 {
		t.Fatalf("%d dimension rows, want more than 25,000", len(one))
	}
	if !slices.Equal(one, many) {
		t.Fatalf("4 cores and 1 core give different dimensions: %d vs %d rows", len(many), len(one))
	}
}

// The quick path (a new key, or a tracked change of a key's only version) gives exactly
// what the fold gives: dimension rows with their surrogate keys, and change feed; and a
// dimension partitioned by the tracked column (many files, rows matched by position in
// each) ends up with the same rows.
func TestSCD2QuickPathMatchesFold(t *testing.T) {
	defer func(was int) { splitSortAt = was }(splitSortAt)
	splitSortAt = 16 // the dimension records are small: sort them in halves too
	run := func(quick, dv bool, partitionBy ...string) (dim []string, feed []string) {
		defer func(was bool) { quickPath = was }(quickPath)
		quickPath = quick
		staging, dimTbl := customerTables(t)
		dimTbl.PartitionBy = partitionBy
		if dv {
			dimTbl.Properties = maps.Clone(dimTbl.Properties)
			dimTbl.Properties[delta.PropEnableDeletionVectors] = "true"
		}
		clock := &testClock{t: d1}
		env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dimTbl)
		cfg := scd2Config()
		cfg.SourceChanges, cfg.Deletes, cfg.Type1 = false, "close", []string{"name"}
		stage := NewSCD2Merge("merge", cfg)
		cities := []any{"Seattle", "Portland", nil}
		for batch := range 4 {
			clock.t = d1.Add(time.Duration(batch) * 24 * time.Hour)
			var rows [][]any
			for i := range 300 + 50*batch {
				if (i+batch)%11 == 0 {
					continue // missing from the snapshot: closed
				}
				name := "name"
				if batch == 3 && i%5 == 0 {
					name = "renamed" // a type 1 change: folded
				}
				at := clock.t
				if batch == 2 && i%13 == 0 {
					at = at.Add(-36 * time.Hour) // before the current version: folded
				}
				rows = append(rows, []any{fmt.Sprintf("C%04d", i), name, cities[(i*(batch+1))%len(cities)], at})
			}
			writeRows(t, env, staging, true, rows...)
			runStage(t, stage, env)
		}
		tbl, err := env.openTable(t.Context(), dimTbl)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := tbl.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(partitionBy) > 0 && len(snap.Files()) < 3 {
			t.Fatalf("the partitioned dimension has %d files", len(snap.Files()))
		}
		withDV := 0
		for _, f := range snap.Files() {
			if f.DeletionVector != nil {
				withDV++
			}
		}
		if dv != (withDV > 0) {
			t.Fatalf("deletion vectors on: %v, but %d of %d files have one", dv, withDV, len(snap.Files()))
		}
		for v := int64(1); v <= snap.Version(); v++ {
			feed = append(feed, changeRows(t, tbl, v)...)
		}
		return tableRows(t, env, dimTbl, "customer_sk", "customer_id", "name", "city", "valid_from", "valid_to", "is_current"), feed
	}
	dimQuick, feedQuick := run(true, false)
	dimFold, feedFold := run(false, false)
	dimParts, _ := run(true, false, "city")
	// With deletion vectors the MERGE takes the rows the scan kept and marks them.
	dimDV, feedDV := run(true, true)
	dimDVFold, feedDVFold := run(false, true)
	dimDVParts, _ := run(true, true, "city")
	if len(dimQuick) < 1000 || len(feedQuick) < 1000 {
		t.Fatalf("only %d dimension rows and %d change rows", len(dimQuick), len(feedQuick))
	}
	for _, c := range []struct {
		what   string
		got, w []string
	}{{"fold: dimension", dimFold, dimQuick}, {"fold: change feed", feedFold, feedQuick}, {"partitioned: dimension", dimParts, dimQuick},
		{"deletion vectors: dimension", dimDV, dimQuick}, {"deletion vectors: change feed", feedDV, feedQuick},
		{"deletion vectors, fold: dimension", dimDVFold, dimQuick}, {"deletion vectors, fold: change feed", feedDVFold, feedQuick},
		{"deletion vectors, partitioned: dimension", dimDVParts, dimQuick}} {
		if i := firstDifference(c.got, c.w); i >= 0 {
			t.Errorf("%s has %d rows, the quick path unpartitioned %d; first difference at row %d:\n  %s\n  %s",
				c.what, len(c.got), len(c.w), i, at(c.got, i), at(c.w, i))
		}
	}
}

// firstDifference is the first index where a and b differ, or -1.
func firstDifference(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if at(a, i) != at(b, i) {
			return i
		}
	}
	return -1
}

func at(rows []string, i int) string {
	if i < len(rows) {
		return rows[i]
	}
	return "(none)"
}

// changeRows renders the change feed rows of version v of tbl, sorted.
func changeRows(t *testing.T, tbl *delta.Table, v int64) []string {
	t.Helper()
	rd, err := tbl.Changes(t.Context(), delta.ChangesOptions{StartVersion: &v, EndVersion: &v})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var out []string
	for rd.Next() {
		out = appendRendered(out, rd.RecordBatch())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// dataReads counts the reads of each data file (not log files) of a store.
type dataReads struct {
	objectstore.Store
	mu    sync.Mutex
	reads map[string]int
}

func (d *dataReads) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasSuffix(key, ".parquet") && !strings.Contains(key, "_delta_log/") {
		d.mu.Lock()
		d.reads[key]++
		d.mu.Unlock()
	}
	return d.Store.Get(ctx, key)
}

// dimFiles maps the dimension's live data files to their row counts.
func dimFiles(t *testing.T, env *Env, decl *Table) map[string]int64 {
	t.Helper()
	tbl, err := env.openTable(context.Background(), decl)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, a := range snap.Files() {
		out[a.Path] = numRecords(t, a)
	}
	return out
}

// The MERGE takes the dimension rows the scan kept. With deletion vectors each data file
// of the dimension is read once per run; without, a changed one is read twice (the scan,
// then the splice that copies the columns that do not change), and spliced: replaced by
// a file of the same rows, the new versions going to another.
func TestSCD2KeptRowsSpareTheMergeARead(t *testing.T) {
	for _, dv := range []bool{true, false} {
		t.Run(fmt.Sprintf("deletion vectors %v", dv), func(t *testing.T) {
			staging, dimTbl := customerTables(t)
			if dv {
				dimTbl.Properties = maps.Clone(dimTbl.Properties)
				dimTbl.Properties[delta.PropEnableDeletionVectors] = "true"
			}
			clock := &testClock{t: d1}
			store := &dataReads{Store: mem.New(mem.Config{Now: clock.Now}), reads: map[string]int{}}
			env := newTestEnv(store, clock, staging, dimTbl)
			cfg := scd2Config()
			cfg.SourceChanges = false
			stage := NewSCD2Merge("merge", cfg)
			batch := func(city string) {
				var rows [][]any
				for i := range 200 {
					c := "Seattle"
					if i%10 == 0 {
						c = city // a tenth of the keys move
					}
					rows = append(rows, []any{fmt.Sprintf("C%04d", i), "name", c, clock.t})
				}
				writeRows(t, env, staging, true, rows...)
				runStage(t, stage, env)
			}
			batch("Seattle")
			clock.t = d1.Add(24 * time.Hour)
			clear(store.reads)
			before := dimFiles(t, env, dimTbl)
			batch("Portland")
			if !dv {
				// Spliced, not rewritten: the file holding the closed versions gives way to
				// one of exactly its rows (a rewrite writes them with the new versions).
				after := dimFiles(t, env, dimTbl)
				var removed, added []int64
				for p, n := range before {
					if _, ok := after[p]; !ok {
						removed = append(removed, n)
					}
				}
				for p, n := range after {
					if _, ok := before[p]; !ok {
						added = append(added, n)
					}
				}
				slices.Sort(added)
				if len(removed) != 1 || !slices.Equal(added, []int64{20, removed[0]}) {
					t.Errorf("the run removed files of %v rows and added %v, want one file spliced and one of the 20 new versions", removed, added)
				}
			}
			want := 1
			if !dv {
				want = 2
			}
			dimReads := 0
			for key, n := range store.reads {
				if !strings.HasPrefix(key, dimTbl.Path+"/") {
					continue
				}
				dimReads++
				if n != want {
					t.Errorf("%s read %d times in the run, want %d", key, n, want)
				}
			}
			if dimReads == 0 {
				t.Fatal("the run read no dimension data file")
			}
		})
	}
}
