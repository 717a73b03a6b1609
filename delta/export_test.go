package delta

// ForceRangedReads makes scans fetch objects of a store with ranged reads by column
// chunk, however small (as for files past the whole-file limit); the returned func
// undoes it.
func ForceRangedReads() func() {
	old := wholeFileLimit
	wholeFileLimit = 0
	return func() { wholeFileLimit = old }
}
