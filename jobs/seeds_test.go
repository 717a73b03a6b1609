package jobs

import (
	"iter"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// propertySeeds are the n seeds a random-stream property test runs (testenv.PropertySeed).
func propertySeeds(n int) iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for i := range uint64(n) {
			if !yield(testenv.PropertySeed(i)) {
				return
			}
		}
	}
}
