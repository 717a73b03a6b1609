package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Run runs the conformance suite as subtests of t. newStore must return a fresh, empty
// store each time it is called; it may register cleanups on the t it is given.
func Run(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, newStore func(t *testing.T) objectstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"PutReplaces", testPutReplaces},
		{"List", testList},
		{"ListInfo", testListInfo},
		{"UnusualKeys", testUnusualKeys},
		{"Missing", testMissing},
		{"PutIfAbsentExisting", testPutIfAbsentExisting},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"ConcurrentCreators", testConcurrentCreators},
		{"InvalidKeys", testInvalidKeys},
		{"ContextCanceled", testContextCanceled},
		{"GetRange", testGetRange},
		{"Delete", testDelete},
		{"FailingReader", testFailingReader},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore) })
	}
}

// Sizes used by the round-trip test.
const (
	bigSize = 50 << 20 // 50 MiB: forces multipart uploads on S3
	midSize = 1<<20 + 7
)

// payload returns n deterministic pseudo-random bytes; different seeds give different bytes.
func payload(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 1})
	_, _ = r.Read(b)
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// onlyReader hides every method but Read (Seek, ReadAt, WriterTo, Len), so
// implementations cannot take a shortcut the caller's stream would not allow.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func put(t *testing.T, s objectstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(data), err)
	}
}

func get(t *testing.T, s objectstore.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return b
}

func list(t *testing.T, s objectstore.Store, prefix, startAfter string) []objectstore.ObjectInfo {
	t.Helper()
	infos, err := s.List(context.Background(), prefix, startAfter)
	if err != nil {
		t.Fatalf("List(%q, %q): %v", prefix, startAfter, err)
	}
	return infos
}

func keys(infos []objectstore.ObjectInfo) []string {
	out := make([]string, 0, len(infos))
	for _, in := range infos {
		out = append(out, in.Key)
	}
	return out
}

// assertBytes compares by length and sha256 so a 50 MiB mismatch prints two short lines.
func assertBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes (sha256 %s…), want %d bytes (sha256 %s…)",
			what, len(got), digest(got), len(want), digest(want))
	}
}

func assertNotExist(t *testing.T, s objectstore.Store, key string) {
	t.Helper()
	if _, err := s.Stat(context.Background(), key); !errors.Is(err, objectstore.ErrNotExist) {
		t.Fatalf("Stat(%q) after a failed write: got err %v, want ErrNotExist (no object visible)", key, err)
	}
	for _, in := range list(t, s, "", "") {
		if in.Key == key {
			t.Fatalf("List shows %q (%d bytes) after a failed write, want it absent", key, in.Size)
		}
	}
}

func testRoundTrip(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	ctx := context.Background()
	big := payload(bigSize, 1)
	mid := payload(midSize, 2)
	cases := []struct {
		name      string
		data      []byte
		knownSize bool
		ifAbsent  bool
	}{
		{"empty/Put", nil, true, false},
		{"empty/PutUnknownSize", nil, false, false},
		{"empty/PutIfAbsent", nil, true, true},
		{"empty/PutIfAbsentUnknownSize", nil, false, true},
		{"1byte/Put", []byte{0}, true, false},
		{"1MiB/PutUnknownSize", mid, false, false},
		{"1MiB/PutIfAbsent", mid, true, true},
		{"50MiB/Put", big, true, false},
		{"50MiB/PutUnknownSize", big, false, false},
		{"50MiB/PutIfAbsentUnknownSize", big, false, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("roundtrip/%02d/object.bin", i)
			size := int64(len(c.data))
			if !c.knownSize {
				size = -1
			}
			r := onlyReader{bytes.NewReader(c.data)}
			var err error
			if c.ifAbsent {
				err = s.PutIfAbsent(ctx, key, r, size)
			} else {
				err = s.Put(ctx, key, r, size)
			}
			if err != nil {
				t.Fatalf("write %q (%d bytes, size arg %d): %v", key, len(c.data), size, err)
			}
			assertBytes(t, "Get after write", get(t, s, key), c.data)
			info, err := s.Stat(ctx, key)
			if err != nil {
				t.Fatalf("Stat(%q): %v", key, err)
			}
			if info.Key != key || info.Size != int64(len(c.data)) || info.ModTime.IsZero() {
				t.Fatalf("Stat(%q) = %+v, want key %q, size %d and a modification time", key, info, key, len(c.data))
			}
		})
	}
}

