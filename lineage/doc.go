// Package lineage makes and sends OpenLineage RunEvents (spec 2-0-2, the version the
// pinned openlineage-python client speaks) for the runs of a pipeline and their stages,
// so that Marquez, DataHub or Dataplex see which run read and wrote which table version.
//
// A pipeline run is a parent OpenLineage run (job "<pipeline>") and each stage a child
// (job "<pipeline>.<stage>") with the parent run facet. Run ids are UUIDs derived from
// the run's id and attempt (and the stage's name), so that a START and its COMPLETE,
// FAIL or ABORT name one run whichever process sends them.
//
// Datasets are named as OpenLineage's naming spec says: a local table is namespace
// "file" and its absolute directory; a table in S3 is namespace "s3://<bucket>" and its
// key prefix; an ingest's source files are their directory (an http(s) source its
// scheme and host, its path, never its query or user). Each table carries its schema
// facet and, where a stage read or wrote a version, the version facet with that Delta
// version; outputs carry column lineage where the stage kind tells it (ingest: source
// columns by name; capture_history: the source's columns; scd2_merge: keys, tracked and
// type 1 columns, the validity interval from sequence_by) and output statistics (rows,
// bytes and files the commit added, read from the commit itself).
//
// Invariants:
//   - Building and sending never fail or block a run: the Client sends in the order
//     given, with retries (go-retryablehttp), and reports each delivery to its caller
//     (the scheduler keeps the result in the run record).
//   - No secret reaches an event: the consumer's URL and API key are the Client's, never
//     an event's; source URLs lose their query and user info.
//   - lineage imports pipelines, jobs, delta and objectstore, never scheduler.
package lineage
