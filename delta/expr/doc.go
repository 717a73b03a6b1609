// Package expr is the predicate language of tables: row conditions (comparisons of a
// column with literals, IN lists, null checks, AND and OR) built in Go (Eq, In, And...)
// or parsed from the SQL subset a user writes (Parse: the CLI's --where, the web page's
// filters, a stage's delete_when), their SQL text (Predicate.String, which Parse reads
// back and Spark SQL accepts), and their evaluation: Bind resolves a predicate against a
// schema and converts its literals to the columns' types (Value, the typed scalar also
// used for partition values and statistics); a Bound predicate tests record batches
// (Eval, KeptRows, Matcher) and tells whether a data file can hold a matching row from
// its partition values and statistics (MayMatchFile). Assign computes the new values of
// an UPDATE or MERGE assignment (a literal, Col, or an ExprFunc).
//
// It knows a table only through its schema (package delta/schema) and what a caller
// says of a field (FieldInfo) and of a file (File, Stats); package delta reads logs,
// statistics JSON and column mapping, and uses this package to prune and filter.
//
// Invariants: SQL three-valued logic (a comparison with null is Unknown, and only True
// keeps a row); a file is skipped only when its partition values or statistics prove no
// row can match (statistics are widened for the rounding and truncation writers apply);
// Parse(p.String()) is p.
package expr
