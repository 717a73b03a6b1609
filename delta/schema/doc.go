// Package schema is Delta's type system: the data types of a table schema and its
// schemaString JSON form (Parse, StructType.SchemaString), their Arrow form (ArrowSchema,
// FromArrow), the lenient cast of what data files hold to the table's types (Cast: INT96
// and millisecond timestamps, narrower integers, other decimal layouts), and the strict
// conforming of what a writer is given (Conform: NOT NULL checks, nested field order and
// names). It knows nothing of logs, files or tables; package delta re-exports its types.
//
// Invariants: a schema that Parse accepts renders back to the same schemaString; names
// are case-insensitive and unique within a struct; a timestamp is microseconds in UTC,
// a timestamp_ntz microseconds without a zone.
package schema
