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
// The stages that hold a batch by key (upsert and snapshot ingest, scd1_merge,
// scd2_merge) run one loop, the keyed run (package jobs/internal/keyed): the input is
// read once into a keyed batch, the target side is read, the stage's own pass body
// decides the keys of each pass and gives its MERGE source to one sink, and ONE commit
// (delta.MergeInParts, with the stage's txn; an upsert without sequence_by commits
// each file) ends it. In memory is the ordinary case: one pass over every key range,
// the batch as it was read and the live scan of the target, one MERGE part. Memory is
// bounded by a budget (memory_budget, else Env.MemoryBudget, else 1 GiB): a batch that
// would hold more hands what it holds to local spill files (Arrow IPC, in a private
// directory under Env.SpillDir removed on every way out) by key hash range and carries
// on; the target is then set aside once by range, and each pass takes as many
// consecutive ranges as fit. A key's events and stored rows are all in one range, so
// each key is decided as in memory; the passes' MERGE source rows go to spill files
// and are merged in parts (the matched rows file by file, then the inserts in the
// order one MERGE of the batch inserts them), so identity values, rows, the change
// feed and the event log are the in-memory ones, and exactly-once holds as it does
// there. No stage reads its input twice. The run reports each pass over spill files and
// each MERGE part as progress (Env.Progress); its spill directory names its owner
// (internal/spilldir), so one a killed process left is swept. The first snapshot into
// an empty table checks its keys on the same loop and appends its rows as they are
// decoded. A budget is spent only as the batch needs it: the stages' estimates of what
// a held row costs are measured (BenchmarkHeldRowCost), and a pass plans to hold three
// quarters of the budget, the process's memory limit keeping the garbage within the
// rest.
package jobs
