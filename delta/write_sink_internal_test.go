package delta

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// failingPut is a mem store whose Put reads limit bytes and then fails.
type failingPut struct {
	*mem.Store
	limit int64
}

var errPutBroke = errors.New("put broke")

func (s failingPut) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if _, err := io.CopyN(io.Discard, r, s.limit); err != nil {
		return err
	}
	return errPutBroke
}

// TestStreamSink writes through a stream sink in writes smaller and larger than its
// blocks: the object is the bytes written, in order; a released sink publishes nothing;
// a Put that fails part way fails the writes or the upload with its error, without
// waiting for the writer to stop writing.
func TestStreamSink(t *testing.T) {
	ctx := context.Background()
	var want bytes.Buffer
	for i := range 3*streamBlock + 12345 {
		want.WriteByte(byte(i * 7919 >> 3))
	}
	st := mem.New(mem.Config{})
	s := newStreamSink(ctx, st, "t/a")
	for p := want.Bytes(); len(p) > 0; {
		n := min(len(p), 1+len(p)%(streamBlock+777), 3*streamBlock/2)
		if _, err := s.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if s.len() != int64(want.Len()) {
		t.Errorf("len %d, want %d", s.len(), want.Len())
	}
	if err := s.upload(ctx, st, ""); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "t/a")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("the object has %d bytes, not the %d written", len(got), want.Len())
	}

	s = newStreamSink(ctx, st, "t/b")
	s.Write(want.Bytes())
	s.release()
	if _, err := st.Stat(ctx, "t/b"); err == nil {
		t.Error("a released sink published its object")
	}

	s = newStreamSink(ctx, failingPut{st, 1000}, "t/c")
	var werr error
	for range 100 {
		if _, werr = s.Write(want.Bytes()[:streamBlock]); werr != nil {
			break
		}
	}
	uerr := s.upload(ctx, st, "")
	if !errors.Is(werr, errPutBroke) || !errors.Is(uerr, errPutBroke) {
		t.Errorf("after a Put failed: write error %v, upload error %v; want the Put's error", werr, uerr)
	}
}
