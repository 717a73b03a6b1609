package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

var (
	_ objectstore.Store       = (*Store)(nil)
	_ objectstore.RangeGetter = (*Store)(nil)
)

// Store is an object store in one bucket under one key prefix. It is safe for
// concurrent use.
type Store struct {
	client   *minio.Client // retries transient failures itself (MaxRetries attempts)
	core     minio.Core    // the same client, for GETs that hand back the raw body
	cond     *minio.Client // one attempt per call: PutIfAbsent retries by hand
	bucket   string
	prefix   string // "" or ends with "/"
	attempts int    // bound for PutIfAbsent's own retry loop
	where    string // for messages: s3://bucket/prefix (endpoint)
}

// Sizes that steer how Put uploads.
const (
	// smallObject and below: read into memory and sent as one PUT that minio-go can
	// rewind and retry; it also bounds what an unknown-size Put buffers before it
	// switches to a multipart upload.
	smallObject = 8 << 20
	// partSize for multipart uploads of unknown or unseekable streams: memory held per
	// upload (the ingest writes a file per core at once), and with 10,000 parts at most,
	// a 160 GiB object of unknown size (a known size gets larger parts as needed).
	partSize = 16 << 20
)

func (s *Store) name(key string) string { return s.prefix + key }

// URI returns s3://bucket/prefix/key (objectstore.Locator).
func (s *Store) URI(key string) string {
	return (&url.URL{Scheme: "s3", Host: s.bucket, Path: "/" + strings.TrimSuffix(s.prefix+key, "/")}).String()
}

var _ objectstore.Locator = (*Store)(nil)

// fail wraps err for op on key, turning "no such key" into objectstore.ErrNotExist.
func (s *Store) fail(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("s3 %s %q: %w", op, key, objectstore.ErrNotExist)
	}
	return fmt.Errorf("s3 %s %q in %s: %w", op, key, s.where, err)
}

// check validates the key and the context, the first step of every call.
func check(ctx context.Context, op, key string) error {
	if err := objectstore.ValidateKey(key); err != nil {
		return fmt.Errorf("s3 %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3 %s %q: %w", op, key, err)
	}
	return nil
}

// Get streams the object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// Stat returns the object's size and modification time (whole seconds, as HEAD gives).
func (s *Store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := check(ctx, "stat", key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	info, err := s.client.StatObject(ctx, s.bucket, s.name(key), minio.StatObjectOptions{})
	if err != nil {
		return objectstore.ObjectInfo{}, s.fail("stat", key, err)
	}
	return objectstore.ObjectInfo{Key: key, Size: info.Size, ModTime: info.LastModified}, nil
}

// Put uploads the object, replacing any previous one. Objects up to 8 MiB (and
// unknown-size streams that turn out that small) go as one retryable PUT; larger ones
// as a multipart upload, which S3 publishes only when complete.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := check(ctx, "put", key); err != nil {
		return err
	}
	opts := minio.PutObjectOptions{}
	var body io.Reader
	n := int64(-1)
	_, seekable := r.(io.ReadSeeker)
	_, readerAt := r.(io.ReaderAt)
	switch {
	case size >= 0 && seekable && readerAt:
		// minio-go reads exactly size bytes from the current offset and can rewind it.
		body, n = r, size
	case size >= 0 && size <= smallObject:
		data, err := readAll(ctx, r, size)
		if err != nil {
			return fmt.Errorf("s3 put %q: %w", key, err)
		}
		body, n = bytes.NewReader(data), int64(len(data))
	case size >= 0:
		// Unseekable and large: stream it in parts, checking it yields exactly size bytes.
		body = objectstore.ContextReader(ctx, &exactReader{r: r, left: size})
		opts.PartSize = partSize
		if _, optimal, _, err := minio.OptimalPartInfo(size, 0); err == nil && optimal > partSize {
			opts.PartSize = uint64(optimal)
		}
	default:
		head, err := readAtMost(ctx, r, smallObject)
		if err != nil {
			return fmt.Errorf("s3 put %q: %w", key, err)
		}
		if len(head) <= smallObject {
			body, n = bytes.NewReader(head), int64(len(head))
		} else {
			body = objectstore.ContextReader(ctx, io.MultiReader(bytes.NewReader(head), r))
			opts.PartSize = partSize
		}
	}
	if _, err := s.client.PutObject(ctx, s.bucket, s.name(key), body, n, opts); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("s3 put %q: %w", key, ctx.Err())
		}
		return s.fail("put", key, err)
	}
	return nil
}

