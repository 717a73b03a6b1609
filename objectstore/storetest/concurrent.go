package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// testConcurrentCreators is the Delta log's pattern: creators race with PutIfAbsent for
// the next sequence number (version v+1 is only tried once v is known to exist), while
// listers list the sequence. A listing must show every key written before it began, and
// no gap: a listed key implies every earlier one, since each was created first.
func testConcurrentCreators(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	const (
		creators = 8
		listers  = 2
		versions = 200
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := func(v int64) string { return fmt.Sprintf("seq/log/%020d.json", v) }
	var existing atomic.Int64 // highest version known to exist
	existing.Store(-1)
	var wg sync.WaitGroup
	errs := make(chan error, creators+listers)
	for c := range creators {
		wg.Go(func() {
			for {
				v := existing.Load() + 1
				if v >= versions {
					return
				}
				body := fmt.Appendf(nil, "creator %d version %d\n", c, v)
				err := s.PutIfAbsent(ctx, key(v), bytes.NewReader(body), int64(len(body)))
				if err != nil && !errors.Is(err, objectstore.ErrExist) {
					errs <- fmt.Errorf("creator %d: PutIfAbsent(%q): %w", c, key(v), err)
					cancel()
					return
				}
				existing.CompareAndSwap(v-1, v)
			}
		})
	}
	var listings atomic.Int64
	for l := range listers {
		wg.Go(func() {
			for ctx.Err() == nil {
				before := existing.Load()
				infos, err := s.List(ctx, "seq/log/", "")
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("lister %d: List: %w", l, err)
					}
					return
				}
				listings.Add(1)
				for i, in := range infos {
					if in.Key != key(int64(i)) {
						errs <- fmt.Errorf("lister %d: listing of %d keys has %q at position %d, want %q (a key created before a listed one is missing)",
							l, len(infos), in.Key, i, key(int64(i)))
						cancel()
						return
					}
				}
				if int64(len(infos)) <= before {
					errs <- fmt.Errorf("lister %d: listing shows versions 0..%d, but version %d existed before List began",
						l, len(infos)-1, before)
					cancel()
					return
				}
				if before == versions-1 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(list(t, s, "seq/log/", "")); n != versions {
		t.Errorf("after the race List shows %d versions, want %d", n, versions)
	}
	t.Logf("%d listings during %d creations", listings.Load(), versions)
}
