package jobs

import (
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

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
