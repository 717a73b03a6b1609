//go:build race

package cron

// raceEnabled: the race detector slows the planner's property tenfold (it is one
// goroutine's arithmetic); under it the property runs a fifth of its expressions, and
// the go test run without -race runs them all.
const raceEnabled = true
