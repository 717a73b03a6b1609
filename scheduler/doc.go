// Package scheduler owns runs: a run is a value (Runner.Run returns its Record), kept in
// a run store under _orchestrator/ in the pipeline's warehouse. A run compiles its
// pipeline (pipelines.Compile), builds each stage attempt's environment, and hands the
// attempt to the runner's Engine (the executor's dispatcher in orchestrator run and
// serve), recording its result, once per attempt. It also owns the
// scheduling of runs: the slot ledger, cron planning with an injected clock (through
// package cron), the overlap and catch-up policies, the lease that lets one of
// several serve processes schedule a warehouse, liveness, notifications, retry, backfill
// and rollback.
//
// Invariants:
//   - A record is stored before its run starts and rewritten whole at every state
//     change, so a crash loses at most the change in flight. Every record has an index
//     entry; the newest runs of a pipeline list without reading all of them.
//   - A scheduled slot's run id is derived from the pipeline and the slot's instant in
//     UTC (SlotID), and its record is created with put-if-absent before it is
//     dispatched: whoever creates it runs it, so a crash, a restart or a second
//     scheduler never runs a slot twice, and a slot never ends without a record (run,
//     or skipped with its reason).
//   - A run's owner heartbeats it; a run whose heartbeat is older than the timeout (or
//     whose process on this host is gone) is marked interrupted with the owner's host,
//     pid and last heartbeat. Its tables are consistent because stages are exactly-once.
//     An owner that finds its run taken over stops it and writes nothing more.
//   - Time comes from the injected clock; the scheduler's loop is driven by Tick, so
//     tests advance time instead of sleeping.
//   - Retention never removes an active run.
package scheduler
