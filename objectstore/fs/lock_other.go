//go:build !unix

package fs

import "os"

// flock is a no-op where flock(2) does not exist: List may then miss a key created in a
// directory while it reads that directory.
func flock(*os.File, int) error { return nil }

const (
	lockShared = iota
	lockExclusive
	unlock
)
