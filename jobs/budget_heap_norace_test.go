//go:build !race

// The race detector's instrumentation slows the program and the collector unevenly, so
// the heap between two collections is no measure of the budget: this file is built
// without it only, and scripts/test.sh runs its test so (run_properties).

package jobs

import (
	"runtime"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
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

// A batch that takes more heap than the budget in memory stays under it with the
// budget: the run works over spill files, and the memory limit the running stages hold
// (holdBudget) has the collector keep their garbage within it.
func TestBudgetHeapStaysUnderBudget(t *testing.T) {
	if testing.Short() {
		testenv.Unavailable(t, "merges 200,000 events twice, which -short leaves out")
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
