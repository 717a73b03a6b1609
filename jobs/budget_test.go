package jobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/faultstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// tinyBudget forces a stage over its budget at its first event, so that a test's small
// batches are worked in many passes, in many MERGE parts.
const tinyBudget ByteSize = 512

// spilled reports whether a stage's result says it worked over spill files.
func spilled(res Result) bool {
	return slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "passes over spill files") })
}

// observed is what a user can see of a table after a scenario: its rows (every column),
// the change feed and the history (operation and row counts) of every version, and,
// when it has one, the rows of the event log of the stage writing it.
func observed(t *testing.T, env *Env, decl *Table, eventLog string) []string {
	t.Helper()
	ctx := t.Context()
	out := []string{"rows:"}
	out = append(out, tableRows(t, env, decl)...)
	tbl, err := env.openTable(ctx, decl)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := tbl.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(hist)
	for _, h := range hist {
		m := h.OperationMetrics
		// (Rows copied depend on the files' layout, which differs: a MERGE in parts
		// writes more, smaller files.)
		out = append(out, fmt.Sprintf("version %d: %s source=%v inserted=%v updated=%v deleted=%v", h.Version, h.Operation,
			m["numSourceRows"], m["numTargetRowsInserted"], m["numTargetRowsUpdated"], m["numTargetRowsDeleted"]))
		if decl.ChangeDataFeed() {
			out = append(out, changeRows(t, tbl, h.Version)...)
		}
	}
	if eventLog != "" {
		lt, err := delta.Open(ctx, env.Warehouse, eventLog, env.Delta)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := lt.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := snap.Scan(ctx, delta.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for sc.Next() {
			rows = appendRendered(rows, sc.RecordBatch())
		}
		sc.Release()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(rows)
		out = append(append(out, "event log:"), rows...)
	}
	return out
}

// twins runs scenario with no budget set and with tinyBudget and checks that a user
// sees the same in both (observe), that the budgeted runs did work over spill files,
// and that no spill file is left behind.
func twins(t *testing.T, scenario func(t *testing.T, budget ByteSize, spillDir string) (got []string, spills int)) {
	t.Helper()
	want, n := scenario(t, 0, "")
	if n > 0 {
		t.Fatalf("without a budget, %d runs went over spill files", n)
	}
	dir := t.TempDir()
	got, n := scenario(t, tinyBudget, dir)
	if n == 0 {
		t.Fatalf("with a budget of %s, no run went over spill files", tinyBudget)
	}
	if i := firstDifference(got, want); i >= 0 {
		t.Fatalf("with a budget of %s (%d runs over spill files), line %d differs:\ngot  %s\nwant %s\n\nall got:\n%s", tinyBudget, n, i, at(got, i), at(want, i), strings.Join(got, "\n"))
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("spill files left behind: %v", left)
	}
}

// scd2FeedScenario merges a staging table's change feed into a dimension over many
// runs: upserts at random past times (late events), exact duplicates, delete_when rows
// (op = 'D'), deletes of staging rows (deletes in the change feed), a type 1 column.
func scd2FeedScenario(deletes string, seed uint64, dv, everyCommit bool) func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
	return func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
		ctx := t.Context()
		rng := rand.New(rand.NewPCG(seed, 18))
		staging := &Table{Name: "staging.customers", Path: "staging/customers",
			Schema:     schemaOf(t, "customer_id string", "name string", "city string", "op string", "updated_at timestamp"),
			Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
		_, dim := customerTables(t)
		if dv {
			dim.Properties = map[string]string{"delta.enableChangeDataFeed": "true", delta.PropEnableDeletionVectors: "true"}
		}
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		clock := &testClock{t: base}
		env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
		env.MemoryBudget, env.SpillDir = budget, spillDir
		cfg := scd2Config()
		cfg.Deletes, cfg.Type1, cfg.DeleteWhen = deletes, []string{"name"}, "op = 'D'"
		stage := NewSCD2Merge("merge", cfg)
		cities := []any{nil, "Seattle", "Portland", "Boise"}
		names := []any{"Ada", "Ada L.", nil}
		used := map[string]bool{}
		spills := 0
		for commit := range 30 {
			clock.t = base.Add(time.Duration(commit+1)*4*time.Hour + 30*time.Minute)
			if rng.IntN(6) == 0 && commit > 0 {
				tbl, err := env.openTable(ctx, staging)
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("C%d", rng.IntN(12))
				if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("customer_id", key)}); err != nil {
					t.Fatal(err)
				}
			} else {
				var rows [][]any
				for range 1 + rng.IntN(8) {
					k := fmt.Sprintf("C%d", rng.IntN(12))
					at := base.Add(time.Duration(rng.IntN((commit+1)*4)) * time.Hour)
					if used[fmt.Sprint(k, at)] {
						continue
					}
					used[fmt.Sprint(k, at)] = true
					op := "U"
					if rng.IntN(7) == 0 {
						op = "D"
					}
					row := []any{k, names[rng.IntN(len(names))], cities[rng.IntN(len(cities))], op, at}
					rows = append(rows, row)
					if rng.IntN(4) == 0 {
						rows = append(rows, slices.Clone(row)) // an exact duplicate
					}
				}
				if len(rows) == 0 {
					continue
				}
				appendRows(t, env, staging, rows...)
			}
			if rng.IntN(3) == 0 || commit == 29 || everyCommit {
				clock.Advance(time.Minute)
				if spilled(runStage(t, stage, env)) {
					spills++
				}
			}
		}
		return observed(t, env, dim, eventLogRoot+"/scd2_merge/"+dim.Name+"/"+staging.Name), spills
	}
}

