package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// sourceFile is one file an ingest stage may load.
type sourceFile struct {
	// Name identifies the file in the source_file column, errors and lineage: the
	// location as configured with the glob replaced by the file's relative path.
	Name string
	// ID is the txn appId that records the file as loaded; Version the txn version.
	ID      string
	Version int64
	Size    int64
	open    func(ctx context.Context) (io.ReadCloser, error)
	// openAt, for a file of a store with local files, opens it for reads in place.
	openAt func(ctx context.Context) (objectstore.ReaderAtCloser, int64, error)
	// data holds a fetched URL's body.
	data []byte
	// dated, in a backlog of dated extracts (snapshot_date), is the snapshot the file
	// belongs to.
	dated *datedFile
}

// splitGlob splits a location with a glob into its directory (no glob characters) and the
// pattern below it: "landing/sales/*.csv" → "landing/sales", "*.csv".
func splitGlob(loc string) (dir, pattern string) {
	i := strings.IndexAny(loc, "*?[")
	if i < 0 {
		return path.Dir(loc), path.Base(loc)
	}
	slash := strings.LastIndex(loc[:i], "/")
	if slash < 0 {
		return ".", loc
	}
	return loc[:slash], loc[slash+1:]
}

// matchGlob matches a slash-separated name against a pattern whose segments follow
// path.Match, plus "**" for any number of segments.
func matchGlob(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// listSources lists the files a glob location matches, sorted by name.
func listSources(ctx context.Context, env *Env, target, loc string) ([]*sourceFile, error) {
	if env.OpenLocation == nil {
		return nil, fmt.Errorf("no way to open source location %s", loc)
	}
	dir, pattern := splitGlob(loc)
	store, prefix, err := env.OpenLocation(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("open source %s: %w", dir, err)
	}
	listPrefix := prefix
	if listPrefix != "" && !strings.HasSuffix(listPrefix, "/") {
		listPrefix += "/"
	}
	objs, err := store.List(ctx, listPrefix, "")
	if err != nil {
		return nil, fmt.Errorf("list source %s: %w", dir, err)
	}
	var files []*sourceFile
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, listPrefix)
		if !matchGlob(pattern, rel) {
			continue
		}
		key := o.Key
		name := strings.TrimSuffix(dir, "/") + "/" + rel
		f := &sourceFile{
			Name:    name,
			ID:      "ingest:" + target + ":" + name,
			Version: o.ModTime.UnixMilli(),
			Size:    o.Size,
			open:    func(ctx context.Context) (io.ReadCloser, error) { return store.Get(ctx, key) },
		}
		if local, ok := store.(objectstore.ReaderAtOpener); ok {
			f.openAt = func(ctx context.Context) (objectstore.ReaderAtCloser, int64, error) {
				return local.OpenReaderAt(ctx, key)
			}
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// fetchURL downloads an http(s) source with retries (5xx and network errors, exponential
// backoff) and a per-request timeout. Its txn version is a fingerprint of the content, so
// a URL is loaded again when what it serves changes, and never twice for the same bytes.
func fetchURL(ctx context.Context, env *Env, target, url string, opts HTTPOptions) (*sourceFile, error) {
	client := retryablehttp.NewClient()
	client.Logger = nil
	client.RetryMax = 4
	if opts.Retries != nil {
		client.RetryMax = *opts.Retries
	}
	client.HTTPClient.Timeout = 60 * time.Second
	if opts.Timeout > 0 {
		client.HTTPClient.Timeout = time.Duration(opts.Timeout)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	for k, v := range opts.Headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: HTTP %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	sum := sha256.Sum256(body)
	return &sourceFile{
		Name:    url,
		ID:      "ingest:" + target + ":" + url,
		Version: int64(binary.BigEndian.Uint64(sum[:8]) >> 1),
		Size:    int64(len(body)),
		data:    body,
		open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(body)), nil
		},
	}, nil
}

// randomAccess opens a file for Parquet decoding, which needs random access: a local
// file in place, any other loaded into memory. The caller calls done when finished.
func randomAccess(ctx context.Context, f *sourceFile) (r io.Reader, done func(), err error) {
	switch {
	case f.data != nil:
		return bytes.NewReader(f.data), func() {}, nil
	case f.openAt != nil:
		ra, n, err := f.openAt(ctx)
		if err != nil {
			return nil, nil, err
		}
		return io.NewSectionReader(ra, 0, n), func() { ra.Close() }, nil
	}
	rc, err := f.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, nil, err
	}
	return bytes.NewReader(b), func() {}, nil
}
