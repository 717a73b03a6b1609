package jobs

// EventLogPath is where, in the warehouse, the merge of kind (scd1_merge or
// scd2_merge) from the change feed of the declared table source into target keeps its
// event log (scd_events.go): a Delta table whose txn under the stage's AppID is the
// last source version whose events it holds, committed before the target's. A
// rollback that restores the target restores the log with it.
func EventLogPath(kind Kind, target, source string) string {
	return eventLogRoot + "/" + string(kind) + "/" + target + "/" + source
}
