package jobs

import (
	"runtime"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// heapPeak runs f and returns the largest Go heap (live and not yet collected objects)
// seen while it ran, sampled every millisecond, above the live heap before it.
func heapPeak(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var peak uint64
	stop := sampleHeap(&peak)
	f()
	stop()
	return peak - min(peak, ms.HeapAlloc)
}

// extractEnv builds, on local disk, a staging table with n customers and their SCD2
// dimension, then appends a full extract of the n keys, every tenth moved: a change
// batch as large as the dimension.
func extractEnv(t *testing.T, n int) (*Env, *SCD2Merge) {
	store, err := fs.New(fs.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	staging, dim := customerTables(t)
	clock := &testClock{t: d1}
	env := newTestEnv(store, clock, staging, dim)
	same, moved := make([]int, 0, n), make([]int, 0, n/10+1)
	for k := range n {
		same = append(same, k)
	}
	appendCustomers(t, env, staging, same, "Seattle", d1)
	stage := NewSCD2Merge("merge", scd2Config())
	runStage(t, stage, env)
	clock.t = d2
	same = same[:0]
	for k := range n {
		if k%10 == 1 {
			moved = append(moved, k)
		} else {
			same = append(same, k)
		}
	}
	appendCustomers(t, env, staging, same, "Seattle", d2)
	appendCustomers(t, env, staging, moved, "Portland", d2)
	return env, stage
}

// A batch that takes more heap than the budget in memory stays under it with the
// budget: the run works over spill files, and the memory limit the running stages hold
// (holdBudget) has the collector keep their garbage within it.
func TestBudgetHeapStaysUnderBudget(t *testing.T) {
	if testing.Short() {
		testenv.Unavailable(t, "merges 200,000 events twice, which -short leaves out")
	}
	if raceEnabled {
		// The race detector's instrumentation slows the program and the collector
		// unevenly, so the heap between two collections is no measure of the budget:
		// scripts/test.sh runs this test without it (run_properties).
		t.Skip("heap bounds are measured without -race (scripts/test.sh run_properties)")
	}
	const n = 200_000
	const budget = 48 << 20
	env, stage := extractEnv(t, n)
	free := heapPeak(func() { runStage(t, stage, env) })
	if free <= budget {
		t.Fatalf("in memory the batch took a heap of %d MiB, no more than the %d MiB budget: the test proves nothing", free>>20, budget>>20)
	}
	env, stage = extractEnv(t, n)
	env.MemoryBudget, env.SpillDir = budget, t.TempDir()
	var res Result
	peak := heapPeak(func() { res = runStage(t, stage, env) })
	if !spilled(res) {
		t.Fatalf("the run did not go over spill files: %v", res.Notes)
	}
	t.Logf("heap peak %d MiB in memory, %d MiB with a budget of %d MiB (%v)", free>>20, peak>>20, budget>>20, res.Notes)
	if peak > budget {
		t.Errorf("heap peak %d MiB, over the budget of %d MiB", peak>>20, budget>>20)
	}
}
