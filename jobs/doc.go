// Package jobs owns the stage kinds a pipeline is made of: ingest (bronze loads from files
// or URLs), capture_history (copy a table's change feed into a permanent history table),
// scd2_merge and scd1_merge (slowly changing dimensions), and vacuum. Each kind has a typed,
// validated config (this file's types are what a pipeline's YAML decodes into) and a Run
// that reads and writes tables through package delta.
//
// Invariants:
//   - Every stage is exactly-once across crashes and reruns: its progress (files ingested,
//     source versions captured, batches merged) is committed in the same Delta commit as its
//     data, as a txn action, never in a side file.
//   - Every stage kind can say what a run will do without doing it (Planner): versions,
//     keys, columns, predicates, retention and the txn it commits, decided from the
//     tables' logs the way its Run decides them; a plan whose txn is committed is
//     UpToDate, so an engine that carries plans out (package executor) never repeats
//     committed work.
//   - A config that fails Validate never runs; every problem is reported, each naming the
//     field it concerns, so the pipeline loader can point at the YAML line and column.
//   - A stage works only on tables that match their declarations (CheckTable: columns
//     with type, nullability and identity, partition columns, declared properties); a
//     difference refuses the table with a *DifferenceError naming each difference and
//     what converges it, before anything is written.
//
// Memory is bounded by a budget, not by the batch (budget.go, spill.go, merge_parts.go).
// The stages that hold a batch by key (upsert and snapshot ingest, scd1_merge,
// scd2_merge) work in memory while what they hold stays within half their budget
// (memory_budget, else Env.MemoryBudget, else 1 GiB; the Go heap grows to twice its live
// data). A larger batch is set aside as it is read, in local spill files (Arrow IPC, in
// a private directory under Env.SpillDir removed on every way out), by key hash range;
// so is what the stage reads of the target. Each pass then takes as many consecutive
// ranges as fit and runs the in-memory code on them: a key's events and stored rows are
// all in one range, so each key is decided exactly as in memory. The passes' MERGE
// source rows go to spill files too, and one MERGE in parts (delta.MergeInParts) applies
// them in ONE commit with the stage's txn: the matched rows file by file, then the
// inserts in the order the in-memory MERGE inserts them, so identity values, rows, the
// change feed and the event log are the in-memory path's, and exactly-once holds as it
// does there. A batch that fits takes the in-memory path unchanged.
package jobs
