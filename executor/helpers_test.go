package executor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSpark()
	os.Exit(code)
}

// clock is the pinned time of every run, so load timestamps agree between engines
// (now, when a test needs the real time: vacuum).
var (
	clock = time.Date(2026, 1, 16, 6, 0, 0, 0, time.UTC)
	now   = func() time.Time { return clock }
)

// loadExample loads an example pipeline with its warehouse at wh, its stages on engine
// (a stage named in local stays local).
func loadExample(t *testing.T, file, wh string, engine string, local ...string) *pipelines.Spec {
	t.Helper()
	return loadExampleEnv(t, file, map[string]string{"ORCH_WAREHOUSE": wh}, engine, local...)
}

// loadExampleEnv is loadExample with the given variables (ORCH_WAREHOUSE among them).
func loadExampleEnv(t *testing.T, file string, vars map[string]string, engine string, local ...string) *pipelines.Spec {
	t.Helper()
	spec, err := pipelines.Load(file, pipelines.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range spec.Stages {
		st.Engine = engine
		if slices.Contains(local, st.Name) {
			st.Engine = pipelines.EngineLocal
		}
	}
	return spec
}

// runResult is what one run did: per stage its result and error.
type runResult struct {
	mu      sync.Mutex
	results map[string]jobs.Result
}

func (r *runResult) written() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, res := range r.results {
		n += len(res.VersionsWritten)
	}
	return n
}

// pipelineGraph compiles a pipeline into a graph whose every attempt runs with run, in an
// environment as the scheduler's runner gives it: the warehouse, local sources, the
// commits' lineage and a fixed clock.
func pipelineGraph(spec *pipelines.Spec, warehouse objectstore.Store, runID string, run func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error)) (*dag.Graph, error) {
	plan, err := pipelines.Compile(spec, nil)
	if err != nil {
		return nil, err
	}
	tables := spec.TablesByName()
	return plan.Graph(func(st *pipelines.StageSpec) dag.Task {
		return dag.TaskFunc(func(ctx context.Context, attempt int) error {
			env := &jobs.Env{
				Warehouse: warehouse,
				Tables:    tables,
				OpenLocation: func(ctx context.Context, loc string) (objectstore.Store, string, error) {
					st, err := fs.New(fs.Config{Dir: loc})
					return st, "", err
				},
				Lineage:      delta.Lineage{Pipeline: spec.Name, Stage: st.Name, RunID: runID, Attempt: attempt},
				Delta:        delta.Options{UserName: "test", Now: now},
				PipelineFile: spec.File,
			}
			_, err := run(ctx, pipelines.StageRun{Spec: spec, Stage: st, Env: env, Attempt: attempt})
			return err
		})
	})
}

