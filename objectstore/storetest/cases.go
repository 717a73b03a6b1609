package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

func testPutIfAbsentRace(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	const writers = 16
	for round := range 3 {
		key := fmt.Sprintf("log/%020d.json", round)
		contents := make([][]byte, writers)
		for i := range contents {
			contents[i] = append([]byte(fmt.Sprintf("writer %02d round %d\n", i, round)), payload(2048+i, uint64(100*round+i))...)
		}
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = s.PutIfAbsent(context.Background(), key, bytes.NewReader(contents[i]), int64(len(contents[i])))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both succeeded, want exactly one", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, objectstore.ErrExist):
				t.Fatalf("round %d: writer %d: got err %v, want nil or ErrExist", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: all %d writers got ErrExist, want exactly one winner", round, writers)
		}
		assertBytes(t, fmt.Sprintf("round %d: stored bytes vs writer %d (the winner)", round, winner), get(t, s, key), contents[winner])
	}
}

func testInvalidKeys(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	ctx := context.Background()
	bad := []string{"", "../x", "../../../../tmp/escape", "/abs", "/", "a//b", "a/./b", "a/", ".", "..", "a/..", "a/../../x", `a\b`, "nul\x00byte"}
	for _, key := range bad {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			calls := map[string]func() error{
				"Put":         func() error { return s.Put(ctx, key, bytes.NewReader([]byte("x")), 1) },
				"PutIfAbsent": func() error { return s.PutIfAbsent(ctx, key, bytes.NewReader([]byte("x")), 1) },
				"Get":         func() error { return closeAndErr(s.Get(ctx, key)) },
				"Stat":        func() error { _, err := s.Stat(ctx, key); return err },
				"Delete":      func() error { return s.Delete(ctx, key) },
			}
			if rg, ok := s.(objectstore.RangeGetter); ok {
				calls["GetRange"] = func() error { return closeAndErr(rg.GetRange(ctx, key, 0, 1)) }
			}
			for name, call := range calls {
				if err := call(); !errors.Is(err, objectstore.ErrInvalidKey) {
					t.Errorf("%s(%q): got err %v, want ErrInvalidKey", name, key, err)
				}
			}
		})
	}
	for _, prefix := range []string{"/", "/a", "../", "a//", "a/./", "a/../"} {
		if _, err := s.List(ctx, prefix, ""); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("List(%q): got err %v, want ErrInvalidKey", prefix, err)
		}
	}
	if infos := list(t, s, "", ""); len(infos) != 0 {
		t.Fatalf("after rejected writes List shows %q, want nothing", keys(infos))
	}
}

func closeAndErr(rc io.ReadCloser, err error) error {
	if rc != nil {
		rc.Close()
	}
	return err
}

// cancellingReader yields n bytes in small chunks and calls cancel once `after` bytes
// have been read, then keeps yielding: the store must notice the context, not the reader.
type cancellingReader struct {
	n, after, read int
	cancel         func()
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	if r.read >= r.after {
		r.cancel()
	}
	k := min(len(p), 32<<10, r.n-r.read)
	for i := range p[:k] {
		p[i] = byte(r.read + i)
	}
	r.read += k
	return k, nil
}

func testContextCanceled(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	old := []byte("old bytes")
	put(t, s, "ctx/existing", old)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func() error{
		"Put":         func() error { return s.Put(ctx, "ctx/existing", bytes.NewReader([]byte("new")), 3) },
		"PutIfAbsent": func() error { return s.PutIfAbsent(ctx, "ctx/new", bytes.NewReader([]byte("new")), 3) },
		"Get":         func() error { return closeAndErr(s.Get(ctx, "ctx/existing")) },
		"Stat":        func() error { _, err := s.Stat(ctx, "ctx/existing"); return err },
		"List":        func() error { _, err := s.List(ctx, "ctx/", ""); return err },
		"Delete":      func() error { return s.Delete(ctx, "ctx/existing") },
	}
	if rg, ok := s.(objectstore.RangeGetter); ok {
		calls["GetRange"] = func() error { return closeAndErr(rg.GetRange(ctx, "ctx/existing", 0, 1)) }
	}
	for name, call := range calls {
		t.Run("cancelled before "+name, func(t *testing.T) {
			if err := call(); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s with a cancelled context: got err %v, want context.Canceled", name, err)
			}
		})
	}
	assertBytes(t, "Get after cancelled calls", get(t, s, "ctx/existing"), old)
	assertNotExist(t, s, "ctx/new")

	for _, c := range []struct {
		name     string
		ifAbsent bool
		size     int64
	}{{"Put", false, 4 << 20}, {"PutUnknownSize", false, -1}, {"PutIfAbsent", true, 4 << 20}, {"PutIfAbsentUnknownSize", true, -1}} {
		t.Run("cancelled during "+c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &cancellingReader{n: 4 << 20, after: 256 << 10, cancel: cancel}
			key := "ctx/during-" + c.name
			var err error
			if c.ifAbsent {
				err = s.PutIfAbsent(ctx, key, r, c.size)
			} else {
				err = s.Put(ctx, key, r, c.size)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s cancelled midway: got err %v, want context.Canceled", c.name, err)
			}
			assertNotExist(t, s, key)
		})
	}

	t.Run("cancelled while reading", func(t *testing.T) {
		big := payload(8<<20, 9)
		put(t, s, "ctx/big", big)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rc, err := s.Get(ctx, "ctx/big")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		defer rc.Close()
		if _, err := io.ReadFull(rc, make([]byte, 1024)); err != nil {
			t.Fatalf("first read: %v", err)
		}
		cancel()
		n, err := io.Copy(io.Discard, rc)
		if err == nil {
			t.Fatalf("reading on after cancel: read %d more bytes and no error, want an error", n)
		}
	})
}

