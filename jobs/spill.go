package jobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/spilldir"
)

// Spill files: the rows a stage over its memory budget sets aside on local disk (Arrow
// IPC streams, uncompressed: the page cache holds them while they are fresh), each
// written once and read back in passes. They live in a private directory that the stage
// removes with everything in it on every way out (success, failure, cancellation).

// spillDir is a stage's private directory of spill files.
type spillDir struct {
	path string
	n    int
	buf  int  // write buffer of each file
	env  *Env // reports progress (merge_parts.go)
}

// newSpillDir creates the directory under env.SpillDir (default os.TempDir()), for a
// stage whose passes hold limit bytes.
func newSpillDir(env *Env, limit int64) (*spillDir, error) {
	base := env.SpillDir
	if base == "" {
		base = os.TempDir()
	}
	p, err := spilldir.Create(base) // marked with its owner: a killed process's is swept
	if err != nil {
		return nil, fmt.Errorf("spill directory: %w", err)
	}
	return &spillDir{path: p, buf: int(min(max(limit/2048, 4<<10), 64<<10)), env: env}, nil
}

// scanOptions are the options of a scan by a stage whose passes hold limit bytes: a
// small budget reads smaller records, one at a time.
func scanOptions(limit int64, o delta.ScanOptions) delta.ScanOptions {
	o.BatchSize = min(max(limit/4096, 4096), delta.DefaultScanBatchSize)
	o.ReadAhead = limit >= 128<<20
	return o
}

// remove deletes the directory and its files (open ones too, on Unix).
func (d *spillDir) remove() {
	if d != nil {
		os.RemoveAll(d.path)
	}
}

// spillFile is one Arrow IPC stream on local disk: written, finished, then read any
// number of times.
type spillFile struct {
	path   string
	schema *arrow.Schema
	f      *os.File
	bw     *bufio.Writer
	w      *ipc.Writer
	rows   int64
	bytes  int64 // Arrow bytes of the rows written (an estimate of what reading them holds)
}

// create starts a spill file of records of schema.
func (d *spillDir) create(schema *arrow.Schema) (*spillFile, error) {
	d.n++
	p := filepath.Join(d.path, fmt.Sprintf("%05d.arrows", d.n))
	f, err := os.Create(p)
	if err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	bw := bufio.NewWriterSize(f, d.buf)
	return &spillFile{path: p, schema: schema, f: f, bw: bw, w: ipc.NewWriter(bw, ipc.WithSchema(schema))}, nil
}

