package delta

// ForceRangedReads makes scans fetch objects of a store with ranged reads by column
// chunk, however small (as for files past the whole-file limit); the returned func
// undoes it.
func ForceRangedReads() func() {
	old := wholeFileLimit
	wholeFileLimit = 0
	return func() { wholeFileLimit = old }
}

// SetV2SidecarActions sets how many file actions one sidecar of a V2 checkpoint holds
// (0: a classic-named V2 checkpoint with every action inline); the returned func undoes
// it.
func SetV2SidecarActions(n int) func() {
	old := v2SidecarActions
	v2SidecarActions = n
	return func() { v2SidecarActions = old }
}