// A budget so small that every run works over spill files, in many passes and MERGE
// parts, gives what no budget gives: rows, change feed, identity values, history and
// event log, for change feed sources with late events, delete_when, deletes of source
// rows, type 1 columns and each way of handling deletes, with deletion vectors too.
func TestBudgetSCD2ChangeFeed(t *testing.T) {
	for _, deletes := range []string{"ignore", "close", "tombstone"} {
		for seed := range propertySeeds(3) {
			t.Run(fmt.Sprintf("%s/seed%d", deletes, seed), func(t *testing.T) {
				twins(t, scd2FeedScenario(deletes, seed, false, false))
			})
		}
	}
	t.Run("deletion vectors", func(t *testing.T) { twins(t, scd2FeedScenario("close", 7, true, false)) })
	// A merge after every commit: the event log's small files are merged as it grows
	// (range by range over the budget).
	t.Run("log files merged", func(t *testing.T) { twins(t, scd2FeedScenario("tombstone", 8, false, true)) })
}

// scd2SnapshotScenario merges the snapshots of a source table (keys come, change, go
// and return, a type 1 column changes) into a dimension.
func scd2SnapshotScenario(deletes string, seed uint64) func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
	return func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
		rng := rand.New(rand.NewPCG(seed, 19))
		staging, dim := customerTables(t)
		staging.Properties = nil
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		clock := &testClock{t: base}
		env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, dim)
		env.MemoryBudget, env.SpillDir = budget, spillDir
		cfg := scd2Config()
		cfg.SourceChanges, cfg.SequenceBy, cfg.Deletes, cfg.Type1 = false, "", deletes, []string{"name"}
		stage := NewSCD2Merge("merge", cfg)
		cities := []any{nil, "Seattle", "Portland"}
		spills := 0
		for day := range 8 {
			clock.t = base.Add(time.Duration(day) * 24 * time.Hour)
			var rows [][]any
			for k := range 20 {
				if rng.IntN(5) == 0 {
					continue // absent today
				}
				rows = append(rows, []any{fmt.Sprintf("C%02d", k), fmt.Sprintf("name %d", rng.IntN(2)), cities[rng.IntN(len(cities))], clock.t})
			}
			writeRows(t, env, staging, true, rows...)
			clock.Advance(time.Minute)
			if spilled(runStage(t, stage, env)) {
				spills++
			}
		}
		return observed(t, env, dim, ""), spills
	}
}

