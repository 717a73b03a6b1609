// Package faultstore wraps an objectstore.Store and makes chosen operations fail, to prove
// that every stage and every Delta commit survives a crash at any store operation: fail
// the Nth operation (and optionally every one after it, as a process that died would), or
// every write below a key prefix. Tests only; it is not wired into the binary.
package faultstore
