package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// fsOpener serves a local warehouse and local source directories, as serve does for a
// pipeline whose warehouse is a directory.
type fsOpener struct {
	wh  objectstore.Store
	dir string // the pipeline file's directory
}

func (o fsOpener) Warehouse(context.Context, *pipelines.Spec) (objectstore.Store, error) {
	return o.wh, nil
}

func (o fsOpener) Location(_ context.Context, _ *pipelines.Spec, location string) (objectstore.Store, string, error) {
	if !filepath.IsAbs(location) {
		location = filepath.Join(o.dir, filepath.FromSlash(location))
	}
	st, err := fs.New(fs.Config{Dir: location})
	return st, "", err
}

const leakPipeline = `pipeline: steady
schedule: "@every 1s"
catchup: all
history: {keep_runs: 100}
tables:
  raw.events:
    columns: [{name: id, type: string}, {name: v, type: bigint}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]
    properties: {delta.enableChangeDataFeed: true}
  audit.events:
    columns:
      - {name: id, type: string}
      - {name: v, type: bigint}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
      - {name: _change_type, type: string}
      - {name: _commit_version, type: bigint}
      - {name: _commit_timestamp, type: timestamp}
stages:
  - {name: load, kind: ingest, source: landing/*.csv, target: raw.events}
  - {name: capture, kind: capture_history, source: raw.events, target: audit.events, depends_on: [load]}
`

// usage is what a long-running server must not accumulate.
type usage struct {
	goroutines, fds int
	heap            uint64
}

func measure(t *testing.T) usage {
	t.Helper()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count open files: %v", err)
	}
	return usage{goroutines: runtime.NumGoroutine(), fds: len(fds), heap: ms.HeapInuse}
}

// TestServerStaysFlat: a scheduler and runner, as serve holds them, run 1,000 scheduled
// runs of a real pipeline (ingest and capture_history on a local warehouse, a new file
// every tenth slot, retention pruning old records). Between the 100th and the 1,000th
// run no goroutine, no open file and no more than a few MiB of heap are left behind,
// and every slot ran once.
func TestServerStaysFlat(t *testing.T) {
	if testing.Short() {
		testenv.Unavailable(t, "runs 1,000 runs, which -short leaves out")
	}
	dir := t.TempDir()
	landing := filepath.Join(dir, "landing")
	if err := os.MkdirAll(landing, 0o755); err != nil {
		t.Fatal(err)
	}
	wh, err := fs.New(fs.Config{Dir: filepath.Join(dir, "warehouse"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := pipelines.Parse(filepath.Join(dir, "steady.yaml"), []byte(leakPipeline), pipelines.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock(at(t0))
	runner := NewRunner(RunnerConfig{
		Opener: fsOpener{wh: wh, dir: dir}, Now: clk.Now, Logger: quiet,
		Identity: Identity{Host: "testhost", PID: 1000, Instance: "A"},
	})
	sched := New(Config{Runner: runner, Now: clk.Now, Alive: func(string, int) bool { return true }, Logger: quiet})
	ctx := context.Background()
	if err := sched.Set(ctx, []*pipelines.Spec{spec}); err != nil {
		t.Fatal(err)
	}
	store := NewStore(wh)
	sched.Tick(ctx) // first load: the slots from now on are the pipeline's

	const runs, warm = 1000, 100
	var base usage
	rows := 0
	for i := 1; i <= runs; i++ {
		if i%10 == 1 {
			body := fmt.Sprintf("id,v\nk%d,%d\nk%d,%d\n", i, i, i+1, i+1)
			if err := os.WriteFile(filepath.Join(landing, fmt.Sprintf("%05d.csv", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			rows += 2
		}
		clk.Set(at(t0).Add(time.Duration(i) * time.Second))
		sched.Tick(ctx)
		sched.Wait()
		id := SlotID("steady", clk.Now())
		rec, err := store.Get(ctx, id)
		if err != nil || rec.Status != Succeeded {
			status := "no record"
			if rec != nil {
				status = string(rec.Status) + " " + rec.Reason
			}
			t.Fatalf("run %d (%s): %s %v", i, id, status, err)
		}
		if i == warm {
			base = measure(t)
		}
	}
	end := measure(t)
	t.Logf("after %d runs: %+v; after %d: %+v", warm, base, runs, end)
	if end.goroutines > base.goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d after %d runs, %d after %d:\n%s", base.goroutines, warm, end.goroutines, runs, buf[:runtime.Stack(buf, true)])
	}
	if end.fds > base.fds {
		t.Errorf("open files: %d after %d runs, %d after %d", base.fds, warm, end.fds, runs)
	}
	if grown := int64(end.heap) - int64(base.heap); grown > 8<<20 {
		t.Errorf("heap in use grew by %d MiB from run %d to run %d (%d → %d bytes)", grown>>20, warm, runs, base.heap, end.heap)
	}

	entries, err := store.List(ctx, "steady", 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 101 || len(entries) < 100 {
		t.Errorf("%d records kept, want the newest 100 (history: keep_runs)", len(entries))
	}
	var lines []string
	for _, name := range []string{"raw/events", "audit/events"} {
		lines = append(lines, fmt.Sprintf("%s: %s", name, countRows(t, ctx, wh, name)))
	}
	want := []string{fmt.Sprintf("raw/events: %d", rows), fmt.Sprintf("audit/events: %d", rows)}
	if strings.Join(lines, "; ") != strings.Join(want, "; ") {
		t.Errorf("rows %q, want %q: every source row once", lines, want)
	}
}

// countRows is the number of rows of the table at root in wh, as text.
func countRows(t *testing.T, ctx context.Context, wh objectstore.Store, root string) string {
	t.Helper()
	tbl, err := delta.Open(ctx, wh, root, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := snap.NumRecords()
	if !ok {
		return "unknown"
	}
	return fmt.Sprint(n)
}
