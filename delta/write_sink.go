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
// a single Put of known size either way. In memory the bytes are kept in blocks that
// grow with the file, so that a large file is never copied to a buffer twice its size
// (a bytes.Buffer's doubling: each copy into fresh, zeroed memory).
type fileSink struct {
	w    *DataWriter
	buf  blocks
	tmp  *os.File // nil while in memory
	size int64
}

// blocks are bytes kept in memory as a list of blocks.
type blocks struct {
	list [][]byte
	n    int
}

const (
	minBlock = 64 << 10
	maxBlock = 8 << 20
)

// Len is the number of bytes held.
func (b *blocks) Len() int { return b.n }

// Write appends p.
func (b *blocks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(b.list) == 0 || len(b.list[len(b.list)-1]) == cap(b.list[len(b.list)-1]) {
			b.list = append(b.list, make([]byte, 0, min(max(b.n, minBlock), maxBlock)))
		}
		last := &b.list[len(b.list)-1]
		k := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
	b.n += n
	return n, nil
}

// reader reads the bytes held.
func (b *blocks) reader() io.Reader {
	rs := make([]io.Reader, len(b.list))
	for i, bl := range b.list {
		rs[i] = bytes.NewReader(bl)
	}
	return io.MultiReader(rs...)
}

// WriteTo writes the bytes held to w.
func (b *blocks) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, bl := range b.list {
		k, err := w.Write(bl)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
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
	if _, err := s.buf.WriteTo(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("spill data file: %w", err)
	}
	s.w.memBytes -= int64(s.buf.Len())
	s.buf = blocks{}
	s.tmp = f
	return nil
}

// len is the number of bytes written so far.
func (s *fileSink) len() int64 { return s.size }

// upload puts the bytes at key and releases the sink.
func (s *fileSink) upload(ctx context.Context, store objectstore.Store, key string) error {
	defer s.release()
	r := s.buf.reader()
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
	s.buf = blocks{}
}