// runPipeline runs a pipeline once through a dispatcher, as orchestrator run does.
func runPipeline(ctx context.Context, t *testing.T, d *executor.Dispatcher, spec *pipelines.Spec, wh, remote, runID string) (*runResult, error) {
	t.Helper()
	warehouse, err := fs.New(fs.Config{Dir: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer warehouse.Close()
	out := &runResult{results: map[string]jobs.Result{}}
	spark := &executor.SparkConfig{Remote: remote, Warehouse: wh, Locate: func(loc string) (string, error) { return loc, nil }}
	g, err := pipelineGraph(spec, warehouse, runID, func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
		res, err := d.Run(ctx, executor.Task{Key: r.Key(), Stage: r.Stage.Job, Env: r.Env}, executor.Engine(r.Stage.Engine), spark)
		out.mu.Lock()
		out.results[r.Stage.Name] = res
		out.mu.Unlock()
		return res, err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dag.Run(ctx, g, dag.Options{MaxParallel: 1})
	return out, err
}

// tableFacts is what a user compares between two runs of a table: its rows, its
// change feed and the operations of its history. Commit times differ between two
// warehouses, so a timestamp equal to a commit time of one of the warehouse's tables
// shows as that commit ("commit T@V"); identity columns are left out (engines hand out
// surrogate keys in their own order), but must be unique.
type tableFacts struct {
	rows, changes, history []string
}

func facts(ctx context.Context, t *testing.T, spec *pipelines.Spec, wh string) map[string]tableFacts {
	t.Helper()
	store, err := fs.New(fs.Config{Dir: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// A time that equals a commit's shows as that commit; one that equals several
	// (tables committed within one millisecond: a fast local run, Spark's commits) shows
	// as all of them, and matches the other engine's when they share one (sameFacts).
	commits := map[int64][]string{}
	tables := map[string]*delta.Table{}
	for _, decl := range spec.Tables {
		if ok, _ := delta.Exists(ctx, store, decl.Path); !ok {
			continue
		}
		tbl, err := delta.Open(ctx, store, decl.Path, delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tables[decl.Name] = tbl
		hist, err := tbl.History(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hist {
			label := fmt.Sprintf("%s@%d", decl.Name, h.Version)
			stamps := []int64{h.Timestamp.UnixMicro()}
			if snap, err := tbl.SnapshotAt(ctx, h.Version); err == nil {
				stamps = append(stamps, snap.Timestamp().UnixMicro())
			}
			for _, ts := range stamps {
				if !slices.Contains(commits[ts], label) {
					commits[ts] = append(commits[ts], label)
				}
			}
		}
	}
	for _, ls := range commits {
		slices.Sort(ls)
	}
	out := map[string]tableFacts{}
	for name, tbl := range tables {
		var f tableFacts
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		skip := map[string]bool{}
		for _, c := range snap.Schema().Fields {
			if delta.IsIdentity(c) {
				skip[c.Name] = true
			}
		}
		sc, err := snap.Scan(ctx, delta.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f.rows, err = recordRows(t, sc, skip, commits, name, true); err != nil {
			t.Fatal(err)
		}
		if snap.ChangeDataFeedEnabled() {
			start, err := tbl.ChangeDataFeedStart(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if start <= snap.Version() {
				end := snap.Version()
				ch, err := tbl.Changes(ctx, delta.ChangesOptions{StartVersion: &start, EndVersion: &end})
				if err == nil {
					f.changes, err = recordRows(t, ch, skip, commits, name, false)
				}
				if errors.Is(err, delta.ErrVersionCleaned) || errors.Is(err, objectstore.ErrNotExist) {
					f.changes = []string{"the feed is gone from its start (vacuumed)"}
				} else if err != nil {
					t.Fatal(err)
				}
			}
		}
		hist, err := tbl.History(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hist {
			f.history = append(f.history, fmt.Sprintf("%d %s", h.Version, h.Operation))
		}
		slices.Reverse(f.history)
		out[name] = f
	}
	return out
}

type batches interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
	Release()
}

func recordRows(t *testing.T, it batches, skip map[string]bool, commits map[int64][]string, table string, uniqueIdentity bool) ([]string, error) {
	t.Helper()
	defer it.Release()
	var rows []string
	ids := map[string]bool{}
	for it.Next() {
		rec := it.RecordBatch()
		for i := range int(rec.NumRows()) {
			var parts []string
			for j, col := range rec.Columns() {
				name := rec.Schema().Field(j).Name
				v := cell(col, i, commits)
				if skip[name] {
					if uniqueIdentity {
						if ids[v] {
							t.Errorf("table %s: identity %s = %s twice", table, name, v)
						}
						ids[v] = true
					}
					continue
				}
				parts = append(parts, name+"="+v)
			}
			rows = append(rows, strings.Join(parts, " "))
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	sort.Strings(rows)
	return rows, nil
}

func cell(col arrow.Array, i int, commits map[int64][]string) string {
	if col.IsNull(i) {
		return "NULL"
	}
	if ts, ok := col.(*array.Timestamp); ok {
		tm := ts.Value(i).ToTime(ts.DataType().(*arrow.TimestampType).Unit)
		if c, ok := commits[tm.UnixMicro()]; ok {
			return "commit " + strings.Join(c, "|")
		}
		if c, ok := commits[tm.Truncate(time.Millisecond).UnixMicro()]; ok && tm.Sub(tm.Truncate(time.Millisecond)) == 0 {
			return "commit " + strings.Join(c, "|")
		}
		return tm.UTC().Format(time.RFC3339Nano)
	}
	return col.ValueStr(i)
}

// commitLabel finds the commit labels of a row ("commit T@V" or, for a time several
// commits share, "commit T@V|U@W").
var commitLabel = regexp.MustCompile(`commit ([^ ]+)`)

// sameRows reports whether two engines' rows are the same: equal but for commit labels,
// where a time some commits share matches any of them.
func sameRows(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for j, y := range b {
			if !used[j] && sameRow(x, y) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func sameRow(x, y string) bool {
	if commitLabel.ReplaceAllString(x, "commit ?") != commitLabel.ReplaceAllString(y, "commit ?") {
		return false
	}
	lx, ly := commitLabel.FindAllStringSubmatch(x, -1), commitLabel.FindAllStringSubmatch(y, -1)
	for i := range lx {
		ys := strings.Split(ly[i][1], "|")
		if !slices.ContainsFunc(strings.Split(lx[i][1], "|"), func(l string) bool { return slices.Contains(ys, l) }) {
			return false
		}
	}
	return true
}

// sameFacts reports every difference between two warehouses' tables.
func sameFacts(t *testing.T, want, got map[string]tableFacts, what string) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: table %s missing", what, name)
			continue
		}
		diff := func(kind string, a, b []string) {
			if !sameRows(a, b) {
				t.Errorf("%s: table %s %s differ:\nlocal:\n  %s\nother:\n  %s", what, name, kind, strings.Join(a, "\n  "), strings.Join(b, "\n  "))
			}
		}
		diff("rows", w.rows, g.rows)
		diff("change feeds", w.changes, g.changes)
		diff("history operations", w.history, g.history)
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: table %s exists only there", what, name)
		}
	}
}

func examplePath(name string) string {
	return filepath.Join("..", "examples", "pipelines", name, "pipeline.yaml")
}

// tableVersionOf is the latest version of the table at path below wh (-1: none).
func tableVersionOf(t *testing.T, wh, path string) int64 {
	t.Helper()
	store, err := fs.New(fs.Config{Dir: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if ok, _ := delta.Exists(context.Background(), store, path); !ok {
		return -1
	}
	tbl, err := delta.Open(context.Background(), store, path, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version()
}
