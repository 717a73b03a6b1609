// Package executor carries out pipeline stages on an engine: `local` runs a stage's Go
// code in this process (jobs.Stage.Run, unchanged), `spark` turns the stage's plan
// (jobs.Planner) into Delta SQL sent to a Spark cluster over Spark Connect
// (internal/sparkconnect). Both implement Executor: submit, status, logs and cancel,
// idempotent on a task key. A Dispatcher is the scheduler's engine (RunStage): it picks
// the engine per stage (a pipeline's cluster, with locations in their Spark form from
// objectstore/storeurl) and, in a pipeline with any stage on Spark, holds a lease on
// every table a stage writes, so that two engines never commit to one table at once; an
// all-local pipeline runs its stages directly.
//
// Invariants:
//   - Submitting a key twice runs it once; Status of a key this process does not know
//     is read from the target's Delta log (the stage's txn at or past the plan's version
//     means its work is committed), so a restarted orchestrator never submits committed
//     work again. Delta's own txn check skips a repeat that races past it.
//   - On Spark each attempt is one Connect session, released at its end; every
//     statement runs under an operation id recorded in the run's result and in the
//     table lease before it is sent, so cancel (and a later process finding the lease
//     stale) interrupts it on the server.
//   - A table lease has one holder at a time (generations created with put-if-absent);
//     a holder renews it while its stage runs and releases it after; a lease whose
//     holder is gone (its process on this host, or no renewal for the TTL) is taken
//     over, after interrupting the Spark operation it names.
//   - What Spark cannot do exactly as the local stage does, it refuses before writing,
//     saying what and which engine can (late events needing interval splits, quarantine,
//     URL sources, ...).
package executor
