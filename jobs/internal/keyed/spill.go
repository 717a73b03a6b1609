package keyed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/spilldir"
)

// Spill files: the rows a stage over its memory budget sets aside on local disk (Arrow
// IPC streams, uncompressed: the page cache holds them while they are fresh), each
// written once and read back in passes. They live in a private directory that the run
// removes with everything in it on every way out (success, failure, cancellation); the
// directory names its owner (internal/spilldir), so that one a killed process left is
// swept when run or serve starts.

// Dir is a run's private directory of spill files. Its files may be created on several
// goroutines at once (a target set aside while the batch is read).
type Dir struct {
	path string
	n    atomic.Int64
	buf  int   // write buffer of each file
	join int64 // what a joining fanout holds before it sets it aside
}

// NewDir creates the directory under base (default os.TempDir()), for a run whose
// passes hold limit bytes.
func NewDir(base string, limit int64) (*Dir, error) {
	if base == "" {
		base = os.TempDir()
	}
	p, err := spilldir.Create(base) // marked with its owner: a killed process's is swept
	if err != nil {
		return nil, fmt.Errorf("spill directory: %w", err)
	}
	// A joining fanout holds an eighth of the budget (at least 256 KiB: a tiny budget's
	// run joins too, and at most 32 MiB: spill records of thousands of rows).
	return &Dir{path: p, buf: int(min(max(limit/2048, 4<<10), 64<<10)), join: min(max(limit/8, 256<<10), 32<<20)}, nil
}

// Remove deletes the directory and its files (open ones too, on Unix); nil: nothing.
func (d *Dir) Remove() {
	if d != nil {
		os.RemoveAll(d.path)
	}
}

// ScanOptions are the options of a scan by a run whose passes hold limit bytes: a small
// budget reads smaller records, one at a time.
func ScanOptions(limit int64, o delta.ScanOptions) delta.ScanOptions {
	o.BatchSize = min(max(limit/4096, 4096), delta.DefaultScanBatchSize)
	o.ReadAhead = limit >= 128<<20
	return o
}

// File is one Arrow IPC stream on local disk: written, finished, then read any number
// of times.
type File struct {
	path   string
	schema *arrow.Schema
	f      *os.File
	bw     *bufio.Writer
	w      *ipc.Writer
	rows   int64
	bytes  int64 // Arrow bytes of the rows written (an estimate of what reading them holds)
}

// Create starts a spill file of records of schema.
func (d *Dir) Create(schema *arrow.Schema) (*File, error) {
	p := filepath.Join(d.path, fmt.Sprintf("%05d.arrows", d.n.Add(1)))
	f, err := os.Create(p)
	if err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	bw := bufio.NewWriterSize(f, d.buf)
	return &File{path: p, schema: schema, f: f, bw: bw, w: ipc.NewWriter(bw, ipc.WithSchema(schema))}, nil
}

// Write appends rec (of the file's schema); bytes is what its rows count for.
func (s *File) Write(rec arrow.RecordBatch, bytes int64) error {
	if rec.NumRows() == 0 {
		return nil
	}
	if err := s.w.Write(rec); err != nil {
		return fmt.Errorf("spill file %s: %w", s.path, err)
	}
	s.rows += rec.NumRows()
	s.bytes += bytes
	return nil
}

// Rows and Bytes are what the file holds (nil: nothing).
func (s *File) Rows() int64 {
	if s == nil {
		return 0
	}
	return s.rows
}

func (s *File) Bytes() int64 {
	if s == nil {
		return 0
	}
	return s.bytes
}

// Finish ends the stream and closes the file (again: nothing).
func (s *File) Finish() error {
	if s == nil || s.f == nil {
		return nil
	}
	err := endStream(s.path, s.w, s.bw, s.f)
	s.f, s.bw, s.w = nil, nil, nil // (their buffers)
	return err
}

// endStream ends the IPC stream w of the spill file at path, flushes its buffer and
// closes the file.
func endStream(path string, w *ipc.Writer, bw *bufio.Writer, f *os.File) error {
	err := w.Close()
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spill file %s: %w", path, err)
	}
	return nil
}

