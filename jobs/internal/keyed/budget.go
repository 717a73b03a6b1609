package keyed

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// A stage plans its live data within three quarters of its memory budget (WorkingSet);
// the garbage between two collections is kept within the rest. While stages with budgets run, the process's soft
// memory limit (runtime/debug.SetMemoryLimit) is the sum of their budgets over the live
// heap the process had when the first of them started, so that the collector runs
// before the heap outgrows them instead of at twice the live data. A limit the
// environment set (GOMEMLIMIT) is left as it is.
var memLimit struct {
	sync.Mutex
	sum     int64 // budgets of the stages running
	base    int64 // the live heap when the first of them started
	checked bool
	own     bool // the limit is ours to set (no GOMEMLIMIT)
}

// minMemLimit is the least memory limit set: below it the collector would run all the
// time for nothing (a tiny budget's stage works over spill files anyway).
const minMemLimit = 32 << 20

// HoldBudget counts a running stage's budget in the process's memory limit until the
// returned func is called.
func HoldBudget(budget int64) (release func()) {
	m := &memLimit
	m.Lock()
	defer m.Unlock()
	if !m.checked {
		m.checked, m.own = true, debug.SetMemoryLimit(-1) == math.MaxInt64
	}
	if !m.own {
		return func() {}
	}
	if m.sum == 0 {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 {
			m.base = int64(s[0].Value.Uint64())
		}
	}
	m.sum += budget
	debug.SetMemoryLimit(max(m.base+m.sum, minMemLimit))
	return func() {
		m.Lock()
		defer m.Unlock()
		m.sum -= budget
		if m.sum == 0 {
			debug.SetMemoryLimit(math.MaxInt64)
		} else {
			debug.SetMemoryLimit(max(m.base+m.sum, minMemLimit))
		}
	}
}

// WorkingSet is how much live data a run plans to hold under budget (its stage's
// estimates of what it holds, measured: BenchmarkHeldRowCost in package jobs): three
// quarters. While it runs, the process's soft memory limit is its budget (HoldBudget),
// so the collector keeps the garbage within the rest instead of letting the heap grow to
// twice the live data; the last quarter is room for it and for what a run holds besides
// its batch (a MERGE's row groups, the decoder's and the writers' buffers).
func WorkingSet(budget int64) int64 { return budget / 4 * 3 }
