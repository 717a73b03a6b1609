//go:build race

package jobs

// raceEnabled: the race detector slows the property tests tenfold; under it they run a
// few streams each, and scripts/test.sh runs them in full without it (run_properties).
const raceEnabled = true
