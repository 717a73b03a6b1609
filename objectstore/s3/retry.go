package s3

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// isNotFound reports an S3 "no such key" answer. NoSuchBucket is not one: a missing
// bucket is a configuration error, not a missing object.
func isNotFound(err error) bool {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return false
	}
	return resp.Code == "NoSuchKey" || (resp.StatusCode == 404 && resp.Code != "NoSuchBucket")
}

// transient reports whether a failed request is worth repeating: the service answered
// 5xx, 408, 429 or one of S3's "slow down / try again" codes, or the request never got
// an answer (connection refused or reset, timeout, EOF). Other 4xx answers and TLS
// certificate problems are final. This is the policy minio-go applies to the requests
// it retries itself.
func transient(err error) bool {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "RequestTimeout", "InternalError", "ServiceUnavailable", "SlowDown", "SlowDownWrite",
			"SlowDownRead", "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled":
			return true
		}
		switch resp.StatusCode {
		case 408, 429, 499, 500, 502, 503, 504, 520:
			return true
		}
		return false
	}
	var unknownCA x509.UnknownAuthorityError
	var badCert x509.CertificateInvalidError
	var badHost x509.HostnameError
	var badRecord tls.RecordHeaderError
	if errors.As(err, &unknownCA) || errors.As(err, &badCert) || errors.As(err, &badHost) || errors.As(err, &badRecord) {
		return false
	}
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}

// backoff is the wait before retry number attempt+1: 100ms doubling per attempt, capped
// at 5s, with "equal jitter" (half fixed, half random) so racing writers spread out.
func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 6)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readAll reads r to the end; when size >= 0 it must yield exactly size bytes.
func readAll(ctx context.Context, r io.Reader, size int64) ([]byte, error) {
	var buf bytes.Buffer
	src := objectstore.ContextReader(ctx, r)
	if size >= 0 {
		buf.Grow(int(size))
		src = &exactReader{r: src, left: size}
	}
	if _, err := buf.ReadFrom(src); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return buf.Bytes(), nil
}

// readAtMost reads up to limit+1 bytes: a result of limit bytes or fewer is the whole
// stream.
func readAtMost(ctx context.Context, r io.Reader, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(objectstore.ContextReader(ctx, r), limit+1)); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return buf.Bytes(), nil
}

var (
	errShort = errors.New("reader ended before the size it was given")
	errLong  = errors.New("reader yielded more bytes than the size it was given")
)

// exactReader passes through exactly left bytes of r and fails if r ends early or has
// more.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		var one [1]byte
		for range 100 { // a reader may return (0, nil) a few times
			n, err := e.r.Read(one[:])
			if n > 0 {
				return 0, errLong
			}
			if err != nil {
				return 0, err // io.EOF: exactly the right length
			}
		}
		return 0, io.ErrNoProgress
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, errShort
	}
	if err == io.EOF {
		err = nil // the next Read confirms the end
	}
	return n, err
}
