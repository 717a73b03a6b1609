// Package arrowx holds the small Arrow helpers that several packages need alike:
// releasing arrays and records, concatenating records, gathering rows by index (the one
// gather every room uses), and reading any integer array as int64. It imports no project package, so that every room may use it.
package arrowx
