// Package storeurl is the one place that reads locations: configuration, flags and
// pipeline files name a warehouse, a table or a source directory with one string, and
// storeurl opens the objectstore.Store behind it:
//
//	/abs/dir, rel/dir, file:///abs/dir   a local directory (objectstore/fs), created if missing
//	mem://, mem://name                   in memory (objectstore/mem)
//	s3://bucket/prefix (or s3a://)       S3-compatible (objectstore/s3): endpoint, region and
//	                                     credentials from Options, else the AWS_* variables
//
// Open opens a new store. A process opens its stores through a Stores, a value it holds
// (a CLI command, serve), which opens each location once and keeps it: the same location
// and settings give the same store, and a mem:// store is shared by name within that
// Stores only, never through process-wide state. Stores.Dir opens a source directory
// (the store and the key prefix in it), Stores.Table a table location (the store one
// level above and the table's root in it). Join, Anchor, URI, Local and InProcess read
// and build locations without opening anything.
//
// Unknown schemes are errors that list the known ones.
package storeurl
