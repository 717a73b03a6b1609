package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// wholeFileLimit: objects up to this size are fetched with one Get rather than ranged
// reads (a variable so tests can force the ranged path).
var wholeFileLimit int64 = 8 << 20

// rangeReaderAt adapts a store with GetRange to the io.ReaderAt + io.Seeker that the
// Parquet reader wants, so only the footer and the needed column chunks are fetched.
type rangeReaderAt struct {
	ctx  context.Context
	rg   objectstore.RangeGetter
	key  string
	size int64
	pos  int64
}

func (r *rangeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	n := int64(len(p))
	if off+n > r.size {
		n = r.size - off
	}
	rc, err := r.rg.GetRange(r.ctx, r.key, off, n)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	got, err := io.ReadFull(rc, p[:n])
	if err == nil && got < len(p) {
		err = io.EOF
	}
	return got, err
}

func (r *rangeReaderAt) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return 0, errors.New("seek before start")
	}
	r.pos = offset
	return offset, nil
}

// fileBuffers recycles the buffers of files read whole: a scan of many files then reuses
// memory instead of having fresh, zeroed pages for each.
var fileBuffers sync.Pool // of *[]byte

// readWhole reads rc to its end into a pooled buffer (size, when known, sizes it) and
// returns the buffer to give back and the bytes read.
func readWhole(rc io.ReadCloser, size int64) (*[]byte, []byte, error) {
	defer rc.Close()
	held, _ := fileBuffers.Get().(*[]byte)
	if held == nil {
		held = new([]byte)
	}
	buf := bytes.NewBuffer((*held)[:0])
	if size > 0 {
		buf.Grow(int(size))
	}
	if _, err := io.Copy(buf, rc); err != nil {
		fileBuffers.Put(held)
		return nil, nil, err
	}
	*held = buf.Bytes()
	return held, buf.Bytes(), nil
}

// openParquet opens a data file for Arrow reading. size is the object's size if known
// (the add action's), else -1. The returned closer releases the Parquet reader.
func openParquet(ctx context.Context, store objectstore.Store, key string, size int64, mem memory.Allocator) (*pqarrow.FileReader, func(), error) {
	src, release, err := openSource(ctx, store, key, size)
	if err != nil {
		return nil, nil, err
	}
	fr, closeReader, err := parquetFrom(src, key, mem)
	if err != nil {
		release()
		return nil, nil, err
	}
	return fr, func() { closeReader(); release() }, nil
}

// source is an opened object for random reads. buffered says whether the Parquet reader
// should stream pages from it through small buffers (reads are cheap) rather than
// fetch whole column chunks.
type source struct {
	parquet.ReaderAtSeeker
	buffered bool
}

// openSource opens object key (size bytes, or -1: unknown) for reading at any offset:
// in place for a local file, by ranged reads for a large object of a store that has
// them, else whole in a pooled buffer. release closes it (once).
func openSource(ctx context.Context, store objectstore.Store, key string, size int64) (source, func(), error) {
	if o, ok := store.(objectstore.ReaderAtOpener); ok {
		// Pages are read where they lie, through one small buffer per column.
		ra, n, err := o.OpenReaderAt(ctx, key)
		if err != nil {
			return source{}, nil, err
		}
		if err := checkSize(key, n, size); err != nil {
			ra.Close()
			return source{}, nil, err
		}
		return source{io.NewSectionReader(ra, 0, n), true}, func() { ra.Close() }, nil
	}
	rg, ranged := store.(objectstore.RangeGetter)
	if ranged && (size < 0 || size > wholeFileLimit) {
		// Ranged reads trust the size to find the footer: ask the store for it.
		info, err := store.Stat(ctx, key)
		if err != nil {
			return source{}, nil, err
		}
		if err := checkSize(key, info.Size, size); err != nil {
			return source{}, nil, err
		}
		size = info.Size
	}
	if ranged && size > wholeFileLimit {
		// One ranged read per column chunk (not per 16 KiB buffer): few requests on S3.
		return source{&rangeReaderAt{ctx: ctx, rg: rg, key: key, size: size}, false}, func() {}, nil
	}
	// The file is in memory: stream pages from it without another copy. (The reader
	// copies every page out of it, so no record points into it.)
	rc, err := store.Get(ctx, key)
	if err != nil {
		return source{}, nil, err
	}
	held, data, err := readWhole(rc, size)
	if err != nil {
		return source{}, nil, fmt.Errorf("read %s: %w", key, err)
	}
	if err := checkSize(key, int64(len(data)), size); err != nil {
		fileBuffers.Put(held)
		return source{}, nil, err
	}
	var once sync.Once // a buffer in the pool twice would be shared
	return source{bytes.NewReader(data), true}, func() { once.Do(func() { fileBuffers.Put(held) }) }, nil
}

// checkSize compares an object's size with the size the log records for it (want < 0:
// not recorded). A file that is shorter or longer was truncated or replaced after the
// commit: reading it anyway would give other rows than the version holds.
func checkSize(key string, got, want int64) error {
	if want >= 0 && got != want {
		return fmt.Errorf("data file %s is %d bytes, but the log records %d: the file was truncated or replaced after its commit", key, got, want)
	}
	return nil
}

// parquetFrom opens the Parquet file in src (key names it in errors) for Arrow reads.
func parquetFrom(src source, key string, mem memory.Allocator) (*pqarrow.FileReader, func(), error) {
	props := parquet.NewReaderProperties(pqfile.PageBuffers) // the pages; arrays come from mem
	props.BufferedStreamEnabled = src.buffered
	pf, err := file.NewParquetReader(src.ReaderAtSeeker, file.WithReadProps(props))
	if err != nil {
		return nil, nil, fmt.Errorf("open parquet %s: %w", key, err)
	}
	// Not Parallel: pqfile.Columns decodes each top-level field on its own goroutine and
	// recovers a panic there; a struct's children loaded on goroutines of pqarrow's own
	// would escape that.
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{PreAllocBinaryData: true}, mem)
	if err != nil {
		pf.Close()
		return nil, nil, fmt.Errorf("open parquet %s: %w", key, err)
	}
	return fr, func() { pf.Close() }, nil
}
