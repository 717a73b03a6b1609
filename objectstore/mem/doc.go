// Package mem is an in-memory objectstore.Store for tests and scratch work: nothing is
// persisted, everything is lost when the Store is garbage collected.
//
// Invariants: a stored object's bytes are never modified after Put or PutIfAbsent
// returns (readers share them without copying); writes are whole-object and atomic
// because the object only enters the map, under the mutex, once fully read;
// modification times come from the configured clock, so tests can pin them.
package mem
