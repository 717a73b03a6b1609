// Package s3 is an objectstore.Store on any S3-compatible service (AWS S3, MinIO, …)
// through minio-go v7. A key "a/b" is the object <Prefix>/a/b in Bucket.
//
// Invariants:
//   - Backend errors become objectstore sentinels here: NoSuchKey / 404 is ErrNotExist,
//     412 PreconditionFailed on a conditional PUT is ErrExist.
//   - PutIfAbsent is one PUT with "If-None-Match: *" and a known Content-Length, never a
//     multipart upload, so the service decides the race atomically. A reader of unknown
//     size is read into memory first.
//   - Transient failures (5xx, 408, 429, timeouts, connection resets) are retried with
//     capped exponential backoff and jitter, a bounded number of times, and never after
//     ctx is done; other 4xx answers are returned at once. minio-go does this for every
//     request whose body can be rewound; PutIfAbsent runs its own loop so that it can tell
//     "our lost-response retry found our own object" from "someone else won".
//   - No call hangs: a connection that moves no byte either way for StallTimeout fails
//     its request (retried as transient), however long a transfer that keeps moving
//     takes.
//   - A Get's body is exactly the response's Content-Length: a body that ends early is
//     an error, never a shorter object. A read that fails transiently midway is resumed
//     from the byte it reached, for the same ETag only, a bounded number of times.
//   - List pages with StartAfter and returns keys in byte order.
package s3
