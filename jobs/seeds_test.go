package jobs

import (
	"iter"
	"os"
	"strconv"
)

// propertySeeds are the n seeds a random-stream property test runs: 0 to n-1, or, with
// ORCH_PROPERTY_SEED=base, base to base+n-1 (to sweep other streams than CI's by hand:
// the failure message names the seed, which ORCH_PROPERTY_SEED=seed and n=1 replay).
func propertySeeds(n int) iter.Seq[uint64] {
	base, _ := strconv.ParseUint(os.Getenv("ORCH_PROPERTY_SEED"), 10, 64)
	return func(yield func(uint64) bool) {
		for i := range uint64(n) {
			if !yield(base + i) {
				return
			}
		}
	}
}
