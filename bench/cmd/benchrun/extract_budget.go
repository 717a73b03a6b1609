package main

import "github.com/orchestrator-io/orchestrator/jobs"

// setBudget sets a stage's memory budget (0: the default). A -baseline build from a tree
// without memory budgets replaces this file with one whose setBudget does nothing.
func setBudget(cfg *jobs.SCD2Config, budget int64) {
	cfg.MemoryBudget = jobs.ByteSize(budget)
}

// setIngestBudget sets an ingest's memory budget (0: the default).
func setIngestBudget(cfg *jobs.IngestConfig, budget int64) {
	cfg.MemoryBudget = jobs.ByteSize(budget)
}

// parseBudget reads a -extract-budget or -snapshot-budget value.
func parseBudget(s string) (int64, error) {
	b, err := jobs.ParseByteSize(s)
	return int64(b), err
}
