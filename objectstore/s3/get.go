package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
)

// GetRange streams length bytes from offset (length < 0: to the end).
//
// The body must be exactly as long as the response's Content-Length: one that ends
// early is an error, never a short object. A read that fails transiently midway (a
// reset, a timeout, a cut response) is resumed from where it stopped with a ranged GET
// of the same ETag, a bounded number of times; if the object was replaced meanwhile the
// read fails.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := check(ctx, "get", key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("s3 get %q: negative offset %d", key, offset)
	}
	if length == 0 {
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	end := int64(-1) // exclusive; -1: the object's end
	if length > 0 {
		end = offset + length
	}
	body, info, err := s.get(ctx, key, offset, end, "")
	if err != nil {
		var resp minio.ErrorResponse
		if errors.As(err, &resp) && (resp.Code == "InvalidRange" || resp.StatusCode == 416) {
			// The range starts at or past the end: empty, if the object exists at all.
			if _, err := s.Stat(ctx, key); err != nil {
				return nil, err
			}
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, s.fail("get", key, err)
	}
	r := &objectReader{ctx: ctx, s: s, key: key, etag: info.ETag, body: body, off: offset, end: -1}
	if info.Size >= 0 {
		r.end = offset + info.Size // what this response promises (a range is cut at the object's end)
	}
	return r, nil
}

// get sends one GET of [offset, end) (end < 0: to the object's end), of the given ETag
// when etag is set.
func (s *Store) get(ctx context.Context, key string, offset, end int64, etag string) (io.ReadCloser, minio.ObjectInfo, error) {
	var opts minio.GetObjectOptions
	var err error
	switch {
	case end > 0:
		err = opts.SetRange(offset, end-1)
	case offset > 0:
		err = opts.SetRange(offset, 0) // bytes=offset-
	}
	if err == nil && etag != "" {
		err = opts.SetMatchETag(etag)
	}
	if err != nil {
		return nil, minio.ObjectInfo{}, err
	}
	body, info, _, err := s.core.GetObject(ctx, s.bucket, s.name(key), opts)
	return body, info, err
}

// objectReader reads an object's body, checks its length and resumes failed reads.
type objectReader struct {
	ctx     context.Context
	s       *Store
	key     string
	etag    string
	body    io.ReadCloser
	off     int64 // offset of the next byte
	end     int64 // offset after the last byte promised, or -1
	resumes int
	err     error // sticky
}

func (r *objectReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for {
		n, err := r.body.Read(p)
		r.off += int64(n)
		switch {
		case err == nil:
			return n, nil
		case err == io.EOF && (r.end < 0 || r.off == r.end):
			r.err = io.EOF
			return n, io.EOF
		case err == io.EOF:
			err = fmt.Errorf("%w: the body ended at byte %d of %d", io.ErrUnexpectedEOF, r.off, r.end)
		}
		if rerr := r.resume(err); rerr != nil {
			r.err = rerr
			return n, rerr
		}
		if n > 0 {
			return n, nil
		}
	}
}

// resume opens the rest of the object after a failed read, or says why it cannot.
func (r *objectReader) resume(cause error) error {
	fail := func(err error) error {
		return fmt.Errorf("s3 get %q in %s: read at byte %d: %w", r.key, r.s.where, r.off, err)
	}
	if r.ctx.Err() != nil {
		return fail(r.ctx.Err())
	}
	if !transient(cause) || r.etag == "" || r.resumes+1 >= r.s.attempts || (r.end >= 0 && r.off >= r.end) {
		return fail(cause)
	}
	r.body.Close()
	r.body = io.NopCloser(bytes.NewReader(nil))
	if err := sleep(r.ctx, backoff(r.resumes)); err != nil {
		return fail(err)
	}
	r.resumes++
	body, _, err := r.s.get(r.ctx, r.key, r.off, r.end, r.etag)
	if err != nil {
		return fail(fmt.Errorf("resume after %v: %w", cause, err))
	}
	r.body = body
	return nil
}

func (r *objectReader) Close() error { return r.body.Close() }
