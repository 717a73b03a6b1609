// Package rowtext renders Arrow values as people and JSON readers see them, one way for
// every front end (the CLI's table output, the web's pages and API): exact text
// (decimals with their scale, timestamps in RFC 3339 UTC, a timestamp_ntz without a zone,
// dates as YYYY-MM-DD, binary as base64, structs, lists and maps as JSON) and the JSON
// value (integers and decimals as numbers with all their digits, NaN and infinities as
// strings), and orders them (Key, Compare) for an ORDER BY.
//
// Invariants: every rendering is exact (no value reads back otherwise than it is
// stored); nulls are Value.Null, never a text; it imports no project package.
package rowtext
