package jobs

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// A keyed stage over its budget reports each pass over spill files (i of n, n the
// passes its notes name) and the parts of its MERGE as they are merged; in memory it
// reports neither.
func TestProgressOfPassesAndParts(t *testing.T) {
	for _, budget := range []ByteSize{0, 64 << 10} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			env, stage := extractEnv(t, 3000)
			env.MemoryBudget, env.SpillDir = budget, t.TempDir()
			var mu sync.Mutex
			var passes [][2]int
			var parts []int
			env.Progress = func(p Progress) {
				mu.Lock()
				defer mu.Unlock()
				if p.Pass > 0 {
					passes = append(passes, [2]int{p.Pass, p.Passes})
				}
				if p.Parts > 0 {
					parts = append(parts, p.Parts)
				}
			}
			res := runStage(t, stage, env)
			if budget == 0 {
				if spilled(res) || len(passes)+len(parts) > 0 {
					t.Fatalf("in memory: passes %v, parts %v reported (%v)", passes, parts, res.Notes)
				}
				return
			}
			n := 0
			for _, note := range res.Notes {
				if m := regexp.MustCompile(`worked in (\d+) passes`).FindStringSubmatch(note); m != nil {
					n, _ = strconv.Atoi(m[1])
				}
			}
			if n < 2 {
				t.Fatalf("the run did not work in passes: %v", res.Notes)
			}
			var want [][2]int
			for i := range n {
				want = append(want, [2]int{i + 1, n})
			}
			if !slices.Equal(passes, want) {
				t.Errorf("passes reported %v, want %v", passes, want)
			}
			if len(parts) < 2 || !slices.IsSorted(parts) || parts[0] != 1 || parts[len(parts)-1] != len(parts) {
				t.Errorf("parts reported %v, want 1, 2, ... in order", parts)
			}
		})
	}
}
