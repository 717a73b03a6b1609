package jobs

import (
	"math"
	"runtime/debug"
	"sync"
)

// A stage plans its live data within half its memory budget; the garbage between two
// collections is the other half. While stages with budgets run, the process's soft
// memory limit (runtime/debug.SetMemoryLimit) is the sum of their budgets, so that the
// collector runs before the heap outgrows them instead of at twice the live data. A
// limit the environment set (GOMEMLIMIT) is left as it is.
var memLimit struct {
	sync.Mutex
	sum     int64 // budgets of the stages running
	checked bool
	own     bool // the limit is ours to set (no GOMEMLIMIT)
}

// holdBudget counts a running stage's budget in the process's memory limit until the
// returned func is called.
func holdBudget(budget int64) (release func()) {
	m := &memLimit
	m.Lock()
	defer m.Unlock()
	if !m.checked {
		m.checked, m.own = true, debug.SetMemoryLimit(-1) == math.MaxInt64
	}
	if !m.own {
		return func() {}
	}
	m.sum += budget
	debug.SetMemoryLimit(m.sum)
	return func() {
		m.Lock()
		defer m.Unlock()
		m.sum -= budget
		if m.sum == 0 {
			debug.SetMemoryLimit(math.MaxInt64)
		} else {
			debug.SetMemoryLimit(m.sum)
		}
	}
}