// PutIfAbsent creates the object with one conditional PUT ("If-None-Match: *").
//
// It retries transient failures itself. When a retry meets 412, the first attempt may
// have succeeded with its answer lost; the object is then ours if its ETag is our MD5
// (the ETag of a single-part, unencrypted upload). 409 ConditionalRequestConflict (AWS:
// another conditional write to the key is in flight) is retried too, and reported as
// ErrExist once the attempts are used up.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := check(ctx, "put-if-absent", key); err != nil {
		return err
	}
	data, err := readAll(ctx, r, size)
	if err != nil {
		return fmt.Errorf("s3 put-if-absent %q: %w", key, err)
	}
	sum := md5.Sum(data)
	opts := minio.PutObjectOptions{DisableMultipart: true, SendContentMd5: true}
	opts.SetMatchETagExcept("*")
	for attempt := 0; ; attempt++ {
		_, err := s.cond.PutObject(ctx, s.bucket, s.name(key), bytes.NewReader(data), int64(len(data)), opts)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("s3 put-if-absent %q: %w", key, ctx.Err())
		}
		var resp minio.ErrorResponse
		errors.As(err, &resp)
		switch {
		case resp.StatusCode == 412 || resp.Code == "PreconditionFailed":
			if attempt > 0 && s.hasETag(ctx, key, hex.EncodeToString(sum[:])) {
				return nil
			}
			return fmt.Errorf("s3 put-if-absent %q: %w", key, objectstore.ErrExist)
		case resp.StatusCode == 409 && resp.Code == "ConditionalRequestConflict":
			if attempt+1 >= s.attempts {
				return fmt.Errorf("s3 put-if-absent %q: %w (%d attempts met a concurrent conditional write)",
					key, objectstore.ErrExist, s.attempts)
			}
		case !transient(err):
			return s.fail("put-if-absent", key, err)
		case attempt+1 >= s.attempts:
			return fmt.Errorf("s3 put-if-absent %q in %s: giving up after %d attempts: %w", key, s.where, s.attempts, err)
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return fmt.Errorf("s3 put-if-absent %q: %w", key, err)
		}
	}
}

// hasETag reports whether the object exists with the given ETag.
func (s *Store) hasETag(ctx context.Context, key, etag string) bool {
	info, err := s.client.StatObject(ctx, s.bucket, s.name(key), minio.StatObjectOptions{})
	return err == nil && strings.EqualFold(strings.Trim(info.ETag, `"`), etag)
}

// Delete removes the object; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := check(ctx, "delete", key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.name(key), minio.RemoveObjectOptions{})
	if err != nil && !isNotFound(err) {
		return s.fail("delete", key, err)
	}
	return nil
}

// List returns the objects under prefix after startAfter, in byte order. Keys that are
// not valid object keys (such as "dir/" markers other tools create) are skipped.
func (s *Store) List(ctx context.Context, prefix, startAfter string) ([]objectstore.ObjectInfo, error) {
	if err := objectstore.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("s3 list: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3 list %q: %w", prefix, err)
	}
	ctx, cancel := context.WithCancel(ctx) // stops minio-go's paging goroutine on early return
	defer cancel()
	opts := minio.ListObjectsOptions{Prefix: s.name(prefix), Recursive: true}
	if startAfter != "" {
		opts.StartAfter = s.name(startAfter)
	}
	var out []objectstore.ObjectInfo
	for obj := range s.client.ListObjects(ctx, s.bucket, opts) {
		if obj.Err != nil {
			return nil, s.fail("list", prefix, obj.Err)
		}
		key, ok := strings.CutPrefix(obj.Key, s.prefix)
		if !ok || key <= startAfter || !strings.HasPrefix(key, prefix) || objectstore.ValidateKey(key) != nil {
			continue
		}
		out = append(out, objectstore.ObjectInfo{Key: key, Size: obj.Size, ModTime: obj.LastModified})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3 list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b objectstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
