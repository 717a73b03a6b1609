package keyed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
	err := s.w.Close()
	if ferr := s.bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f, s.bw, s.w = nil, nil, nil // (their buffers)
	if err != nil {
		return fmt.Errorf("spill file %s: %w", s.path, err)
	}
	return nil
}

// Reader reads a finished spill file record by record.
type Reader struct {
	f   *os.File
	r   *ipc.Reader
	rec arrow.RecordBatch
	err error
}

// Open starts reading a finished spill file (nil: a file never created, read as empty).
func (s *File) Open() (*Reader, error) {
	if s == nil {
		return &Reader{}, nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(f, 64<<10), ipc.WithSchema(s.schema), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("spill file %s: %w", s.path, err)
	}
	return &Reader{f: f, r: r}, nil
}

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

// Each reads every record of the given spill files in order, calling fn with each
// (released after it returns). The files are read on a goroutine of their own, up to
// eachAhead records ahead of fn: reading a record back (its bytes copied out of the
// page cache into fresh buffers) takes the other core while fn works on the one before.
func Each(ctx context.Context, files []*File, fn func(rec arrow.RecordBatch) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recs := make(chan arrow.RecordBatch, eachAhead)
	var readErr error
	go func() {
		defer close(recs)
		readErr = readEach(ctx, files, func(rec arrow.RecordBatch) error {
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

// readEach reads every record of files in order, handing each to take (which owns it).
func readEach(ctx context.Context, files []*File, take func(rec arrow.RecordBatch) error) error {
	for _, s := range files {
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
