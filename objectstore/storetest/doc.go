// Package storetest is the one conformance suite for objectstore.Store, in the manner of
// testing/fstest.TestFS: every implementation's tests call Run with a constructor for
// fresh, empty stores, and an implementation is correct when the suite passes.
//
// The suite checks behaviour a caller relies on: bytes survive a round trip (empty and
// 50 MiB objects, size known or not), Put replaces, List is sorted and honours plain
// string prefixes and startAfter, missing keys give ErrNotExist, PutIfAbsent gives
// ErrExist and keeps the old bytes, exactly one of 16 racing creators wins, a listing taken
// while creators race for the next key of a sequence shows no gap, bad keys give
// ErrInvalidKey, a cancelled context stops every call, and a reader that fails midway
// leaves no object behind.
//
// Keys used by the suite never put an object at a key that is also a "directory" of
// another object ("a/b" next to "a/b/c"): a local file system and MinIO cannot hold both,
// and the Delta layout never needs it.
package storetest
