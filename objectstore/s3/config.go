package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Config says where the store lives and how to reach it.
type Config struct {
	// Endpoint is the service: a URL ("http://127.0.0.1:9000", "https://minio.example"),
	// whose scheme decides HTTP or HTTPS, or a bare host[:port], for which Secure decides.
	// Empty means AWS S3 over HTTPS.
	Endpoint string
	// Region of the bucket; empty lets minio-go ask the service (one extra request).
	Region string
	// Static credentials. Both keys empty means anonymous requests.
	AccessKey, SecretKey, SessionToken string
	// Bucket holds the store; it must exist (see EnsureBucket).
	Bucket string
	// Prefix is the key prefix of the store inside the bucket, e.g. "warehouse/prod";
	// empty means the whole bucket. Leading and trailing slashes are ignored.
	Prefix string
	// Secure selects HTTPS for a bare host Endpoint.
	Secure bool
	// PathStyle forces path-style requests (http://host/bucket/key), which MinIO and
	// most self-hosted services want; false lets minio-go choose (virtual-host style on
	// AWS, path style elsewhere).
	PathStyle bool
	// MaxRetries bounds the attempts (the first one included) for a request that keeps
	// failing transiently; 0 means 10.
	MaxRetries int
	// StallTimeout fails a request whose connection makes no progress, nothing sent and
	// nothing received, for this long (a hung server or network): the request is then
	// retried like any transient failure. A slow transfer that keeps moving never hits
	// it. 0 means DefaultStallTimeout. It applies to the default transport only.
	StallTimeout time.Duration
	// Transport replaces minio-go's default HTTP transport (tests, proxies, custom TLS).
	Transport http.RoundTripper
}

// DefaultStallTimeout is the default Config.StallTimeout.
const DefaultStallTimeout = 2 * time.Minute

// ConfigFromEnv reads the standard AWS variables: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (else AWS_DEFAULT_REGION), the
// endpoint from AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else S3_ENDPOINT, and
// path style from S3_FORCE_PATH_STYLE or AWS_S3_FORCE_PATH_STYLE ("true"/"false").
// A bare host endpoint is reached over HTTPS; write http://host:port for plain HTTP.
// Bucket and Prefix are left empty: they come from the store URL.
func ConfigFromEnv() (Config, error) {
	cfg := Config{
		AccessKey:    os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:    os.Getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: os.Getenv("AWS_SESSION_TOKEN"),
		Region:       firstEnv("AWS_REGION", "AWS_DEFAULT_REGION"),
		Endpoint:     firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT"),
		Secure:       true,
	}
	for _, name := range []string{"S3_FORCE_PATH_STYLE", "AWS_S3_FORCE_PATH_STYLE"} {
		if v := os.Getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("s3 config: %s=%q: want true or false", name, v)
			}
			cfg.PathStyle = b
			break
		}
	}
	return cfg, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// endpoint splits cfg.Endpoint into minio-go's host and secure flag.
func (cfg Config) endpoint() (host string, secure bool, err error) {
	switch {
	case cfg.Endpoint == "":
		return "s3.amazonaws.com", true, nil
	case strings.Contains(cfg.Endpoint, "://"):
		u, err := url.Parse(cfg.Endpoint)
		if err != nil {
			return "", false, fmt.Errorf("endpoint %q: %w", cfg.Endpoint, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return "", false, fmt.Errorf("endpoint %q: scheme must be http or https", cfg.Endpoint)
		}
		if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", false, fmt.Errorf("endpoint %q: want scheme://host[:port] with no path", cfg.Endpoint)
		}
		return u.Host, u.Scheme == "https", nil
	default:
		return cfg.Endpoint, cfg.Secure, nil
	}
}

const defaultMaxRetries = 10

// New returns a store for cfg. It makes no request; CheckBucket or EnsureBucket does.
func New(cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: no bucket given")
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := objectstore.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("s3 store: prefix: %w", err)
		}
		prefix += "/"
	}
	host, secure, err := cfg.endpoint()
	if err != nil {
		return nil, fmt.Errorf("s3 store: %w", err)
	}
	attempts := cfg.MaxRetries
	if attempts <= 0 {
		attempts = defaultMaxRetries
	}
	transport := cfg.Transport
	if transport == nil {
		tr, err := minio.DefaultTransport(secure)
		if err != nil {
			return nil, fmt.Errorf("s3 store: %w", err)
		}
		stall := cfg.StallTimeout
		if stall <= 0 {
			stall = DefaultStallTimeout
		}
		watchStalls(tr, stall)
		transport = tr
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	newClient := func(maxRetries int) (*minio.Client, error) {
		return minio.New(host, &minio.Options{
			Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
			Secure:       secure,
			Region:       cfg.Region,
			BucketLookup: lookup,
			Transport:    transport,
			MaxRetries:   maxRetries,
		})
	}
	client, err := newClient(attempts)
	if err != nil {
		return nil, fmt.Errorf("s3 store: %w", err)
	}
	// The conditional-put client never retries by itself: PutIfAbsent runs the loop.
	cond, err := newClient(1)
	if err != nil {
		return nil, fmt.Errorf("s3 store: %w", err)
	}
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return &Store{
		client:   client,
		core:     minio.Core{Client: client},
		cond:     cond,
		bucket:   cfg.Bucket,
		prefix:   prefix,
		attempts: attempts,
		where:    fmt.Sprintf("s3://%s/%s (%s://%s)", cfg.Bucket, prefix, scheme, host),
	}, nil
}

// String names the store: bucket, prefix and endpoint.
func (s *Store) String() string { return s.where }

// CheckBucket returns an error that says so when the bucket does not exist or cannot be
// reached with these credentials.
func (s *Store) CheckBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("s3 store %s: check bucket: %w", s.where, err)
	}
	if !ok {
		return fmt.Errorf("s3 store %s: bucket %q does not exist", s.where, s.bucket)
	}
	return nil
}

// EnsureBucket creates the bucket if it does not exist. Concurrent callers (parallel
// test processes) are fine: losing the creation race is success.
func (s *Store) EnsureBucket(ctx context.Context) error {
	if ok, err := s.client.BucketExists(ctx, s.bucket); err == nil && ok {
		return nil
	}
	err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{})
	if err == nil {
		return nil
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && (resp.Code == "BucketAlreadyOwnedByYou" || resp.Code == "BucketAlreadyExists") {
		return s.CheckBucket(ctx)
	}
	return fmt.Errorf("s3 store %s: create bucket: %w", s.where, err)
}
