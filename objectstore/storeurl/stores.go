package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// Stores opens stores by location and keeps them open, so that a process (a CLI
// command, serve) opens each store once: the same location with the same settings gives
// the same store, and each mem:// name (the empty one too) is one store for as long as
// the Stores lives. It is safe for concurrent use; Close closes what it opened.
type Stores struct {
	mu     sync.Mutex // guards stores
	stores map[storeKey]objectstore.Store
}

// storeKey is what makes two opened stores one: the store's location, normalized, and
// the settings that matter for it.
type storeKey struct {
	scheme scheme
	where  string // local: absolute directory; inMemory: name; s3Bucket: bucket/prefix
	opts   Options
}

// NewStores returns an empty Stores.
func NewStores() *Stores { return &Stores{stores: map[storeKey]objectstore.Store{}} }

// Open returns the store rawURL names (see the package Open), opening it the first time.
func (s *Stores) Open(ctx context.Context, rawURL string, opts Options) (objectstore.Store, error) {
	loc, err := parse(rawURL)
	if err != nil {
		return nil, err
	}
	return s.open(ctx, loc, opts)
}

func (s *Stores) open(ctx context.Context, loc location, opts Options) (objectstore.Store, error) {
	key := storeKey{scheme: loc.scheme}
	switch loc.scheme {
	case local:
		abs, err := filepath.Abs(loc.dir)
		if err != nil {
			return nil, fmt.Errorf("open store %q: %w", loc.raw, err)
		}
		key.where, key.opts = abs, Options{NoSync: opts.NoSync}
	case inMemory:
		if loc.path != "" {
			return nil, fmt.Errorf("open store %q: want mem:// or mem://name", loc.raw)
		}
		key.where = loc.name
	case s3Bucket:
		key.where, key.opts = loc.bucket+"/"+loc.path, opts.endpointScheme()
		key.opts.NoSync = false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.stores[key]; ok {
		return st, nil
	}
	var st objectstore.Store
	var err error
	if loc.scheme == inMemory {
		st = mem.New(mem.Config{})
	} else if st, err = loc.open(ctx, opts); err != nil {
		return nil, err
	}
	s.stores[key] = st
	return st, nil
}

// Dir opens the directory rawURL names, to read the files under it (an ingest source):
// the store that holds it and the key prefix of the directory in that store. A local
// directory must exist (it is its own store, prefix ""); s3://bucket/prefix is the
// bucket's store and the prefix, mem://name/prefix the named store and the prefix.
func (s *Stores) Dir(ctx context.Context, rawURL string, opts Options) (objectstore.Store, string, error) {
	loc, err := parse(rawURL)
	if err != nil {
		return nil, "", err
	}
	prefix := loc.path
	switch loc.scheme {
	case local:
		fi, err := os.Stat(loc.dir)
		if err != nil {
			return nil, "", err
		}
		if !fi.IsDir() {
			return nil, "", fmt.Errorf("%s is not a directory", loc.dir)
		}
	case inMemory, s3Bucket:
		loc.path = ""
	}
	st, err := s.open(ctx, loc, opts)
	return st, prefix, err
}

// Table opens the store one level above the table at rawURL, and returns the table's
// root in it (its last path segment), so that the root has a name that messages can
// show: /data/sales opens /data with root "sales", s3://bucket/wh/sales opens
// s3://bucket/wh with root "sales", s3://bucket opens the bucket with root "",
// mem://name/sales the named store with root "sales". A local table must be an existing
// directory (opening a store would create it).
func (s *Stores) Table(ctx context.Context, rawURL string, opts Options) (objectstore.Store, string, error) {
	loc, err := parse(rawURL)
	if err != nil {
		return nil, "", err
	}
	var root string
	switch loc.scheme {
	case local:
		fi, err := os.Stat(loc.dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, "", errors.New("no such directory")
		case err != nil:
			return nil, "", err
		case !fi.IsDir():
			return nil, "", errors.New("not a directory")
		}
		abs, err := filepath.Abs(loc.dir)
		if err != nil {
			return nil, "", err
		}
		if parent := filepath.Dir(abs); parent != abs {
			loc.dir, root = parent, filepath.Base(abs)
		} else {
			loc.dir = abs
		}
	case inMemory:
		loc.path, root = "", loc.path
	case s3Bucket:
		if i := strings.LastIndexByte(loc.path, '/'); i >= 0 {
			loc.path, root = loc.path[:i], loc.path[i+1:]
		} else {
			loc.path, root = "", loc.path
		}
	}
	st, err := s.open(ctx, loc, opts)
	return st, root, err
}

// Close closes every store opened that has a Close method; the Stores is empty after.
func (s *Stores) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for k, st := range s.stores {
		if c, ok := st.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
		delete(s.stores, k)
	}
	return errors.Join(errs...)
}
