package testenv

import (
	"os"
	"strconv"
)

// PropertySeed is the seed of case i of a random property test: i, or with
// ORCH_PROPERTY_SEED=base, base+i, to sweep other cases than CI's by hand (a failure
// names its seed; ORCH_PROPERTY_SEED=seed replays it as case 0).
func PropertySeed(i uint64) uint64 {
	base, _ := strconv.ParseUint(os.Getenv("ORCH_PROPERTY_SEED"), 10, 64)
	return base + i
}
