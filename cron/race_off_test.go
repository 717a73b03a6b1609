//go:build !race

package cron

// raceEnabled: see race_on_test.go.
const raceEnabled = false
