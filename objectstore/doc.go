// Package objectstore owns the storage contract every other package writes through: the
// Store interface, the rules for keys, and the sentinel errors backends are mapped to.
//
// Implementations live in sub-packages, one per backend: fs (a local directory, the
// embedded default), mem (in memory, for tests and scratch) and s3 (any S3-compatible
// store through minio-go). storeurl opens one of them from a URL. storetest is the one
// conformance suite that every implementation must pass.
//
// Invariants:
//   - Keys are slash-separated, relative, and never contain empty, "." or ".." segments;
//     a bad key is an error, never a path outside the store's root.
//   - Put and PutIfAbsent are atomic: a reader sees the whole object or nothing.
//   - PutIfAbsent is the only primitive the Delta log needs for atomic commits: exactly one
//     of several concurrent creators of a key succeeds, the others get ErrExist.
//   - Backend errors are turned into ErrNotExist / ErrExist at the adapter, so callers use
//     errors.Is and never a backend's own error type.
package objectstore
