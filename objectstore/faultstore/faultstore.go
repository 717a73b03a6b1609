package faultstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// ErrInjected is the error injected operations return (wrapped with the operation).
var ErrInjected = errors.New("injected store failure")

// Op names a store operation.
type Op string

// The operations that can be counted and failed.
const (
	OpGet         Op = "get"
	OpPut         Op = "put"
	OpPutIfAbsent Op = "put-if-absent"
	OpList        Op = "list"
	OpStat        Op = "stat"
	OpDelete      Op = "delete"
)

func (o Op) isWrite() bool { return o == OpPut || o == OpPutIfAbsent || o == OpDelete }

// Store wraps a Store with fault injection. The zero plan fails nothing.
type Store struct {
	inner objectstore.Store

	mu sync.Mutex // guards everything below
	// failAt is the 1-based number of the operation to fail (0: none); sticky makes every
	// operation after it fail too, like a crashed process that can no longer act.
	failAt int
	sticky bool
	writes bool // count only writes (Put, PutIfAbsent, Delete)
	prefix string
	n      int
	failed bool
	hook   func(op Op, key string)
}

var (
	_ objectstore.Store       = (*Store)(nil)
	_ objectstore.RangeGetter = (*Store)(nil)
)

// New wraps inner; nothing fails until a Fail method is called.
func New(inner objectstore.Store) *Store { return &Store{inner: inner} }

// FailNth makes the nth operation from now fail (n ≥ 1). With sticky, every later
// operation fails as well. With writesOnly, only writes are counted and failed.
func (s *Store) FailNth(n int, sticky, writesOnly bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAt, s.sticky, s.writes, s.n, s.failed = n, sticky, writesOnly, 0, false
}

// FailWritesUnder makes every write to a key starting with prefix fail.
func (s *Store) FailWritesUnder(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefix = prefix
}

// OnOp makes hook run before every operation (nil: none), outside any lock: a test can
// stop the backend under a given key, e.g. a server outage in the middle of a stage.
func (s *Store) OnOp(hook func(op Op, key string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = hook
}

// Heal stops all injection.
func (s *Store) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAt, s.sticky, s.prefix, s.failed = 0, false, "", false
}

// Count reports how many operations (or writes, after FailNth with writesOnly) have been
// counted since the last FailNth; a test runs once with no failure to learn how many
// points there are to fail at.
func (s *Store) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Injected reports whether a failure has been injected since the last FailNth.
func (s *Store) Injected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// check decides whether op on key fails.
func (s *Store) check(op Op, key string) error {
	s.mu.Lock()
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		hook(op, key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prefix != "" && op.isWrite() && strings.HasPrefix(key, s.prefix) {
		return fmt.Errorf("%s %s: %w", op, key, ErrInjected)
	}
	if s.writes && !op.isWrite() {
		return nil
	}
	s.n++
	if s.failAt > 0 && (s.n == s.failAt || s.sticky && s.n > s.failAt) {
		s.failed = true
		return fmt.Errorf("%s %s (operation %d): %w", op, key, s.n, ErrInjected)
	}
	return nil
}

// Get implements objectstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := s.check(OpGet, key); err != nil {
		return nil, err
	}
	return s.inner.Get(ctx, key)
}

// GetRange implements objectstore.RangeGetter (falling back to Get when the inner store
// has no ranges).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := s.check(OpGet, key); err != nil {
		return nil, err
	}
	if rg, ok := s.inner.(objectstore.RangeGetter); ok {
		return rg.GetRange(ctx, key, offset, length)
	}
	rc, err := s.inner.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, rc, offset); err != nil {
		rc.Close()
		return nil, err
	}
	if length < 0 {
		return rc, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, length), rc}, nil
}

// Put implements objectstore.Store. A failed Put writes nothing, as an atomic store would.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.check(OpPut, key); err != nil {
		return err
	}
	return s.inner.Put(ctx, key, r, size)
}

// PutIfAbsent implements objectstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.check(OpPutIfAbsent, key); err != nil {
		return err
	}
	return s.inner.PutIfAbsent(ctx, key, r, size)
}

// List implements objectstore.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string) ([]objectstore.ObjectInfo, error) {
	if err := s.check(OpList, prefix); err != nil {
		return nil, err
	}
	return s.inner.List(ctx, prefix, startAfter)
}

// Stat implements objectstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := s.check(OpStat, key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	return s.inner.Stat(ctx, key)
}

// Delete implements objectstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check(OpDelete, key); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key)
}
