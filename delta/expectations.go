package delta

// ExpectationMetrics are one row check's counts in a commit's commitInfo (under
// "orchestrator"."expectations"), named like Spark's operationMetrics: the rows checked,
// those that passed and those that violated it, and what became of the violators
// (onViolation: warn kept them, drop left them out, quarantine wrote them to another
// table; a fail never commits).
type ExpectationMetrics struct {
	Name           string `json:"name"`
	OnViolation    string `json:"onViolation"`
	NumCheckedRows int64  `json:"numCheckedRows"`
	NumPassedRows  int64  `json:"numPassedRows"`
	NumFailedRows  int64  `json:"numFailedRows"`
}