func testPutReplaces(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	old := payload(4096, 3)
	repl := []byte("shorter replacement")
	put(t, s, "k/replace.json", old)
	put(t, s, "k/replace.json", repl)
	assertBytes(t, "Get after the second Put", get(t, s, "k/replace.json"), repl)
	infos := list(t, s, "k/", "")
	if len(infos) != 1 || infos[0].Size != int64(len(repl)) {
		t.Fatalf("List after replace = %+v, want one object of %d bytes", infos, len(repl))
	}
}

// listKeys holds keys whose byte order differs from a directory walk's order: '-' (0x2d)
// sorts before '/' (0x2f), so "a/b-c" comes before "a/b/c".
var listKeys = []string{"b", "a/c", "ab", "a/bc", "a/b/d/e", "a/b-c", "a/b/c"}

func testList(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	for i, k := range listKeys {
		put(t, s, k, []byte(fmt.Sprintf("object %d: %s", i, k)))
	}
	cases := []struct {
		name, prefix, startAfter string
		want                     []string
	}{
		{"all", "", "", []string{"a/b-c", "a/b/c", "a/b/d/e", "a/bc", "a/c", "ab", "b"}},
		{"prefix a", "a", "", []string{"a/b-c", "a/b/c", "a/b/d/e", "a/bc", "a/c", "ab"}},
		{"prefix a/", "a/", "", []string{"a/b-c", "a/b/c", "a/b/d/e", "a/bc", "a/c"}},
		{"prefix a/b is a string prefix", "a/b", "", []string{"a/b-c", "a/b/c", "a/b/d/e", "a/bc"}},
		{"prefix a/b/ is a directory", "a/b/", "", []string{"a/b/c", "a/b/d/e"}},
		{"prefix a/bc", "a/bc", "", []string{"a/bc"}},
		{"prefix a/b/d", "a/b/d", "", []string{"a/b/d/e"}},
		{"prefix equal to a key", "a/b/c", "", []string{"a/b/c"}},
		{"prefix matches nothing", "zz", "", nil},
		{"prefix below a missing dir", "a/x/y/", "", nil},
		{"startAfter a key", "", "a/b/c", []string{"a/b/d/e", "a/bc", "a/c", "ab", "b"}},
		{"startAfter within prefix", "a/b", "a/b-c", []string{"a/b/c", "a/b/d/e", "a/bc"}},
		{"startAfter a dir", "a/", "a/b/", []string{"a/b/c", "a/b/d/e", "a/bc", "a/c"}},
		{"startAfter before prefix", "a/b/", "a", []string{"a/b/c", "a/b/d/e"}},
		{"startAfter between keys", "", "a/b0", []string{"a/bc", "a/c", "ab", "b"}},
		{"startAfter inside a dir", "", "a/b/d", []string{"a/b/d/e", "a/bc", "a/c", "ab", "b"}},
		{"startAfter past all", "", "c", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := keys(list(t, s, c.prefix, c.startAfter))
			if !slices.Equal(got, c.want) {
				t.Fatalf("List(%q, %q)\n got: %q\nwant: %q", c.prefix, c.startAfter, got, c.want)
			}
		})
	}
	t.Run("empty store", func(t *testing.T) {
		if got := list(t, newStore(t), "", ""); len(got) != 0 {
			t.Fatalf("List on an empty store = %q, want none", keys(got))
		}
	})
}

