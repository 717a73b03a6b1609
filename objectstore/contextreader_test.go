package objectstore_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// A context reader reads through until its context is done, then fails every read with
// the context's error.
func TestContextReaderStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := objectstore.ContextReader(ctx, strings.NewReader("abcdef"))
	buf := make([]byte, 3)
	if n, err := r.Read(buf); n != 3 || err != nil || string(buf) != "abc" {
		t.Fatalf("read %q (%d, %v), want abc", buf[:n], n, err)
	}
	cancel()
	if n, err := r.Read(buf); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %d, %v; want 0 and context.Canceled", n, err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadAll after cancel: %v", err)
	}
}
