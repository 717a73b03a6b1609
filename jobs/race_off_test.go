//go:build !race

package jobs

// raceEnabled: see race_on_test.go.
const raceEnabled = false
