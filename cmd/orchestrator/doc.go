// Command orchestrator runs YAML data pipelines over Delta Lake tables on local disk or S3
// and answers questions about the tables: their history, their rows at any version or
// time, their properties. Run "orchestrator help" for the commands.
//
// This package owns the command line: the command tree (rootCommand; a command is an
// entry there, each with its own flag.FlagSet and --help text), how TABLE arguments
// resolve to a store and a table root (table.go), and how results print (output.go,
// values.go). main only adds the process: signals (SIGINT, SIGTERM cancel the context
// that every command gets) and the exit code.
//
// Invariants:
//   - Exit codes: 0 success, 1 failure, 2 usage error. A usage error prints the message
//     and the command's usage to stderr; --help prints the usage to stdout and exits 0.
//   - Results go to stdout, and only results: messages, warnings and errors go to stderr,
//     so `--format csv` or `--format json` output can be piped as it is.
//   - --format text aligns columns (numbers right-aligned, NULL for null), csv is RFC 4180
//     with a header row (null is an empty field), json is JSON Lines: one object per row,
//     keys in column order (null is null). Text is aligned in blocks of 1000 rows and CSV
//     and JSON stream, so memory does not grow with the table.
//   - Values print exactly: decimals keep their scale, timestamps are RFC 3339 in UTC,
//     integers and decimals are JSON numbers with every digit (see values.go).
//   - run keeps no global state, so tests call it in-process many times.
package main
