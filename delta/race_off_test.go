//go:build !race

package delta_test

const raceEnabled = false