func testGetRange(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	rg, ok := s.(objectstore.RangeGetter)
	if !ok {
		t.Skipf("%T does not implement objectstore.RangeGetter", s)
	}
	ctx := context.Background()
	data := payload(1000, 4)
	put(t, s, "range/obj", data)
	put(t, s, "range/empty", nil)
	cases := []struct {
		key            string
		offset, length int64
		want           []byte
	}{
		{"range/obj", 0, 10, data[:10]},
		{"range/obj", 10, 10, data[10:20]},
		{"range/obj", 990, 10, data[990:]},
		{"range/obj", 999, 1, data[999:]},
		{"range/obj", 990, 100, data[990:]},
		{"range/obj", 0, -1, data},
		{"range/obj", 500, -1, data[500:]},
		{"range/obj", 0, 1000, data},
		{"range/obj", 5, 0, nil},
		{"range/obj", 1000, 10, nil},
		{"range/obj", 1000, -1, nil},
		{"range/obj", 2000, 5, nil},
		{"range/empty", 0, -1, nil},
		{"range/empty", 0, 10, nil},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s@%d+%d", c.key, c.offset, c.length), func(t *testing.T) {
			rc, err := rg.GetRange(ctx, c.key, c.offset, c.length)
			if err != nil {
				t.Fatalf("GetRange(%q, %d, %d): %v", c.key, c.offset, c.length, err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("GetRange(%q, %d, %d): read: %v", c.key, c.offset, c.length, err)
			}
			assertBytes(t, fmt.Sprintf("GetRange(%q, %d, %d)", c.key, c.offset, c.length), got, c.want)
		})
	}
	t.Run("negative offset", func(t *testing.T) {
		if err := closeAndErr(rg.GetRange(ctx, "range/obj", -1, 5)); err == nil {
			t.Fatalf("GetRange with offset -1: got no error, want one")
		}
	})
}

func testDelete(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("Delete of a missing key: got err %v, want nil", err)
	}
	put(t, s, "d/x/y", []byte("y"))
	put(t, s, "d/x/z", []byte("z"))
	steps := []struct {
		del  string
		want []string
	}{
		{"d/x/y", []string{"d/x/z"}},
		{"d/x", []string{"d/x/z"}}, // a "directory" is not an object: nothing to delete
		{"d/x/y", []string{"d/x/z"}},
		{"d/x/z", nil},
	}
	for _, st := range steps {
		if err := s.Delete(ctx, st.del); err != nil {
			t.Fatalf("Delete(%q): %v", st.del, err)
		}
		if got := keys(list(t, s, "", "")); len(got) != len(st.want) || (len(got) > 0 && got[0] != st.want[0]) {
			t.Fatalf("after Delete(%q) List = %q, want %q", st.del, got, st.want)
		}
	}
	assertNotExist(t, s, "d/x/y")
	// The key is free again: PutIfAbsent succeeds where the deleted object was.
	if err := s.PutIfAbsent(ctx, "d/x/y", bytes.NewReader([]byte("again")), 5); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	assertBytes(t, "Get after re-create", get(t, s, "d/x/y"), []byte("again"))
}

var errBoom = errors.New("storetest: reader failed on purpose")

// failingReader yields good bytes, then fails with errBoom.
type failingReader struct{ good, read int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.read >= r.good {
		return 0, errBoom
	}
	k := min(len(p), r.good-r.read)
	clear(p[:k])
	r.read += k
	return k, nil
}

func testFailingReader(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	ctx := context.Background()
	old := []byte("previous version")
	put(t, s, "fail/existing", old)
	cases := []struct {
		name     string
		r        io.Reader
		size     int64
		ifAbsent bool
	}{
		{"Put fails midway", &failingReader{good: 1 << 20}, 2 << 20, false},
		{"Put fails midway, size unknown", &failingReader{good: 1 << 20}, -1, false},
		{"Put of 20MiB fails after 18MiB", &failingReader{good: 18 << 20}, 20 << 20, false},
		{"PutIfAbsent fails midway", &failingReader{good: 1 << 20}, 2 << 20, true},
		{"PutIfAbsent fails midway, size unknown", &failingReader{good: 1 << 20}, -1, true},
		{"Put short of its size", onlyReader{bytes.NewReader(make([]byte, 50))}, 100, false},
		{"Put longer than its size", onlyReader{bytes.NewReader(make([]byte, 100))}, 50, false},
		{"PutIfAbsent short of its size", onlyReader{bytes.NewReader(make([]byte, 50))}, 100, true},
		{"PutIfAbsent longer than its size", onlyReader{bytes.NewReader(make([]byte, 100))}, 50, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("fail/%02d", i)
			var err error
			if c.ifAbsent {
				err = s.PutIfAbsent(ctx, key, c.r, c.size)
			} else {
				err = s.Put(ctx, key, c.r, c.size)
			}
			if err == nil {
				t.Fatalf("%s: got no error, want one", c.name)
			}
			assertNotExist(t, s, key)
		})
	}
	t.Run("Put over an existing object fails midway", func(t *testing.T) {
		if err := s.Put(ctx, "fail/existing", &failingReader{good: 1 << 20}, 2<<20); err == nil {
			t.Fatalf("got no error, want one")
		}
		assertBytes(t, "Get after a failed replace", get(t, s, "fail/existing"), old)
	})
}