func TestBudgetSCD2Snapshot(t *testing.T) {
	for _, deletes := range []string{"ignore", "close", "tombstone"} {
		for seed := range propertySeeds(2) {
			t.Run(fmt.Sprintf("%s/seed%d", deletes, seed), func(t *testing.T) {
				twins(t, scd2SnapshotScenario(deletes, seed))
			})
		}
	}
}

// spillFiles counts the spill files under dir.
func spillFiles(t *testing.T, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return n
}

// A run over its budget leaves no spill file behind, whether it succeeds, fails at any
// store operation or is cancelled at any; while it runs, it has some.
func TestBudgetSpillFilesRemoved(t *testing.T) {
	setup := func(t *testing.T) (*faultstore.Store, *Env, Stage, string) {
		staging, dim := customerTables(t)
		clock := &testClock{t: d1}
		store := faultstore.New(mem.New(mem.Config{Now: clock.Now}))
		env := newTestEnv(store, clock, staging, dim)
		var rows [][]any
		for k := range 30 {
			rows = append(rows, []any{fmt.Sprintf("C%02d", k), "Ada", "Seattle", d1})
		}
		appendRows(t, env, staging, rows...)
		stage := NewSCD2Merge("merge", scd2Config())
		runStage(t, stage, env)
		clock.t = d2
		for k := range rows {
			rows[k][2], rows[k][3] = "Portland", d2
		}
		appendRows(t, env, staging, rows...)
		env.MemoryBudget, env.SpillDir = tinyBudget, t.TempDir()
		return store, env, stage, env.SpillDir
	}
	store, env, stage, dir := setup(t)
	most := 0
	store.OnOp(func(faultstore.Op, string) { most = max(most, spillFiles(t, dir)) })
	store.FailNth(0, false, false) // count only
	if res := runStage(t, stage, env); !spilled(res) {
		t.Fatalf("the run did not go over spill files: %v", res.Notes)
	}
	ops := store.Count()
	if most == 0 {
		t.Fatal("no spill file was seen while the run went over spill files")
	}
	if n := spillFiles(t, dir); n > 0 {
		t.Fatalf("after success: %d spill files left", n)
	}
	for n := 1; n <= ops; n++ {
		for _, how := range []string{"failure", "cancellation"} {
			store, env, stage, dir := setup(t)
			ctx, cancel := context.WithCancel(t.Context())
			if how == "failure" {
				store.FailNth(n, true, false)
			} else {
				seen := 0
				store.OnOp(func(faultstore.Op, string) {
					if seen++; seen == n {
						cancel()
					}
				})
			}
			_, err := stage.Run(ctx, env)
			cancel()
			if err == nil && (store.Injected() || how == "cancellation" && ctx.Err() != nil && n < ops) {
				t.Fatalf("%s at op %d: the run succeeded", how, n)
			}
			if left := spillFiles(t, dir); left > 0 {
				t.Fatalf("%s at op %d (%v): %d spill files left", how, n, err, left)
			}
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ByteSize
		err  bool
	}{
		{"1GiB", 1 << 30, false}, {"512MiB", 512 << 20, false}, {"2GB", 2e9, false}, {"1.5GiB", 3 << 29, false},
		{"64kib", 64 << 10, false}, {"1048576", 1 << 20, false}, {"100 MB", 100e6, false}, {"7B", 7, false},
		{"", 0, true}, {"lots", 0, true}, {"1.GiB", 0, true}, {"2PiB", 0, true}, {"-1GiB", 0, true}, {"GiB", 0, true},
	} {
		got, err := ParseByteSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseByteSize(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		in   ByteSize
		want string
	}{{1 << 30, "1GiB"}, {1536 << 20, "1536MiB"}, {512, "512B"}, {0, "0B"}} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", int64(tc.in), got, tc.want)
		}
	}
}

