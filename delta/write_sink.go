package delta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// fileSink receives one data file's bytes until it is uploaded. It keeps them in memory
// while the writer's memory budget allows and spills to a temporary file otherwise, so
// that writing many partitions at once does not hold every file in memory. The upload is
// a single Put of known size either way.
type fileSink struct {
	w    *DataWriter
	buf  bytes.Buffer
	tmp  *os.File // nil while in memory
	size int64
}

func (s *fileSink) Write(p []byte) (int, error) {
	if s.tmp == nil && s.w.memBytes+int64(len(p)) > s.w.opts.MaxMemory && s.buf.Len() > 0 {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	var n int
	var err error
	if s.tmp != nil {
		n, err = s.tmp.Write(p)
	} else {
		n, err = s.buf.Write(p)
		s.w.memBytes += int64(n)
	}
	s.size += int64(n)
	return n, err
}

// spill moves the bytes held so far to a temporary file; later writes go there too.
func (s *fileSink) spill() error {
	f, err := os.CreateTemp(s.w.opts.TempDir, "orchestrator-part-*.parquet")
	if err != nil {
		return fmt.Errorf("spill data file: %w", err)
	}
	if _, err := f.Write(s.buf.Bytes()); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("spill data file: %w", err)
	}
	s.w.memBytes -= int64(s.buf.Len())
	s.buf = bytes.Buffer{}
	s.tmp = f
	return nil
}

// len is the number of bytes written so far.
func (s *fileSink) len() int64 { return s.size }

// upload puts the bytes at key and releases the sink.
func (s *fileSink) upload(ctx context.Context, store objectstore.Store, key string) error {
	defer s.release()
	var r io.Reader = bytes.NewReader(s.buf.Bytes())
	if s.tmp != nil {
		if _, err := s.tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		r = s.tmp
	}
	return store.Put(ctx, key, r, s.size)
}

// release frees the memory or removes the temporary file.
func (s *fileSink) release() {
	if s.tmp != nil {
		s.tmp.Close()
		os.Remove(s.tmp.Name())
		s.tmp = nil
	}
	s.w.memBytes -= int64(s.buf.Len())
	s.buf = bytes.Buffer{}
}
