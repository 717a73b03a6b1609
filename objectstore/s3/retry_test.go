package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// faultTransport sits between the store and the real MinIO and injects failures into
// the requests that match: a 503 answer, a reset before the request is sent, or a reset
// after the server has done the work (the answer is lost).
type faultTransport struct {
	next http.RoundTripper

	mu       sync.Mutex // guards the fields below
	match    func(*http.Request) bool
	faults   []string // consumed one per matching request: "503", "reset", "lost"; then pass
	requests int      // matching requests seen
}

func (f *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	var fault string
	if f.match != nil && f.match(req) {
		f.requests++
		if len(f.faults) > 0 {
			fault, f.faults = f.faults[0], f.faults[1:]
		}
	}
	f.mu.Unlock()
	switch fault {
	case "503":
		if req.Body != nil {
			io.Copy(io.Discard, req.Body)
			req.Body.Close()
		}
		return &http.Response{
			StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req,
		}, nil
	case "reset":
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("injected: %w", syscall.ECONNRESET)
	case "lost":
		resp, err := f.next.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, fmt.Errorf("injected after the server answered: %w", syscall.ECONNRESET)
	}
	return f.next.RoundTrip(req)
}

func (f *faultTransport) set(match func(*http.Request) bool, faults ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.match, f.faults, f.requests = match, faults, 0
}

func (f *faultTransport) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func isPut(r *http.Request) bool    { return r.Method == http.MethodPut }
func isHead(r *http.Request) bool   { return r.Method == http.MethodHead }
func isObject(r *http.Request) bool { return strings.Contains(r.URL.Path, "/test/") }

// faultyStore is a store on the test MinIO whose requests pass through a faultTransport.
func faultyStore(t *testing.T, maxRetries int) (*s3.Store, *faultTransport) {
	cfg := testenv.S3Config(t)
	cfg.Prefix = testenv.S3Prefix(t)
	next, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	ft := &faultTransport{next: next}
	cfg.Transport, cfg.MaxRetries = ft, maxRetries
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ft.set(nil)
		infos, _ := st.List(context.Background(), "", "")
		for _, in := range infos {
			st.Delete(context.Background(), in.Key)
		}
	})
	return st, ft
}

func TestTransientFailuresAreRetried(t *testing.T) {
	st, ft := faultyStore(t, 5)
	ctx := context.Background()
	cases := []struct {
		name      string
		match     func(*http.Request) bool
		faults    []string
		call      func() error
		wantCalls int
	}{
		{"Put after 503, reset", isPut, []string{"503", "reset"},
			func() error { return st.Put(ctx, "k/put", bytes.NewReader([]byte("v")), 1) }, 3},
		{"PutIfAbsent after 503, reset", isPut, []string{"503", "reset"},
			func() error { return st.PutIfAbsent(ctx, "k/pia", bytes.NewReader([]byte("v")), 1) }, 3},
		{"Stat after 503", func(r *http.Request) bool { return isHead(r) && isObject(r) }, []string{"503", "503"},
			func() error { _, err := st.Stat(ctx, "k/put"); return err }, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ft.set(c.match, c.faults...)
			if err := c.call(); err != nil {
				t.Fatalf("got err %v, want success after %d transient failures", err, len(c.faults))
			}
			if got := ft.count(); got != c.wantCalls {
				t.Fatalf("requests sent: %d, want %d", got, c.wantCalls)
			}
		})
	}
}

// A PutIfAbsent whose answer is lost retries, meets 412, and finds its own bytes: that
// is success, not ErrExist. Someone else's bytes are still ErrExist.
func TestPutIfAbsentLostAnswer(t *testing.T) {
	st, ft := faultyStore(t, 5)
	ctx := context.Background()
	ft.set(isPut, "lost")
	if err := st.PutIfAbsent(ctx, "log/0.json", bytes.NewReader([]byte("mine")), 4); err != nil {
		t.Fatalf("PutIfAbsent whose first answer was lost: got err %v, want nil (the object is ours)", err)
	}
	if got := ft.count(); got != 2 {
		t.Fatalf("requests sent: %d, want 2 (the lost one and the retry)", got)
	}
	ft.set(isPut, "lost")
	err := st.PutIfAbsent(ctx, "log/0.json", bytes.NewReader([]byte("other")), 5)
	if !errors.Is(err, objectstore.ErrExist) {
		t.Fatalf("PutIfAbsent on someone else's object after a lost answer: got err %v, want ErrExist", err)
	}
	rc, err := st.Get(ctx, "log/0.json")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "mine" {
		t.Fatalf("stored bytes %q, want %q", b, "mine")
	}
}

func TestRetriesAreBounded(t *testing.T) {
	st, ft := faultyStore(t, 3)
	ctx := context.Background()
	always := []string{"503", "503", "503", "503", "503", "503", "503", "503"}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Put", func() error { return st.Put(ctx, "b/put", bytes.NewReader([]byte("v")), 1) }},
		{"PutIfAbsent", func() error { return st.PutIfAbsent(ctx, "b/pia", bytes.NewReader([]byte("v")), 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft.set(isPut, always...)
			if err := c.call(); err == nil {
				t.Fatalf("got no error from a service that always answers 503")
			}
			if got := ft.count(); got != 3 {
				t.Fatalf("requests sent: %d, want 3 (MaxRetries)", got)
			}
		})
	}
	t.Run("context ends the waiting", func(t *testing.T) {
		st, ft := faultyStore(t, 50)
		ft.set(isPut, slicesRepeat("503", 50)...)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := st.PutIfAbsent(ctx, "b/ctx", bytes.NewReader([]byte("v")), 1)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got err %v, want context.DeadlineExceeded", err)
		}
		if got := ft.count(); got >= 50 {
			t.Fatalf("requests sent: %d, want the context to stop the retries early", got)
		}
	})
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// Client errors (4xx) are final: a wrong secret key is tried once.
func TestClientErrorsAreNotRetried(t *testing.T) {
	cfg := testenv.S3Config(t)
	cfg.Prefix = testenv.S3Prefix(t)
	cfg.SecretKey = "wrong-" + cfg.SecretKey
	next, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	ft := &faultTransport{next: next}
	cfg.Transport = ft
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Put", func() error { return st.Put(ctx, "k", bytes.NewReader([]byte("v")), 1) }},
		{"PutIfAbsent", func() error { return st.PutIfAbsent(ctx, "k", bytes.NewReader([]byte("v")), 1) }},
		{"Stat", func() error { _, err := st.Stat(ctx, "k"); return err }},
		{"Get", func() error { rc, err := st.Get(ctx, "k"); closeIf(rc); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft.set(func(*http.Request) bool { return true })
			err := c.call()
			if err == nil || errors.Is(err, objectstore.ErrNotExist) || errors.Is(err, objectstore.ErrExist) {
				t.Fatalf("with a wrong secret key: got err %v, want an access error", err)
			}
			if got := ft.count(); got != 1 {
				t.Fatalf("requests sent: %d, want 1 (a 403 is not retried)", got)
			}
		})
	}
}

func closeIf(rc io.ReadCloser) {
	if rc != nil {
		rc.Close()
	}
}