// scd1Scenario merges a staging table into a current-state table over many runs: from
// its change feed (late events, delete_when, deletes of staging rows) or from its
// snapshots (keys come, change, go and return).
func scd1Scenario(changes bool, seed uint64) func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
	return func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
		ctx := t.Context()
		rng := rand.New(rand.NewPCG(seed, 20))
		staging := &Table{Name: "staging.customers", Path: "staging/customers",
			Schema:     schemaOf(t, "customer_id string", "name string", "city string", "op string", "updated_at timestamp"),
			Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
		current := &Table{Name: "current.customer", Path: "current/customer",
			Schema:     schemaOf(t, "customer_sk bigint", "customer_id string", "name string", "city string", "op string", "updated_at timestamp"),
			Properties: map[string]string{"delta.enableChangeDataFeed": "true"}}
		delta.SetIdentity(current.Schema.Fields[0], 1, 1, false)
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		clock := &testClock{t: base}
		env := newTestEnv(mem.New(mem.Config{Now: clock.Now}), clock, staging, current)
		env.MemoryBudget, env.SpillDir = budget, spillDir
		cfg := &SCD1Config{Source: staging.Name, SourceChanges: changes, Target: current.Name, Keys: []string{"customer_id"}, Deletes: "delete"}
		if changes {
			cfg.SequenceBy, cfg.DeleteWhen = "updated_at", "op = 'D'"
		}
		stage := NewSCD1Merge("merge", cfg)
		cities := []any{nil, "Seattle", "Portland", "Boise"}
		used := map[string]bool{}
		spills := 0
		for commit := range 24 {
			clock.t = base.Add(time.Duration(commit+1)*4*time.Hour + 30*time.Minute)
			switch {
			case !changes:
				var rows [][]any
				for k := range 14 {
					if rng.IntN(4) > 0 {
						rows = append(rows, []any{fmt.Sprintf("C%02d", k), fmt.Sprintf("name %d", rng.IntN(2)), cities[rng.IntN(len(cities))], "U", clock.t})
					}
				}
				writeRows(t, env, staging, true, rows...)
			case rng.IntN(6) == 0 && commit > 0:
				tbl, err := env.openTable(ctx, staging)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tbl.Delete(ctx, delta.DeleteOptions{Where: expr.Eq("customer_id", fmt.Sprintf("C%02d", rng.IntN(14)))}); err != nil {
					t.Fatal(err)
				}
			default:
				var rows [][]any
				for range 1 + rng.IntN(8) {
					k := fmt.Sprintf("C%02d", rng.IntN(14))
					at := base.Add(time.Duration(rng.IntN((commit+1)*4)) * time.Hour)
					if used[fmt.Sprint(k, at)] {
						continue
					}
					used[fmt.Sprint(k, at)] = true
					op := "U"
					if rng.IntN(7) == 0 {
						op = "D"
					}
					rows = append(rows, []any{k, fmt.Sprintf("name %d", rng.IntN(2)), cities[rng.IntN(len(cities))], op, at})
				}
				if len(rows) == 0 {
					continue
				}
				appendRows(t, env, staging, rows...)
			}
			if !changes || rng.IntN(3) == 0 || commit == 23 {
				clock.Advance(time.Minute)
				if spilled(runStage(t, stage, env)) {
					spills++
				}
			}
		}
		log := ""
		if changes {
			log = eventLogRoot + "/scd1_merge/" + current.Name + "/" + staging.Name
		}
		return observed(t, env, current, log), spills
	}
}

func TestBudgetSCD1(t *testing.T) {
	for _, changes := range []bool{true, false} {
		for seed := range propertySeeds(3) {
			t.Run(fmt.Sprintf("changes=%v/seed%d", changes, seed), func(t *testing.T) {
				twins(t, scd1Scenario(changes, seed))
			})
		}
	}
}

