package delta

// LookupMetrics are one fact_load lookup's counts in a fact table commit's commitInfo
// (under "orchestrator"."lookups"): the facts of that commit's run keyed to a real
// dimension version, to the unknown member, to an inferred member, and quarantined
// for want of a version.
type LookupMetrics struct {
	Key                 string `json:"key"`
	Dimension           string `json:"dimension"`
	NumRealKeys         int64  `json:"numRealKeys"`
	NumUnknownKeys      int64  `json:"numUnknownKeys"`
	NumInferredKeys     int64  `json:"numInferredKeys"`
	NumQuarantinedFacts int64  `json:"numQuarantinedFacts"`
}
