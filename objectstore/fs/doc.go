// Package fs is an objectstore.Store on a local directory: the embedded default
// warehouse. A key "a/b/c" is the file <root>/a/b/c.
//
// Invariants:
//   - Every file operation goes through an os.Root opened on the store's directory, so no
//     key (and no symlink inside the tree) can reach a file outside it.
//   - Put writes a temporary file in the object's own directory, fsyncs it, renames it
//     over the key and fsyncs the directory: readers see the old object or the new one,
//     and a crash leaves at worst a stray temporary file, never a partial object.
//   - PutIfAbsent writes the temporary file the same way, then hard-links it to the key;
//     link(2) fails with EEXIST when the key exists, which makes the create atomic and
//     exactly-once across goroutines and processes sharing the directory.
//   - A key appears in a directory (link or rename) only under a shared flock(2) of that
//     directory, and List reads each directory under an exclusive one, so the listing of
//     a directory is a snapshot: a key created while it is read is either listed with
//     every key created before it, or not at all (a plain readdir can return a later file
//     and miss an earlier one). On file systems without flock there is no such lock.
//   - Temporary files are named ".orch-tmp-*". List never shows them, and keys with a
//     segment starting with that prefix are rejected with ErrInvalidKey.
//   - Delete removes directories left empty, up to (not including) the root.
//
// A directory cannot be an object and a file cannot hold objects: "a/b" and "a/b/c"
// cannot both exist (MinIO has the same limit). Get, Stat and Delete treat a directory
// as a missing key.
package fs
