// Package keyed is the keyed run: the one loop of every stage that holds a batch by key
// (upsert and snapshot ingest, scd1_merge, scd2_merge). A run reads its input once into
// a Batch, reads the target side (Target), works the batch in passes, each of the
// stage's own pass body, and commits once through a Sink:
//
//	read → Batch (live pass, or key hash range spill files) → Target → Passes → Sink → one commit
//
// In memory is the ordinary case of that loop: one live pass over every key range,
// whose records the stage's Holder took as they were read, the live scan of the target,
// and a direct sink (one MERGE part). A batch that would hold more than its budget hands
// what it holds to spill files (Holder.HandOver) and carries on: every later record goes
// there, by the key hash range of each row; the target is then set aside once by range
// (the rows of the keys the batch may have, a Filter), and each pass takes as many
// consecutive ranges as fit (two passes at once, each at half the budget, for a stage
// whose pass body allows it: BatchOptions.TwoAtOnce), with a parted sink that sets each
// pass's MERGE source aside and merges it in parts at the end (matched rows file by
// file, then the inserts in their order) as ONE commit (delta.MergeInParts).
//
// It owns key encoding (AppendKey: null-safe, values normalised as Value reads them, so
// an int32 key matches an int64 key), the key hash (Hash) and its ranges (Range,
// HashBounds), spill files (Dir, File, Fanout: Arrow IPC streams on local disk; a
// Fanout's ranges share one file, a pass's ranges read back from it as one stream; a
// joining Fanout writes a range's rows of several records as one spill record), the
// target spiller, the gather of rows by place (Gather), the sink and the budget
// (WorkingSet, HoldBudget: the process's soft memory limit while runs with budgets run).
//
// Invariants:
//   - Nothing is read twice: a batch over its budget keeps what it read (handed over),
//     and the target is scanned once (live, or to set it aside).
//   - A key's rows, of the batch and of the target, are all in one range, so a pass
//     decides each key as one pass over everything would: the result (rows, identity
//     values, change feed, counts) does not depend on the budget.
//   - The inserts of a run are merged in the order the stage gives them (ord, ord2),
//     whatever the passes; a target file is named by one MERGE part only.
//   - A run's spill files live in one private directory, removed by Run.Close on every
//     way out.
package keyed
