// Package delta implements the Delta Lake protocol (PROTOCOL.md of delta-io/delta) on any
// objectstore.Store: actions and their JSON shapes, log replay into snapshots, time travel by
// version and timestamp, history, optimistic commits with conflict detection, checkpoints,
// the change data feed, table properties, identity columns, vacuum and log cleanup, and the
// Parquet data files themselves, read and written as Arrow records (the codec below Arrow:
// footers, splices, INT96, the string decoder and the flat writer, is internal/parquet's).
//
// Invariants:
//   - A commit is a put-if-absent of _delta_log/<version>.json; nothing else makes a version
//     visible, so a crash before it leaves the table unchanged (orphan data files at most).
//   - Data files are never overwritten or reused.
//   - A reader refuses a table whose protocol needs a feature it does not implement, with
//     "unsupported table feature: <name>", and a log with a missing version, naming it.
//   - Damage is refused, naming the file: a commit file that is empty or has a line that
//     is not one JSON object, and a data file whose size is not its add's. A checkpoint
//     that cannot be read, or that disagrees with _last_checkpoint about its size or its
//     number of adds, is skipped for an older one or the JSON commits when they exist.
//     A writer's commit needs the versions before it read, so nothing lands on top of a
//     version nobody can read.
//   - File paths read from the log or committed are canonical (paths.go): percent-decoded
//     and re-encoded one way, file: forms equal, an absolute URI under the table's location
//     (objectstore.Locator) relative; every comparison of files uses that one spelling. An
//     absolute path is read only from the store that holds its location.
//   - Statistics prune only what they prove (delta/expr StatBounds): they are read
//     in the column's own type as bounds, widened where writers round or truncate them.
//   - Every operation that depends on time takes its clock from the table's options, so
//     retention and timestamp travel are testable without sleeping.
//
// # Tables, snapshots and commits
//
// A Table is a root (a key prefix, "" for the store root) inside an objectstore.Store:
//
//	tbl, err := delta.Open(ctx, store, "warehouse/sales", delta.Options{})   // loads the latest snapshot
//	tbl, err := delta.Create(ctx, store, root, delta.CreateOptions{Schema: s, PartitionColumns: []string{"day"}}, opts)
//
// Options carries the clock (Now), engineInfo, userName and a logger; CreateOptions the
// schema, partition columns, properties (metaData.configuration), name and description.
// Create picks the protocol (1,2), or (1,7) with explicit writer features for change data
// feed and identity columns, or (3,7) with timestampNtz.
//
// Snapshots are immutable: Table.Snapshot (latest; later calls only read the new commits),
// SnapshotAt(version), SnapshotAsOf(time) (in-commit timestamps when enabled, else commit
// file mtimes made monotonic) and VersionAsOf. A snapshot gives Version, Protocol, Metadata,
// Schema, PartitionColumns, Properties, Files (live adds sorted by path), Tombstones,
// TxnVersion(appID), Timestamp, NumRecords and the property helpers (CheckpointInterval,
// LogRetention, DeletedFileRetention, ChangeDataFeedEnabled, AppendOnly). Loading uses the
// newest complete checkpoint at or before the version (classic or multi-part;
// _last_checkpoint is only a hint) and the JSON commits after it.
//
// Writes go through a Transaction built on the snapshot they read:
//
//	tx := tbl.NewTransaction(snap, delta.TxOptions{Operation: "WRITE", Lineage: lin})
//	tx.AddFiles(adds...)          // from the data writer
//	tx.ReadWholeTable()           // an overwrite depends on everything it replaces
//	tx.RemoveAdds(snap.Files()...)
//	tx.SetTxn(appID, batch)       // exactly-once progress, in the same commit
//	version, err := tx.Commit(ctx)
//
// Commit runs the writer protocol gate, writes commitInfo first and the actions after it
// with put-if-absent, and on a lost race checks the winning commits with the conflict rules
// of Delta's Serializable isolation: appends never conflict with appends; a winner's add in
// what the transaction read (ReadWholeTable, ReadPartitions), a winner's remove of a file it
// read (ReadFiles, RemoveFiles), both removing one file, the same txn appId, or a metadata or
// protocol change make Commit return a *ConflictError (errors.As). Otherwise it retries at
// the next version. Every delta.checkpointInterval versions (default 10) the committer
// writes a classic checkpoint and _last_checkpoint; a failure there is logged and reported
// by Transaction.CheckpointError, never as a failed commit.
//
// # Table features (docs/delta-features.md)
//
// V2 checkpoints (delta.checkpointPolicy=v2) are read in every layout and written
// UUID-named with their file actions in sidecars (checkpoint_v2.go); log cleanup deletes
// sidecars no checkpoint left references. In-commit timestamps
// (delta.enableInCommitTimestamps) are written first in commitInfo, max(now, previous + 1
// ms), and are the commit time everywhere from their enablement version on. Clustered
// tables (CreateOptions.ClusterBy, clustering.go) and every metadata domain are kept as
// they are; files added need statistics on the clustering columns. Row tracking
// (rowtracking.go) assigns baseRowId and defaultRowCommitVersion to every file added and
// records the high-water mark. VARIANT columns are read as Arrow's variant extension
// type, never written. VOID (NullType) columns read as Arrow nulls and are left out of
// the data files written, as Spark does.
//
// Table.History lists commitInfo newest first (the DESCRIBE HISTORY equivalent, with
// orchestrator's Lineage; a version's time is its in-commit timestamp only where the
// table enables them, else its commit file's time made monotonic); Table.SetProperties is ALTER TABLE SET/UNSET TBLPROPERTIES.
// Errors for unsupported protocols are *UnsupportedFeatureError.
//
// # Changing rows
//
// Table.Delete, Table.Update and Table.Merge rewrite data files copy-on-write in one commit
// with Spark's commitInfo (operation, operationParameters, operationMetrics). Only files
// whose partition values and stats allow a match are read, streamed record by record, and
// MERGE rewrites up to MergeOptions.Parallelism files at once (it prunes by the min/max of
// its key columns against the source keys, which it holds in memory); a file with no
// changed row is left alone. With delta.enableChangeDataFeed the rewrites
// write _change_data files (delete, update_preimage/update_postimage, and inserts when the
// commit has change files); copied rows never appear in the feed. MergeOptions.Txn and
// MergeOptions.Tx put exactly-once progress and caller-prepared actions (identity values
// from Transaction.AllocateIdentity) in the same commit. Table.Append and
// Transaction.AssignIdentity generate identity column values past the high-water mark,
// which the same commit's metaData records (dml.go, merge.go, identity.go).
package delta
