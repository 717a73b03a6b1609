// Package keyindex maps byte-string keys (encoded row keys) to dense ids 0, 1, 2, … in
// the order they were first added. It is the hash table of the MERGE source (delta) and
// of an SCD2 batch (jobs), where a million keys are usual.
//
// It is an open-addressing table of 8-byte slots (the upper half of a key's 64-bit hash
// and its id), at most half full, with the keys back to back in one arena: it allocates
// nothing per key and holds no pointers for the garbage collector to scan. At a million
// keys each access is a cache miss or two; the block calls (AddBlock, LookupBlock) hash
// a block of keys first and then touch every slot, then every key end, then every key
// they will compare, each pass of loads independent of one another, so the processor
// waits on many misses at once instead of one after another. LookupBlock first tries
// the keys in the order they were added (an extract sorted as its table is compared
// key by key with the next one, no hashing, no misses) and turns to hashing when that
// order does not hold.
package keyindex
