package storeurl

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// Options carry S3 settings from flags or configuration. A non-empty field overrides the
// value s3.ConfigFromEnv read from the environment; other schemes ignore them.
type Options struct {
	Endpoint     string // URL ("http://127.0.0.1:9000") or host[:port] (HTTPS)
	Region       string
	AccessKey    string
	SecretKey    string
	SessionToken string
	PathStyle    bool // force path-style requests; false keeps the environment's choice
}

// named holds the mem://name stores of this process.
var named = struct {
	sync.Mutex // guards stores
	stores     map[string]*mem.Store
}{stores: make(map[string]*mem.Store)}

// Open returns the store rawURL names. For s3:// it also checks that the bucket exists,
// so a wrong endpoint, bucket or credential fails here with a clear message.
func Open(ctx context.Context, rawURL string, opts Options) (objectstore.Store, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("open store: empty URL; want a directory, file:///dir, mem:// or s3://bucket/prefix")
	}
	scheme, rest, hasScheme := strings.Cut(rawURL, "://")
	if !hasScheme {
		if strings.HasPrefix(rawURL, "file:") {
			return nil, fmt.Errorf("open store %q: a file URL is file:///absolute/dir", rawURL)
		}
		return openDir(rawURL, rawURL)
	}
	switch strings.ToLower(scheme) {
	case "file":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("open store %q: %w", rawURL, err)
		}
		if (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return nil, fmt.Errorf("open store %q: a file URL is file:///absolute/dir", rawURL)
		}
		return openDir(rawURL, filepath.FromSlash(u.Path))
	case "mem":
		name := strings.TrimSuffix(rest, "/")
		if strings.ContainsAny(name, "/?#") {
			return nil, fmt.Errorf("open store %q: want mem:// or mem://name", rawURL)
		}
		if name == "" {
			return mem.New(mem.Config{}), nil
		}
		named.Lock()
		defer named.Unlock()
		if st, ok := named.stores[name]; ok {
			return st, nil
		}
		st := mem.New(mem.Config{})
		named.stores[name] = st
		return st, nil
	case "s3", "s3a":
		return openS3(ctx, rawURL, opts)
	default:
		return nil, fmt.Errorf("open store %q: unknown scheme %q; want a directory, file:///dir, mem:// or s3://bucket/prefix", rawURL, scheme)
	}
}

func openDir(rawURL, dir string) (objectstore.Store, error) {
	st, err := fs.New(fs.Config{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	return st, nil
}

func openS3(ctx context.Context, rawURL string, opts Options) (objectstore.Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("open store %q: want s3://bucket/prefix", rawURL)
	}
	cfg, err := s3.ConfigFromEnv()
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	cfg.Bucket, cfg.Prefix = u.Host, strings.Trim(u.Path, "/")
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
