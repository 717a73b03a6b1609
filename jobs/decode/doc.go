// Package decode turns source files (CSV, NDJSON, Parquet) into Arrow record batches of a
// declared Delta schema, for the ingest stage.
//
// It owns the reading of file formats and the parsing of text values into typed columns:
// integers with range checks, floats, booleans, dates, timestamps with zone handling,
// decimals with exact scale, strings checked as UTF-8. It does not know about tables,
// object stores or commits; the caller opens the file and writes the batches.
//
// Invariants:
//   - A value is converted exactly or it is an error: decimals are never rounded,
//     timestamps never lose sub-microsecond digits, integers never wrap.
//   - Every bad record is reported with the file, the 1-based physical line where it
//     starts (counting the header), the column's name and 1-based position, the value as
//     written and the expected type, e.g.
//     `sales/2026-01-14.csv:17: column amount (5): "12,50" is not a decimal(10,2)`.
//     The value is escaped once: a CSV field (without its quotes) or a JSON string's
//     content is quoted; another JSON value is its JSON text, unquoted (5 is not "5").
//   - With Options.LineColumn every row says where it comes from: the line a bad record
//     there would be reported on (Parquet: the row number), exact in parallel parsing
//     and when Skip drops records around it.
//   - In Skip mode a bad record is dropped whole and reported; the other rows come out
//     exactly as in a clean file. Nothing is dropped silently.
//   - Nothing is filled silently either: a declared column that a CSV header or a Parquet
//     file's schema lacks is an error at NewReader naming every such column and its type,
//     unless Options.AllowMissingColumns is set, and then only a nullable column is
//     filled with nulls and Reader.MissingColumns lists it. NDJSON decides per line
//     instead, since JSON writers routinely omit keys whose value is null: a key a line
//     lacks is null on that line (an error if the column is not nullable).
//   - Memory is bounded by the batch size (a few batches in flight when CSV is parsed in
//     parallel), not by the file size; batches come out in file order. A CSV chunk is cut
//     early at 128 MiB, and a record (CSV) or line (NDJSON) over 64 MiB is an error.
//   - CSV parsing is allocation-free per value on the fast paths (numbers, decimals up to
//     precision 18 in int64 arithmetic, above that in two 64-bit limbs, ISO dates and
//     timestamps by digit arithmetic, no time.Parse), and runs on all cores. A chunk
//     without quotes is parsed a column at a time into the batch's buffers (csv_bulk.go);
//     anything irregular in it sends the chunk back to the record-by-record parser, so
//     batches, errors and skipped records never depend on which path read them.
package decode
