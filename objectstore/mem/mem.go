package mem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

var (
	_ objectstore.Store       = (*Store)(nil)
	_ objectstore.RangeGetter = (*Store)(nil)
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// Now is the clock that stamps ModTime on writes; nil means time.Now.
	Now func() time.Time
}

// Store is an in-memory object store, safe for concurrent use.
type Store struct {
	now func() time.Time

	mu      sync.RWMutex      // guards objects (the map, not the immutable object values)
	objects map[string]object // key -> object
}

type object struct {
	data    []byte // never modified once stored
	modTime time.Time
}

// New returns an empty store.
func New(cfg Config) *Store {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, objects: make(map[string]object)}
}

func (s *Store) lookup(key string) (object, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[key]
	return o, ok
}

// Get returns a reader over the object's bytes.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange returns a reader over length bytes from offset (length < 0: to the end).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("mem get %q: %w", key, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("mem get %q: negative offset %d", key, offset)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mem get %q: %w", key, err)
	}
	o, ok := s.lookup(key)
	if !ok {
		return nil, fmt.Errorf("mem get %q: %w", key, objectstore.ErrNotExist)
	}
	data := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(objectstore.ContextReader(ctx, bytes.NewReader(data))), nil
}

// Put stores the object, replacing any previous one.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := s.read(ctx, "put", key, r, size)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = object{data: data, modTime: s.now()}
	return nil
}

// PutIfAbsent stores the object only if key is free; otherwise it returns ErrExist.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := s.read(ctx, "put-if-absent", key, r, size)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; ok {
		return fmt.Errorf("mem put-if-absent %q: %w", key, objectstore.ErrExist)
	}
	s.objects[key] = object{data: data, modTime: s.now()}
	return nil
}

// read validates key and reads all of r, checking it yields exactly size bytes when
// size >= 0.
func (s *Store) read(ctx context.Context, op, key string, r io.Reader, size int64) ([]byte, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("mem %s %q: %w", op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mem %s %q: %w", op, key, err)
	}
	var buf bytes.Buffer
	src := objectstore.ContextReader(ctx, r)
	if size >= 0 {
		buf.Grow(int(size))
		src = io.LimitReader(src, size+1) // one more byte reveals a reader longer than size
	}
	if _, err := buf.ReadFrom(src); err != nil {
		return nil, fmt.Errorf("mem %s %q: read: %w", op, key, err)
	}
	if size >= 0 && int64(buf.Len()) != size {
		return nil, fmt.Errorf("mem %s %q: reader yielded %s bytes, want %d", op, key, count(buf.Len(), size), size)
	}
	return buf.Bytes(), nil
}

func count(n int, size int64) string {
	if int64(n) > size {
		return fmt.Sprintf("more than %d", size)
	}
	return fmt.Sprint(n)
}

// List returns the objects whose keys start with prefix and sort after startAfter.
func (s *Store) List(ctx context.Context, prefix, startAfter string) ([]objectstore.ObjectInfo, error) {
	if err := objectstore.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("mem list %q: %w", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mem list %q: %w", prefix, err)
	}
	s.mu.RLock()
	var out []objectstore.ObjectInfo
	for k, o := range s.objects {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			out = append(out, objectstore.ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b objectstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Stat returns the object's size and modification time.
func (s *Store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("mem stat %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("mem stat %q: %w", key, err)
	}
	o, ok := s.lookup(key)
	if !ok {
		return objectstore.ObjectInfo{}, fmt.Errorf("mem stat %q: %w", key, objectstore.ErrNotExist)
	}
	return objectstore.ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

// Delete removes the object; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objectstore.ValidateKey(key); err != nil {
		return fmt.Errorf("mem delete %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem delete %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return nil
}
