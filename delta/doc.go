// Package delta implements the Delta Lake protocol (PROTOCOL.md of delta-io/delta) on any
// objectstore.Store: actions and their JSON shapes, log replay into snapshots, time travel by
// version and timestamp, history, optimistic commits with conflict detection, checkpoints,
// the change data feed, table properties, identity columns, vacuum and log cleanup, and the
// Parquet data files themselves, read and written as Arrow records.
//
// Invariants:
//   - A commit is a put-if-absent of _delta_log/<version>.json; nothing else makes a version
//     visible, so a crash before it leaves the table unchanged (orphan data files at most).
//   - Data files are never overwritten or reused.
//   - A reader refuses a table whose protocol needs a feature it does not implement, with
//     "unsupported table feature: <name>", and a log with a missing version, naming it.
//   - Every operation that depends on time takes its clock from the table's options, so
//     retention and timestamp travel are testable without sleeping.
package delta
