package storeurl

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// Options carry S3 settings from flags or configuration. A non-empty field overrides the
// value s3.ConfigFromEnv read from the environment; other schemes ignore them, but for
// NoSync, which only local directories heed.
type Options struct {
	Endpoint     string // URL ("http://127.0.0.1:9000") or host[:port] (HTTPS unless Insecure)
	Region       string
	AccessKey    string
	SecretKey    string
	SessionToken string
	PathStyle    bool // force path-style requests; false keeps the environment's choice
	Insecure     bool // an Endpoint without a scheme is plain http (a local MinIO)
	// NoSync writes a local directory without fsync (objectstore/fs NoSync): for data a
	// machine crash may lose, never for tables.
	NoSync bool
}

// Over returns the settings o gives, and base's where o gives none: the command line's
// flags over a pipeline file's storage section. Insecure applies to the endpoint it
// comes with.
func (o Options) Over(base Options) Options {
	o, base = o.endpointScheme(), base.endpointScheme()
	out := base
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&out.Endpoint, o.Endpoint}, {&out.Region, o.Region}, {&out.AccessKey, o.AccessKey},
		{&out.SecretKey, o.SecretKey}, {&out.SessionToken, o.SessionToken},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	out.PathStyle = base.PathStyle || o.PathStyle
	out.NoSync = base.NoSync || o.NoSync
	return out
}

// endpointScheme gives an Insecure endpoint without a scheme its http://.
func (o Options) endpointScheme() Options {
	if o.Insecure && o.Endpoint != "" && !strings.Contains(o.Endpoint, "://") {
		o.Endpoint = "http://" + o.Endpoint
	}
	o.Insecure = false
	return o
}

// Open returns a new store for the location rawURL names (see the package doc). A
// mem:// store is a new, empty one whatever its name: to share one, open it through a
// Stores. For s3:// it also checks that the bucket exists, so a wrong endpoint, bucket
// or credential fails here with a clear message.
func Open(ctx context.Context, rawURL string, opts Options) (objectstore.Store, error) {
	loc, err := parse(rawURL)
	if err != nil {
		return nil, err
	}
	return loc.open(ctx, opts)
}

// scheme is the kind of store a location names.
type scheme int

const (
	local scheme = iota // a directory
	inMemory
	s3Bucket
)

// location is a parsed location.
type location struct {
	raw    string
	scheme scheme
	dir    string // local: the directory, as written (file:// URLs: their path)
	name   string // inMemory: the store's name ("" is a name too)
	bucket string // s3Bucket
	path   string // inMemory, s3Bucket: the key prefix, no leading or trailing slash
}

// parse reads a location: a directory (plain path or file:///dir), mem://name[/prefix]
// or s3://bucket[/prefix] (s3a:// too).
func parse(raw string) (location, error) {
	l := location{raw: raw}
	if raw == "" {
		return l, fmt.Errorf("open store: empty URL; want a directory, file:///dir, mem:// or s3://bucket/prefix")
	}
	scheme, rest, hasScheme := strings.Cut(raw, "://")
	if !hasScheme {
		if strings.HasPrefix(raw, "file:") {
			return l, fmt.Errorf("open store %q: a file URL is file:///absolute/dir", raw)
		}
		l.scheme, l.dir = local, raw
		return l, nil
	}
	switch strings.ToLower(scheme) {
	case "file":
		u, err := url.Parse(raw)
		if err != nil {
			return l, fmt.Errorf("open store %q: %w", raw, err)
		}
		if (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return l, fmt.Errorf("open store %q: a file URL is file:///absolute/dir", raw)
		}
		l.scheme, l.dir = local, filepath.FromSlash(u.Path)
	case "mem":
		if strings.ContainsAny(rest, "?#") {
			return l, fmt.Errorf("open store %q: want mem:// or mem://name", raw)
		}
		name, p, _ := strings.Cut(rest, "/")
		l.scheme, l.name, l.path = inMemory, name, strings.Trim(p, "/")
	case "s3", "s3a":
		u, err := url.Parse(raw)
		if err != nil {
			return l, fmt.Errorf("open store %q: %w", raw, err)
		}
		if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return l, fmt.Errorf("open store %q: want s3://bucket/prefix", raw)
		}
		l.scheme, l.bucket, l.path = s3Bucket, u.Host, strings.Trim(u.Path, "/")
	default:
		return l, fmt.Errorf("open store %q: unknown scheme %q; want a directory, file:///dir, mem:// or s3://bucket/prefix", raw, scheme)
	}
	return l, nil
}

// open opens a new store for l: a directory (created if missing), a fresh in-memory
// store, or the bucket with l's prefix.
func (l location) open(ctx context.Context, opts Options) (objectstore.Store, error) {
	switch l.scheme {
	case inMemory:
		if l.path != "" {
			return nil, fmt.Errorf("open store %q: want mem:// or mem://name", l.raw)
		}
		return mem.New(mem.Config{}), nil
	case s3Bucket:
		return openS3(ctx, l.raw, l.bucket, l.path, opts)
	}
	st, err := fs.New(fs.Config{Dir: l.dir, NoSync: opts.NoSync})
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", l.raw, err)
	}
	return st, nil
}

func openS3(ctx context.Context, rawURL, bucket, prefix string, opts Options) (objectstore.Store, error) {
	cfg, err := s3.ConfigFromEnv()
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	cfg.Bucket, cfg.Prefix = bucket, prefix
	opts = opts.endpointScheme()
	for _, o := range []struct {
		dst *string
		src string
	}{
		{&cfg.Endpoint, opts.Endpoint}, {&cfg.Region, opts.Region}, {&cfg.AccessKey, opts.AccessKey},
		{&cfg.SecretKey, opts.SecretKey}, {&cfg.SessionToken, opts.SessionToken},
	} {
		if o.src != "" {
			*o.dst = o.src
		}
	}
	cfg.PathStyle = cfg.PathStyle || opts.PathStyle
	st, err := s3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	if err := st.CheckBucket(ctx); err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	return st, nil
}
