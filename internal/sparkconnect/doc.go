// Package sparkconnect is the project's small client of the Spark Connect protocol: a
// connection to a Connect server (sc://host:port), sessions, SQL statements with their
// results as Go rows, session confs, and interrupting a running operation.
//
// The gRPC stubs in pb/ are generated from the .proto files inside Spark's Connect jar
// (scripts/gen-sparkconnect.sh; committed, so a build needs no protoc). We talk to the
// server through them rather than through github.com/apache/spark-connect-go, whose
// client cannot interrupt a running operation (its stubs and session id are internal):
// a cancelled Go context left the job running on the server, holding its cores.
//
// Invariants:
//   - Every statement runs under an operation id the caller knows before it starts, so
//     it can be interrupted from anywhere (Session.Interrupt), also after this process
//     died (the id and session id are enough: Interrupt with a new Client).
//   - A statement whose context ends is interrupted on the server before Execute
//     returns; Execute never leaves an operation running behind a returned error it
//     knows of.
//   - Results are held whole in memory: statements here return a few rows (MERGE
//     metrics, a history row, a count), never a table. Messages up to MaxMessageBytes
//     are accepted.
//
// It imports no project package.
package sparkconnect