// write appends rec (of the file's schema); bytes is what its rows count for.
func (s *spillFile) write(rec arrow.RecordBatch, bytes int64) error {
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

// finish ends the stream and closes the file (again: nothing).
func (s *spillFile) finish() error {
	if s.f == nil {
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

// spillReader reads a finished spill file record by record.
type spillReader struct {
	f   *os.File
	r   *ipc.Reader
	rec arrow.RecordBatch
	err error
}

// open starts reading a finished spill file (nil: a file never created, read as empty).
func (s *spillFile) open() (*spillReader, error) {
	if s == nil {
		return &spillReader{}, nil
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
	return &spillReader{f: f, r: r}, nil
}

// Next moves to the next record, which the caller owns (and releases) from then on.
func (r *spillReader) Next() bool {
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
func (r *spillReader) RecordBatch() arrow.RecordBatch { return r.rec }

// Err is the error that ended the reading, if any.
func (r *spillReader) Err() error { return r.err }

// Close stops reading.
func (r *spillReader) Close() {
	if r.r != nil {
		r.r.Release()
		r.f.Close()
		r.r = nil
	}
}

// each reads every record of the given spill files in order, calling fn with each
// (released after it returns).
func each(ctx context.Context, files []*spillFile, fn func(rec arrow.RecordBatch) error) error {
	for _, s := range files {
		r, err := s.open()
		if err != nil {
			return err
		}
		for r.Next() {
			rec := r.RecordBatch()
			err := ctx.Err()
			if err == nil {
				err = fn(rec)
			}
			rec.Release()
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

// recordBytes is the size of rec's buffers: its share of them, when sliced.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += arrayBytes(c.Data())
	}
	return n
}

// arrayBytes is the size of the rows of d. A slice shares its parent's buffers (a
// batch's lineage columns are slices of one long array of the file's): it counts the
// bytes its rows span, as a copy of them would take, not the shared buffers whole, which
// would count them once per slice.
func arrayBytes(d arrow.ArrayData) int64 {
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

// fanout spreads records over spill files by a part number per row, keeping the order
// of the rows within each part: one file per part that gets rows.
type fanout struct {
	dir    *spillDir
	schema *arrow.Schema
	files  []*spillFile
	perm   []int32
	starts []int
}

func newFanout(dir *spillDir, schema *arrow.Schema, parts int) *fanout {
	return &fanout{dir: dir, schema: schema, files: make([]*spillFile, parts), starts: make([]int, parts+1)}
}

// write sends row i of rec to part parts[i].
func (f *fanout) write(ctx context.Context, rec arrow.RecordBatch, parts []uint16) error {
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	clear(f.starts)
	for _, p := range parts {
		f.starts[p+1]++
	}
	for p := 1; p < len(f.starts); p++ {
		f.starts[p] += f.starts[p-1]
	}
	f.perm = append(f.perm[:0], make([]int32, n)...)
	next := append([]int(nil), f.starts[:len(f.starts)-1]...)
	for i, p := range parts {
		f.perm[next[p]] = int32(i)
		next[p]++
	}
	sorted, err := delta.GatherRows(ctx, rec, f.perm)
	if err != nil {
		return err
	}
	defer sorted.Release()
	per := float64(recordBytes(rec)) / float64(n)
	for p := range len(f.files) {
		lo, hi := f.starts[p], f.starts[p+1]
		if lo == hi {
			continue
		}
		if f.files[p] == nil {
			if f.files[p], err = f.dir.create(f.schema); err != nil {
				return err
			}
		}
		part := sorted.NewSlice(int64(lo), int64(hi))
		err := f.files[p].write(part, int64(per*float64(hi-lo)))
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// finish finishes every file.
func (f *fanout) finish() error {
	var errs []error
	for _, s := range f.files {
		if s != nil {
			errs = append(errs, s.finish())
		}
	}
	return errors.Join(errs...)
}

// partBytes and partRows are what part p holds.
func (f *fanout) partBytes(p int) int64 {
	if f.files[p] == nil {
		return 0
	}
	return f.files[p].bytes
}

func (f *fanout) partRows(p int) int64 {
	if f.files[p] == nil {
		return 0
	}
	return f.files[p].rows
}

// hashParts is the number of key hash ranges a stage over its budget spreads its rows
// over; a pass works on consecutive ranges, as many as fit.
const hashParts = 256

// keyRange is the key hash range of an encoded key: its keyHash (the event log's order,
// a signed int64) cut in hashParts equal ranges, numbered in that order.
func keyRange(key []byte) uint16 {
	return uint16((uint64(keyHash(key)) ^ 1<<63) >> 56)
}

// hashBounds are the smallest and largest keyHash of the ranges [lo, hi).
func hashBounds(lo, hi int) (int64, int64) {
	first := int64(uint64(lo)<<56 ^ 1<<63)
	last := int64((uint64(hi)<<56 - 1) ^ 1<<63)
	if hi >= hashParts {
		last = int64(^uint64(0) ^ 1<<63)
	}
	return first, last
}

// passes groups the ranges [0, hashParts) into consecutive runs whose cost (cost(p) of
// range p) stays within limit (a range over it alone is a run of its own).
func passes(cost func(p int) int64, limit int64) [][2]int {
	var out [][2]int
	lo, sum := 0, int64(0)
	for p := range hashParts {
		c := cost(p)
		if p > lo && sum+c > limit {
			out = append(out, [2]int{lo, p})
			lo, sum = p, 0
		}
		sum += c
	}
	return append(out, [2]int{lo, hashParts})
}

// keyFilter has a bit per key hash: set for the keys of a batch set aside, so that a
// scan of the target sets aside only the rows of keys the batch may have.
type keyFilter []uint64

// newKeyFilter sizes a filter at about 1/16 of a working set (at least 64 Ki bits).
func newKeyFilter(limit int64) keyFilter {
	bits := uint64(1) << 16
	for bits*2/8 <= uint64(limit/16) && bits < 1<<34 {
		bits *= 2
	}
	return make(keyFilter, bits/64)
}

func (f keyFilter) bit(key []byte) uint64 { return xxhash.Sum64(key) & (uint64(len(f))*64 - 1) }

func (f keyFilter) add(key []byte) {
	b := f.bit(key)
	f[b/64] |= 1 << (b % 64)
}

// mayHave reports whether key may have been added (false: surely not).
func (f keyFilter) mayHave(key []byte) bool {
	b := f.bit(key)
	return f[b/64]&(1<<(b%64)) != 0
}