// sharedFile is a fanout's one spill file: an IPC stream written record by record, the
// messages of each record a segment of it.
type sharedFile struct {
	path string
	f    *os.File
	bw   *bufio.Writer
	cw   countingWriter
	w    *ipc.Writer
	head []byte // the stream's schema message (its first bytes)
}

// createShared starts a fanout's spill file of records of schema.
func (d *Dir) createShared(schema *arrow.Schema) (*sharedFile, error) {
	var hb bytes.Buffer
	if err := ipc.NewWriter(&hb, ipc.WithSchema(schema)).Close(); err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	head := hb.Bytes()[:hb.Len()-len(endOfStream)]
	p := filepath.Join(d.path, fmt.Sprintf("%05d.arrows", d.n.Add(1)))
	f, err := os.Create(p)
	if err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	s := &sharedFile{path: p, f: f, bw: bufio.NewWriterSize(f, d.buf), head: head}
	s.cw = countingWriter{w: s.bw, keep: len(head)}
	s.w = ipc.NewWriter(&s.cw, ipc.WithSchema(schema))
	return s, nil
}

// write appends rec: its messages are the segment returned.
func (s *sharedFile) write(rec arrow.RecordBatch) (segment, error) {
	start := s.cw.n
	if err := s.w.Write(rec); err != nil {
		return segment{}, fmt.Errorf("spill file %s: %w", s.path, err)
	}
	if start == 0 { // (the stream began with its schema message: the head)
		if !bytes.Equal(s.cw.first, s.head) {
			return segment{}, fmt.Errorf("internal error: spill file %s does not begin with its schema message", s.path)
		}
		start = int64(len(s.head))
	}
	return segment{start, s.cw.n - start}, nil
}

// finish ends the stream and closes the file (nil: nothing).
func (s *sharedFile) finish() error {
	if s == nil || s.f == nil {
		return nil
	}
	err := endStream(s.path, s.w, s.bw, s.f)
	s.f, s.bw, s.w = nil, nil, nil
	return err
}

