package delta

import (
	"os"
	"strconv"
)

// propertySeedBase moves the random property tests to other seeds: ORCH_PROPERTY_SEED=N
// adds N to each seed (0: CI's), to sweep more cases by hand; a failure names the seed.
func propertySeedBase() uint64 {
	base, _ := strconv.ParseUint(os.Getenv("ORCH_PROPERTY_SEED"), 10, 64)
	return base
}

// PropertySeedBase is propertySeedBase for the package's external tests.
var PropertySeedBase = propertySeedBase
