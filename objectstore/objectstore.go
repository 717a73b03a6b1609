package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Sentinel errors. Implementations wrap them (fmt.Errorf("...: %w", ErrNotExist)) so that
// callers can test with errors.Is.
var (
	// ErrNotExist: the key does not exist (Get, Stat, GetRange).
	ErrNotExist = errors.New("object does not exist")
	// ErrExist: PutIfAbsent found the key already present.
	ErrExist = errors.New("object already exists")
	// ErrInvalidKey: the key breaks the key rules (see ValidateKey).
	ErrInvalidKey = errors.New("invalid object key")
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string    // full key, relative to the store root
	Size    int64     // bytes
	ModTime time.Time // last modification time as the backend reports it
}

// Store is a flat key/value object store with atomic whole-object writes.
//
// Contract (checked by objectstore/storetest for every implementation):
//   - Get streams an object; a missing key gives ErrNotExist. The caller closes the reader.
//   - Put writes an object atomically, replacing any previous one. size is the number of
//     bytes r yields, or -1 when unknown.
//   - PutIfAbsent writes an object atomically only if the key does not exist; otherwise it
//     returns ErrExist and leaves the existing object untouched. Of several concurrent
//     callers on one key exactly one succeeds.
//   - List returns every object whose key starts with prefix (a plain string prefix, as in
//     S3: "a/b" matches "a/b/c" and "a/bc") and sorts after startAfter (when not empty),
//     in ascending byte order of keys. Implementations page internally. It shows every
//     object written before it began; of objects created while it runs, it never shows
//     one without every object created (in the same "directory", the key up to its last
//     slash) before that one began, so a listed log version implies the earlier ones.
//   - Stat returns an object's info; a missing key gives ErrNotExist.
//   - Delete removes an object; deleting a missing key is not an error.
//
// Every method honours ctx cancellation and validates keys with ValidateKey.
type Store interface {
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error
	List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error)
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	Delete(ctx context.Context, key string) error
}

// RangeGetter is an optional extension: read length bytes of an object starting at offset
// (length < 0 means to the end). Parquet readers use it to fetch footers and column chunks
// without downloading whole files. Every implementation in this module provides it.
//
// A range that runs past the end of the object is cut short there; an offset at or past
// the end gives an empty reader, not an error. A negative offset is an error. A missing
// key gives ErrNotExist, as for Get.
type RangeGetter interface {
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
}

// ReaderAtOpener is an optional extension for stores whose objects can be read at any
// offset cheaply (a local file): OpenReaderAt opens an object for io.ReaderAt reads and
// returns its size. Parquet readers then read pages where they lie instead of fetching
// whole column chunks into memory first. A missing key gives ErrNotExist, as for Get.
type ReaderAtOpener interface {
	OpenReaderAt(ctx context.Context, key string) (ReaderAtCloser, int64, error)
}

// Locator is an optional extension for stores whose keys have a place outside the
// process: URI returns the absolute URI of a key ("" is the store's own root), with its
// path percent-encoded: file:///abs/dir/key for a local directory, s3://bucket/prefix/key
// for S3. Delta logs name files by such URIs; a reader uses URI to tell which of them
// the store holds.
type Locator interface {
	URI(key string) string
}

// ReaderAtCloser is an object opened by ReaderAtOpener.
type ReaderAtCloser interface {
	io.ReaderAt
	io.Closer
}

// ValidateKey checks the key rules: not empty, no leading or trailing slash, no empty,
// "." or ".." segment, no backslash and no NUL byte.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w %q: contains a backslash or NUL byte", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w %q: empty path segment (leading, trailing or double slash)", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w %q: %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

// ValidatePrefix checks a List prefix: empty, or a key with an optional trailing slash.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidateKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	return nil
}

// ContextReader returns a reader of r that fails its reads once ctx is done, so that a
// long copy (a Put's upload, a Get's body) stops on cancellation. The backends share it.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return &ctxReader{ctx: ctx, r: r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