// countingWriter counts the bytes written through it, keeping the first keep of them.
type countingWriter struct {
	w     io.Writer
	n     int64
	keep  int
	first []byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if k := c.keep - len(c.first); k > 0 {
		c.first = append(c.first, p[:min(k, len(p))]...)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Part is records set aside to read back: the IPC stream made of head (the schema
// message; nil when the segments are whole streams), the segments of the file at path,
// one after another, and (with a head) the end-of-stream marker. A fanout's ranges are
// parts of its one file; a spill file is one part.
type Part struct {
	path   string
	schema *arrow.Schema
	head   []byte
	segs   []segment
}

// segment is a byte range of a spill file (n < 0: to its end).
type segment struct{ off, n int64 }

// endOfStream is the IPC end-of-stream marker.
var endOfStream = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// Part is the file's records, once it is finished.
func (s *File) Part() *Part {
	if s == nil {
		return nil
	}
	return &Part{path: s.path, schema: s.schema, segs: []segment{{0, -1}}}
}

// Reader reads a part record by record.
type Reader struct {
	f   *os.File
	r   *ipc.Reader
	rec arrow.RecordBatch
	err error
}

// Open starts reading a part (nil: a range without rows, read as empty).
func (pt *Part) Open() (*Reader, error) {
	if pt == nil || len(pt.segs) == 0 {
		return &Reader{}, nil
	}
	f, err := os.Open(pt.path)
	if err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	parts := make([]io.Reader, 0, len(pt.segs)+2)
	if pt.head != nil {
		parts = append(parts, bytes.NewReader(pt.head))
	}
	for _, sg := range pt.segs {
		n := sg.n
		if n < 0 {
			n = math.MaxInt64 - sg.off
		}
		parts = append(parts, io.NewSectionReader(f, sg.off, n))
	}
	if pt.head != nil {
		parts = append(parts, bytes.NewReader(endOfStream))
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(io.MultiReader(parts...), 64<<10), ipc.WithSchema(pt.schema), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("spill file %s: %w", pt.path, err)
	}
	return &Reader{f: f, r: r}, nil
}

// Open starts reading a finished spill file (nil: a file never created, read as empty).
func (s *File) Open() (*Reader, error) { return s.Part().Open() }

// Next moves to the next record, which the caller owns (and releases) from then on.
func (r *Reader) Next() bool {
	r.rec = nil
	if r.r == nil || r.err != nil {
		return false
	}
	if !r.r.Next() {
		if err := r.r.Err(); err != nil && !errors.Is(err, io.EOF) {
			r.err = fmt.Errorf("spill file %s: %w", r.f.Name(), err)
		}
		return false
	}
	r.rec = r.r.RecordBatch()
	r.rec.Retain()
	return true
}

// RecordBatch is the current record.
func (r *Reader) RecordBatch() arrow.RecordBatch { return r.rec }

// Err is the error that ended the reading, if any.
func (r *Reader) Err() error { return r.err }

// Close stops reading.
func (r *Reader) Close() {
	if r.r != nil {
		r.r.Release()
		r.f.Close()
		r.r = nil
	}
}

// Each reads every record of the given parts in order, calling fn with each
// (released after it returns). The files are read on a goroutine of their own, up to
// eachAhead records ahead of fn: reading a record back (its bytes copied out of the
// page cache into fresh buffers) takes the other core while fn works on the one before.
func Each(ctx context.Context, parts []*Part, fn func(rec arrow.RecordBatch) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recs := make(chan arrow.RecordBatch, eachAhead)
	var readErr error
	go func() {
		defer close(recs)
		readErr = readEach(ctx, parts, func(rec arrow.RecordBatch) error {
			select {
			case recs <- rec:
				return nil
			case <-ctx.Done():
				rec.Release()
				return ctx.Err()
			}
		})
	}()
	var err error
	for rec := range recs {
		if err == nil {
			if err = ctx.Err(); err == nil {
				err = fn(rec)
			}
			if err != nil {
				cancel() // (the reader stops; what it read is drained and released)
			}
		}
		rec.Release()
	}
	if err != nil {
		return err
	}
	return readErr // (set before recs was closed)
}

// eachAhead is how many records Each reads ahead of its fn.
const eachAhead = 2

// readEach reads every record of parts in order, handing each to take (which owns it).
func readEach(ctx context.Context, parts []*Part, take func(rec arrow.RecordBatch) error) error {
	for _, s := range parts {
		r, err := s.Open()
		if err != nil {
			return err
		}
		for r.Next() {
			err := ctx.Err()
			if err == nil {
				err = take(r.RecordBatch())
			} else {
				r.RecordBatch().Release()
			}
			if err != nil {
				r.Close()
				return err
			}
		}
		r.Close()
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}

// RecordBytes is the size of rec's buffers: its share of them, when sliced.
func RecordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += ArrayBytes(c.Data())
	}
	return n
}

// ArrayBytes is the size of the rows of d. A slice shares its parent's buffers (a
// batch's lineage columns are slices of one long array of the file's): it counts the
// bytes its rows span, as a copy of them would take, not the shared buffers whole, which
// would count them once per slice.
func ArrayBytes(d arrow.ArrayData) int64 {
	bufs, n, off := d.Buffers(), int64(d.Len()), int64(d.Offset())
	var size int64
	if len(bufs) > 0 && bufs[0] != nil {
		size = (n + 7) / 8 // validity
	}
	switch t := d.DataType().(type) {
	case *arrow.StringType, *arrow.BinaryType:
		if len(bufs) == 3 && bufs[1] != nil && bufs[1].Len() >= int(4*(off+n+1)) {
			offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())
			return size + 4*(n+1) + int64(offs[off+n]-offs[off])
		}
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		if len(bufs) == 3 && bufs[1] != nil && bufs[1].Len() >= int(8*(off+n+1)) {
			offs := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())
			return size + 8*(n+1) + offs[off+n] - offs[off]
		}
	case *arrow.DictionaryType:
		// (fixed-width indices, but a dictionary besides: below)
	case arrow.FixedWidthDataType:
		if len(bufs) == 2 {
			return size + (n*int64(t.BitWidth())+7)/8
		}
	}
	// Other layouts (nested, dictionaries): arrow's count, their buffers whole.
	if a, ok := d.(*array.Data); ok {
		return int64(a.SizeInBytes())
	}
	return 0
}