// ingestScenario loads runs of random files into a keyed table: snapshot mode (each run
// the table's whole content, a first one into the empty table) or upsert mode, with or
// without sequence_by, with delete_when rows; a run with a duplicate key fails (and the
// error is part of what is observed).
func ingestScenario(mode string, seq bool, seed uint64) func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
	return func(t *testing.T, budget ByteSize, spillDir string) ([]string, int) {
		rng := rand.New(rand.NewPCG(seed, 21))
		tbl := eventsTable(t)
		clock := &testClock{t: t0}
		env, landing := ingestEnv(t, mem.New(mem.Config{Now: clock.Now}), tbl)
		env.Delta.Now = clock.Now
		env.MemoryBudget, env.SpillDir = budget, spillDir
		cfg := &IngestConfig{Source: "/landing/c/*.csv", Target: tbl.Name, Mode: mode, Keys: []string{"id"}, DeleteWhen: "op = 'D'"}
		if seq {
			cfg.SequenceBy = "updated_at"
		}
		stage := NewIngest("ingest", cfg)
		cities := []string{"", "Seattle", "Portland", "Leeds"}
		var out []string
		spills, file := 0, 0
		for run := range 8 {
			for range 1 + rng.IntN(3) {
				file++
				var lines []string
				used := map[string]bool{}
				for range 3 + rng.IntN(10) {
					k := fmt.Sprintf("C%02d", rng.IntN(16))
					if used[k] && !seq && rng.IntN(12) > 0 {
						continue // (now and then a duplicate key that fails the run)
					}
					used[k] = true
					op := "U"
					if rng.IntN(8) == 0 {
						op = "D"
					}
					at := fmt.Sprintf("2026-01-14T%02d:%02d:00Z", run, rng.IntN(60))
					lines = append(lines, fmt.Sprintf("%s,%s,%s,%s", k, cities[rng.IntN(len(cities))], op, at))
				}
				putFile(t, landing, fmt.Sprintf("c/%03d.csv", file), "id,city,op,updated_at\n"+strings.Join(lines, "\n")+"\n")
			}
			clock.Advance(time.Hour)
			res, err := stage.Run(t.Context(), env)
			if err != nil {
				out = append(out, fmt.Sprintf("run %d: %v", run, err))
				// The failed files stay out of the next runs.
				for f := range file {
					landing.Delete(t.Context(), fmt.Sprintf("c/%03d.csv", f+1))
				}
			}
			if spilled(res) {
				spills++
			}
		}
		return append(out, observed(t, env, tbl, "")...), spills
	}
}

func TestBudgetIngest(t *testing.T) {
	for _, mode := range []string{"snapshot", "upsert"} {
		for _, seq := range []bool{false, true} {
			for seed := range propertySeeds(3) {
				t.Run(fmt.Sprintf("%s/sequence_by=%v/seed%d", mode, seq, seed), func(t *testing.T) {
					twins(t, ingestScenario(mode, seq, seed))
				})
			}
		}
	}
}

// The dimension read ahead while a large batch is read (dimensionAhead) changes
// nothing a user sees: with every batch large (no key filter), the scenarios reading
// ahead give what they give without.
func TestSCD2DimensionReadAhead(t *testing.T) {
	for name, scenario := range map[string]func(t *testing.T, budget ByteSize, spillDir string) ([]string, int){
		"change feed":      scd2FeedScenario("close", 3, false, false),
		"deletion vectors": scd2FeedScenario("tombstone", 7, true, false),
		"snapshot":         scd2SnapshotScenario("close", 2),
	} {
		t.Run(name, func(t *testing.T) {
			defer func(m int, off bool, f func()) { keyFilterMax, noDimensionAhead, readingAhead = m, off, f }(keyFilterMax, noDimensionAhead, readingAhead)
			started := 0
			readingAhead = func() { started++ }
			keyFilterMax, noDimensionAhead = 0, true
			want, _ := scenario(t, 0, "")
			if started > 0 {
				t.Fatalf("%d reads ahead with none asked for", started)
			}
			noDimensionAhead = false
			got, _ := scenario(t, 0, "")
			if started == 0 {
				t.Fatal("no run read the dimension ahead")
			}
			if i := firstDifference(got, want); i >= 0 {
				t.Fatalf("reading ahead (%d runs), line %d differs:\ngot  %s\nwant %s", started, i, at(got, i), at(want, i))
			}
		})
	}
}
