// Package storeurl opens an objectstore.Store from a URL, so configuration, flags and
// pipeline files name a warehouse with one string:
//
//	/abs/dir, rel/dir, file:///abs/dir   a local directory (objectstore/fs), created if missing
//	mem://, mem://name                   in memory (objectstore/mem); the same name gives the
//	                                     same store within one process, no name a fresh one
//	s3://bucket/prefix (or s3a://)       S3-compatible (objectstore/s3): endpoint, region and
//	                                     credentials from Options, else the AWS_* variables
//
// Unknown schemes are errors that list the known ones.
package storeurl
