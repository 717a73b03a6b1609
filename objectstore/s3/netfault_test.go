package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// Network faults between the store and a real MinIO, through a loopback proxy: slow
// links work, hung requests and bodies time out (and are retried), resets are retried,
// and a response cut in the middle is resumed or fails; it never reads as a shorter
// object.

// proxied returns a store that reaches the test MinIO through a fault proxy, with a
// short stall timeout and few retries so failures come quickly.
func proxied(t *testing.T) (objectstore.Store, *testenv.Proxy) {
	t.Helper()
	cfg := testenv.S3Config(t)
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, u.Host)
	cfg.Prefix = testenv.S3Prefix(t)
	testenv.S3StoreOf(t, cfg) // deletes the prefix at the end
	cfg.Endpoint = p.Endpoint()
	cfg.StallTimeout = time.Second
	// Two faulty connections, plus one: a connection the client pooled before Set dropped
	// it may be picked before the client notices, and fails a write (not replayed).
	cfg.MaxRetries = 4
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st, p
}

// within fails the test if call does not return in a minute: a stuck call, never a slow
// one, is what it catches.
func within[T any](t *testing.T, what string, call func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() { v, err := call(); done <- result{v, err} }()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(time.Minute):
		t.Fatalf("%s is stuck: no answer after a minute", what)
		panic("unreachable")
	}
}

func getAll(ctx context.Context, st objectstore.Store, key string) ([]byte, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestNetworkFaults(t *testing.T) {
	st, p := proxied(t)
	ctx := context.Background()
	data := make([]byte, 1<<20+123)
	rand.Read(data)
	if err := st.Put(ctx, "obj", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	read := func(t *testing.T) ([]byte, error) {
		return within(t, "Get", func() ([]byte, error) { return getAll(ctx, st, "obj") })
	}
	wantData := func(t *testing.T, got []byte, err error) {
		t.Helper()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get = %d bytes, %v; want the %d bytes written", len(got), err, len(data))
		}
	}
	wantError := func(t *testing.T, got []byte, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("Get = %d bytes and no error, want an error (of %d bytes)", len(got), len(data))
		}
	}

	t.Run("latency", func(t *testing.T) {
		p.Set(testenv.Faults{Latency: 20 * time.Millisecond})
		got, err := read(t)
		wantData(t, got, err)
		body := []byte(`{"commitInfo":{}}`)
		if err := st.PutIfAbsent(ctx, "slow/0.json", bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatalf("PutIfAbsent over a slow link: %v", err)
		}
		if infos, err := st.List(ctx, "slow/", ""); err != nil || len(infos) != 1 {
			t.Fatalf("List over a slow link = %v, %v; want the one object", infos, err)
		}
	})
	t.Run("resets are retried", func(t *testing.T) {
		for _, op := range []string{"get", "stat", "list", "put-if-absent"} {
			p.Set(testenv.Faults{Reset: true, Times: 2})
			var err error
			switch op {
			case "get":
				var got []byte
				got, err = read(t)
				wantData(t, got, err)
			case "stat":
				var info objectstore.ObjectInfo
				info, err = st.Stat(ctx, "obj")
				if err == nil && info.Size != int64(len(data)) {
					t.Fatalf("Stat size %d, want %d", info.Size, len(data))
				}
			case "list":
				_, err = st.List(ctx, "", "")
			case "put-if-absent":
				err = st.PutIfAbsent(ctx, "reset/0.json", strings.NewReader("{}"), 2)
			}
			if err != nil {
				t.Fatalf("%s after two connection resets: %v", op, err)
			}
		}
	})
	t.Run("a hung request times out and is retried", func(t *testing.T) {
		p.Set(testenv.Faults{Hang: true, Times: 1})
		got, err := read(t)
		wantData(t, got, err)
	})
	t.Run("a server that never answers fails the call", func(t *testing.T) {
		p.Set(testenv.Faults{Hang: true})
		_, err := within(t, "Stat", func() (objectstore.ObjectInfo, error) { return st.Stat(ctx, "obj") })
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("Stat on a hung server: %v, want a timeout", err)
		}
		err = func() error {
			_, err := within(t, "PutIfAbsent", func() (int, error) {
				return 0, st.PutIfAbsent(ctx, "hung/0.json", strings.NewReader("{}"), 2)
			})
			return err
		}()
		if err == nil || errors.Is(err, objectstore.ErrExist) {
			t.Fatalf("PutIfAbsent on a hung server: %v, want a timeout", err)
		}
	})
	t.Run("a body that hangs midway is resumed", func(t *testing.T) {
		p.Set(testenv.Faults{StallAfter: 200 << 10, Times: 1})
		got, err := read(t)
		wantData(t, got, err)
	})
	t.Run("a body that always hangs midway fails", func(t *testing.T) {
		p.Set(testenv.Faults{StallAfter: 200 << 10})
		got, err := read(t)
		wantError(t, got, err)
	})
	t.Run("a response cut midway is resumed", func(t *testing.T) {
		p.Set(testenv.Faults{CutAfter: 300 << 10, Times: 1})
		got, err := read(t)
		wantData(t, got, err)
	})
	t.Run("a response always cut midway fails", func(t *testing.T) {
		// 100 KiB a connection: more resumes than the store's attempts for both reads.
		p.Set(testenv.Faults{CutAfter: 100 << 10})
		got, err := read(t)
		wantError(t, got, err)
		// Ranged reads too: never fewer bytes than asked for without an error.
		rg := st.(objectstore.RangeGetter)
		got, err = within(t, "GetRange", func() ([]byte, error) {
			rc, err := rg.GetRange(ctx, "obj", 1000, 900<<10)
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(rc)
		})
		if err == nil {
			t.Fatalf("GetRange through cut responses = %d bytes and no error, want an error", len(got))
		}
	})
	t.Run("a response cut in its headers is retried", func(t *testing.T) {
		p.Set(testenv.Faults{CutAfter: 40, Times: 2})
		got, err := read(t)
		wantData(t, got, err)
	})
	p.Set(testenv.Faults{})
	got, err := read(t)
	wantData(t, got, err)
}