func testListInfo(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	ctx := context.Background()
	sizes := map[string]int{"info/empty": 0, "info/small": 10, "info/x/big": 70000}
	for k, n := range sizes {
		put(t, s, k, payload(n, uint64(n)))
	}
	infos := list(t, s, "info/", "")
	if len(infos) != len(sizes) {
		t.Fatalf("List(info/) = %q, want %d objects", keys(infos), len(sizes))
	}
	for _, in := range infos {
		if in.Size != int64(sizes[in.Key]) {
			t.Errorf("List: %s has size %d, want %d", in.Key, in.Size, sizes[in.Key])
		}
		if in.ModTime.IsZero() {
			t.Errorf("List: %s has no modification time", in.Key)
		}
		st, err := s.Stat(ctx, in.Key)
		if err != nil {
			t.Fatalf("Stat(%q): %v", in.Key, err)
		}
		// S3 lists with millisecond precision but HEAD answers in whole seconds.
		if d := st.ModTime.Sub(in.ModTime); d > 1500*time.Millisecond || d < -1500*time.Millisecond {
			t.Errorf("%s: Stat ModTime %v and List ModTime %v differ by %v", in.Key, st.ModTime, in.ModTime, d)
		}
		if st.Size != in.Size {
			t.Errorf("%s: Stat size %d, List size %d", in.Key, st.Size, in.Size)
		}
	}
}

func testUnusualKeys(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	odd := []string{
		"log/00000000000000000000.json",
		"part=a b/file+name%20=1.parquet",
		"ünïcode/ключ/値.txt",
		".hidden/.dotfile",
		"date=2024-01-01/hour=00/x~y!z'(1)*.csv",
	}
	for i, k := range odd {
		data := []byte(fmt.Sprintf("odd key %d", i))
		put(t, s, k, data)
		assertBytes(t, "Get("+k+")", get(t, s, k), data)
	}
	want := append([]string(nil), odd...)
	slices.Sort(want)
	if got := keys(list(t, s, "", "")); !slices.Equal(got, want) {
		t.Fatalf("List\n got: %q\nwant: %q", got, want)
	}
	if got := keys(list(t, s, "part=a b/", "")); !slices.Equal(got, []string{odd[1]}) {
		t.Fatalf("List(%q) = %q, want %q", "part=a b/", got, odd[1])
	}
}

func testMissing(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	ctx := context.Background()
	put(t, s, "dir/sub/object", []byte("x"))
	for _, key := range []string{"nope", "dir/nope", "dir", "dir/sub", "dir/sub/object/below"} {
		t.Run(key, func(t *testing.T) {
			if _, err := s.Stat(ctx, key); !errors.Is(err, objectstore.ErrNotExist) {
				t.Errorf("Stat(%q): got err %v, want ErrNotExist", key, err)
			}
			if rc, err := s.Get(ctx, key); !errors.Is(err, objectstore.ErrNotExist) {
				if rc != nil {
					rc.Close()
				}
				t.Errorf("Get(%q): got err %v, want ErrNotExist", key, err)
			}
			if rg, ok := s.(objectstore.RangeGetter); ok {
				if rc, err := rg.GetRange(ctx, key, 0, 10); !errors.Is(err, objectstore.ErrNotExist) {
					if rc != nil {
						rc.Close()
					}
					t.Errorf("GetRange(%q): got err %v, want ErrNotExist", key, err)
				}
			}
		})
	}
}

func testPutIfAbsentExisting(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	s := newStore(t)
	ctx := context.Background()
	old := []byte(`{"commitInfo":{"version":0}}`)
	if err := s.PutIfAbsent(ctx, "log/0.json", bytes.NewReader(old), int64(len(old))); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	for _, size := range []int64{5, -1} {
		err := s.PutIfAbsent(ctx, "log/0.json", onlyReader{bytes.NewReader([]byte("other"))}, size)
		if !errors.Is(err, objectstore.ErrExist) {
			t.Fatalf("second PutIfAbsent (size %d): got err %v, want ErrExist", size, err)
		}
	}
	assertBytes(t, "Get after a refused PutIfAbsent", get(t, s, "log/0.json"), old)
	if infos := list(t, s, "", ""); len(infos) != 1 {
		t.Fatalf("List after a refused PutIfAbsent = %q, want only the original", keys(infos))
	}
}
