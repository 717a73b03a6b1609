//go:build race

package delta_test

// raceEnabled: the race detector slows the property tests tenfold; under it they run a
// few seeds, and scripts/test.sh runs them in full without it (run_properties).
const raceEnabled = true
