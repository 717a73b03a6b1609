// Command deltatool is the Go side of the interoperability suite in interop/: a small,
// scriptable front end to our Delta reader and writer that the Python tests (pytest, with
// delta-rs and Spark as reference implementations) call as a subprocess. Data crosses the
// process boundary as Arrow IPC files, which keep every type exact.
//
// Usage (TABLE is a directory, file:///dir or s3://bucket/prefix; S3 settings come from the
// standard AWS_* environment variables, see objectstore/s3.ConfigFromEnv):
//
//	deltatool read --table TABLE [--version N | --timestamp RFC3339] [--where EXPR] --out FILE.arrow
//	deltatool write --table TABLE --in FILE.arrow [--mode append|overwrite]
//	          [--partition-by a,b | --cluster-by a,b] [--property k=v ...] [--row-group-bytes N]
//	deltatool create --table TABLE --schema-from FILE.arrow [--identity name[:start[:step]]]
//	          [--partition-by a,b] [--property k=v ...]
//	deltatool append --table TABLE --in FILE.arrow
//	deltatool changes --table TABLE --from N [--to M] --out FILE.arrow
//	deltatool update --table TABLE [--where EXPR] --set col=literal ...
//	deltatool delete --table TABLE --where EXPR
//	deltatool merge --table TABLE --in FILE.arrow --on k1,k2 [--delete-when EXPR] [--by-position]
//	deltatool restore --table TABLE --version N
//	deltatool vacuum --table TABLE [--retain DURATION] [--force]
//	deltatool set-property --table TABLE [--property k=v ...] [--unset k ...]
//	deltatool alter --table TABLE [--add name:type ...] [--widen name:type ...]
//	          [--rename old:new ...] [--drop name ...] [--mapping name]
//	deltatool checkpoint --table TABLE
//	deltatool history --table TABLE
//	deltatool version --table TABLE
//	deltatool ensure-bucket --table s3://bucket/prefix
//
// read writes the snapshot's rows, partition columns included, with the schema the table
// declares (delta.ArrowSchema). write creates the table when TABLE has no Delta log
// (version 0, CREATE TABLE, with the partition columns and properties given) and then
// commits the file's records as one WRITE (append, or overwrite of every live file).
// write, set-property and checkpoint print the version they committed or checkpointed,
// version prints the latest version, ensure-bucket creates a missing bucket, and history prints DESCRIBE HISTORY as a JSON array,
// oldest version first. Errors go to stderr with exit status 1 (2 for usage errors).
//
// The table commands (ops.go) wrap delta.Table one to one: create makes an empty table
// with the Arrow file's schema, plus a GENERATED ALWAYS AS IDENTITY long column in front
// when --identity names a column the file lacks; append is Table.Append (identity values
// generated); changes is Table.Changes (table_changes: data columns, _change_type,
// _commit_version, _commit_timestamp); update and delete take expr.Parse
// predicates (update's literals: 'text', numbers, true, false, null); merge is UPDATE SET *
// / INSERT * on the key columns, with an optional WHEN MATCHED AND EXPR THEN DELETE first
// (EXPR names source.col and target.col); with --by-position it joins the source to the
// table itself and hands the MERGE each match's file and row and the matched rows
// (MergeOptions.Positions with FileMatches.Rows), as the scd2_merge stage does; restore is RESTORE TO VERSION AS OF; vacuum uses
// the real clock and prints {filesDeleted, bytesDeleted, startVersion, endVersion} as JSON.
// alter adds nullable columns, widens types, renames columns and turns column mapping
// on in one schema evolution (delta.PlanEvolution, Table.Evolve: one metadata-only
// commit), then drops columns (Table.DropColumns) in another; read --where filters the
// scan and prints its file and row group counts ({filesTotal, filesPruned, filesRead,
// rowGroupsPruned}) as JSON.
// Every other command prints the version it committed.
//
// It is a test helper, not the product's CLI (cmd/orchestrator): it exposes the library
// directly so that the suite can exercise it before the CLI has every command.
package main
