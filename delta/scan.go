package delta

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// DefaultScanBatchSize is the number of rows per record a scan returns at most.
const DefaultScanBatchSize = 64 * 1024

// ScanOptions selects what a scan returns.
type ScanOptions struct {
	// Columns to return: top-level names (case-insensitive), in this order; empty means
	// every column of the table schema in schema order. Filters may still name nested
	// fields ("address.city").
	Columns []string
	// Filter, when not nil, keeps only the rows for which it is true (SQL semantics: a
	// comparison with null is not true). Files whose partition values or stats show they
	// hold no such row are not read.
	Filter expr.Predicate
	// BatchSize caps the rows per record (default DefaultScanBatchSize).
	BatchSize int64
	// Allocator for Arrow buffers (default memory.DefaultAllocator).
	Allocator memory.Allocator
	// TableURI is the table's absolute location (e.g. "s3://bucket/tables/t" or
	// "file:///data/t"), used to resolve add paths that are absolute URIs. An absolute path
	// outside it is an error.
	TableURI string
	// FilesOnly makes Filter prune whole files only: every row of a file that is read is
	// returned, in file order, so Position names each row's place in its file.
	FilesOnly bool
	// RowGroups, with FilesOnly, lets Filter prune row groups by their Parquet stats
	// too: every row of a row group that is read is returned, and Position still names
	// each row's place in its file.
	RowGroups bool
	// ReadAhead decodes the next record on another goroutine while the caller works on
	// the current one (one record more in memory). Worth it when the caller's work per
	// record is about as heavy as decoding it. Release stops that goroutine; a scanner
	// read ahead and never released keeps it waiting.
	ReadAhead bool
	// ParallelFiles decodes up to GOMAXPROCS files at once on other goroutines (each file
	// at most two records ahead of the caller); records still come in file order with the
	// same positions and stats. Worth it for scans of many files that the caller does
	// little with (a change feed read). Release stops the goroutines, as for ReadAhead.
	ParallelFiles bool
	// Pick, with FilesOnly, reads each batch's columns in steps: a step's columns are
	// decoded only at the rows the steps before it kept, and the columns no step names
	// only at the rows the last step kept (late materialization: the values of other
	// rows are not copied out of their pages). A record then holds the kept rows, and
	// Rows names each one's place in its file. A file's row groups are read on up to
	// GOMAXPROCS goroutines, each keeping what it picked until its turn: worth it when
	// the steps keep few rows.
	Pick []PickStep
}

// PickStep is one step of a scan's Pick.
type PickStep struct {
	// Columns the step reads: returned columns (ScanOptions.Columns) or, when it is
	// empty, the table's.
	Columns []string
	// Keep returns the rows of rec to keep (ascending indexes). rec holds this step's
	// columns and those of the steps before it, at the rows they kept, as the scan
	// returns them. It runs on the goroutines that read: with ParallelFiles, several
	// calls at once.
	Keep func(rec arrow.RecordBatch) ([]int32, error)
}

// ScanStats counts what a scan did; pruning tests and metrics read it.
type ScanStats struct {
	FilesTotal  int // files given to the scan
	FilesPruned int // skipped by partition values or stats
	FilesRead   int // opened
	// RowGroupsPruned counts row groups of opened files skipped by their Parquet stats.
	RowGroupsPruned int
	RowsRead        int64 // rows decoded from files
	RowsOut         int64 // rows returned
}

// Scanner streams a table's rows as Arrow records, one data file at a time. It implements
// array.RecordReader; a record is valid until the next call to Next.
type Scanner struct {
	ctx    context.Context
	store  objectstore.Store
	root   string
	opts   ScanOptions
	mem    memory.Allocator
	schema *StructType
	isPart map[string]bool // lower-case partition column names
	mapped bool            // schema has column mapping: files name columns physically

	out       *arrow.Schema  // the records returned
	work      []*StructField // out's fields plus filter-only columns
	workArrow *arrow.Schema  // Arrow form of work
	filter    *expr.Bound    // nil: keep all rows
	pick      [][]int        // per step of opts.Pick, its columns' indexes in work
	files     []*Add

	next  int       // index into files
	file  *fileScan // the file being read (sequential reading)
	rec   arrow.RecordBatch
	at    position  // of rec's first row
	err   error     // the error that ended reading (owned by the reading goroutine)
	stats ScanStats // owned by the reading goroutine
	refs  atomic.Int64

	// What the caller sees: with ReadAhead, err and stats belong to the goroutine that
	// reads ahead, which hands them over with each record.
	seenErr   error
	seenStats ScanStats
	ahead     chan scanned // nil until a read-ahead scan starts
	stop      context.CancelFunc
	par       *fileFanOut // ParallelFiles: the files being read on other goroutines
}

// scanned is a record read ahead, with its position and the error and stats as of
// reading it.
type scanned struct {
	rec   arrow.RecordBatch // nil at the end
	at    position
	err   error
	stats ScanStats
}

// position is where a record's first row is: its file and its index there; with Pick,
// rows holds every row's index.
type position struct {
	file  *Add
	first int64
	rows  []int64
}

// Rows returns, for a scan with Pick, the index in its file of each row of the current
// record (counting the rows its deletion vector keeps, as Position does); valid until
// the next call of Next.
func (s *Scanner) Rows() []int64 { return s.at.rows }

// Position returns the data file of the current record and the index in that file of
// the record's first row. Without a Filter, or with FilesOnly, a record's rows are
// consecutive rows of its file; otherwise ok is false. Indexes count the rows the file's
// deletion vector keeps (the logical rows), as MergePositions does.
func (s *Scanner) Position() (file *Add, first int64, ok bool) {
	if s.rec == nil || (s.filter != nil && !s.opts.FilesOnly) {
		return nil, 0, false
	}
	return s.at.file, s.at.first, true
}

var _ array.RecordReader = (*Scanner)(nil)

// Scan prepares a scan over the given live files of a table (schema and partition
// columns from its metadata, files from its snapshot) under root in store. Files are
// pruned up front with opts.Filter; nothing is read until Next.
func Scan(ctx context.Context, store objectstore.Store, root string, schema *StructType, partitionColumns []string, files []*Add, opts ScanOptions) (*Scanner, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultScanBatchSize
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	s := &Scanner{ctx: ctx, store: store, root: strings.Trim(root, "/"), opts: opts, mem: opts.Allocator,
		schema: schema, isPart: map[string]bool{}, mapped: schemaMapped(schema)}
	s.refs.Store(1)
	for _, pc := range partitionColumns {
		if schema.Field(pc) == nil {
			return nil, fmt.Errorf("scan: partition column %s is not in the table schema", pc)
		}
		s.isPart[strings.ToLower(pc)] = true
	}
	var outFields []*StructField
	if len(opts.Columns) == 0 {
		outFields = schema.Fields
	} else {
		for _, c := range opts.Columns {
			f := schema.Field(c)
			if f == nil {
				return nil, fmt.Errorf("scan: column %s is not in the table schema", c)
			}
			outFields = append(outFields, f)
		}
	}
	out, err := ArrowSchema(&StructType{Fields: outFields})
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	s.out = out
	s.work = append([]*StructField(nil), outFields...)
	if opts.Filter != nil {
		bp, err := bindPredicate(opts.Filter, schema)
		if err != nil {
			return nil, fmt.Errorf("scan: filter: %w", err)
		}
		s.filter = bp
		for _, name := range bp.Columns() {
			found := false
			for _, f := range s.work {
				if strings.EqualFold(f.Name, name) {
					found = true
					break
				}
			}
			if !found {
				s.work = append(s.work, schema.Field(name))
			}
		}
	}
	if s.workArrow, err = ArrowSchema(&StructType{Fields: s.work}); err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	if err := s.bindPick(); err != nil {
		return nil, err
	}
	s.stats.FilesTotal = len(files)
	for _, a := range files {
		if s.filter != nil {
			keep, err := s.filter.MayMatchFile(fileFacts(a, s.isPart))
			if err != nil {
				return nil, fmt.Errorf("scan: file %s: %w", a.Path, err)
			}
			if !keep {
				s.stats.FilesPruned++
				continue
			}
		}
		s.files = append(s.files, a)
	}
	s.seenStats = s.stats
	return s, nil
}

// Schema is the schema of the returned records.
func (s *Scanner) Schema() *arrow.Schema { return s.out }

// Stats reports what the scan did so far (with ReadAhead, up to the current record).
func (s *Scanner) Stats() ScanStats { return s.seenStats }

// Err is the error that ended the scan, if any.
func (s *Scanner) Err() error { return s.seenErr }

// RecordBatch is the current record.
func (s *Scanner) RecordBatch() arrow.RecordBatch { return s.rec }

// Record is RecordBatch (array.RecordReader's deprecated name).
func (s *Scanner) Record() arrow.RecordBatch { return s.rec }

// Retain adds a reference.
func (s *Scanner) Retain() { s.refs.Add(1) }

// Release drops a reference; the last one stops reading ahead and closes the current
// file and record.
func (s *Scanner) Release() {
	if s.refs.Add(-1) == 0 {
		if s.ahead != nil {
			s.stop()
			for r := range s.ahead {
				if r.rec != nil {
					r.rec.Release()
				}
			}
			s.ahead = nil
		}
		if s.par != nil {
			s.par.stop()
			s.par = nil
		}
		s.closeFile()
		if s.rec != nil {
			s.rec.Release()
			s.rec = nil
		}
	}
}

// Next advances to the next non-empty record.
func (s *Scanner) Next() bool {
	if s.rec != nil {
		s.rec.Release()
		s.rec = nil
	}
	if s.opts.ParallelFiles && len(s.files) > 1 {
		if s.par == nil && s.err == nil {
			s.par = s.fanOut()
		}
		s.rec, s.at = s.readParallel()
		s.seenErr, s.seenStats = s.err, s.stats
		return s.rec != nil
	}
	if !s.opts.ReadAhead {
		s.rec, s.at = s.read()
		s.seenErr, s.seenStats = s.err, s.stats
		return s.rec != nil
	}
	if s.seenErr != nil {
		return false
	}
	if s.ahead == nil {
		s.startReadAhead()
	}
	r, ok := <-s.ahead
	if !ok {
		return false
	}
	s.rec, s.at, s.seenErr, s.seenStats = r.rec, r.at, r.err, r.stats
	return s.rec != nil
}

// startReadAhead starts the goroutine that reads records into s.ahead, one ahead of the
// caller; it stops at the end, at an error, or when Release cancels it.
func (s *Scanner) startReadAhead() {
	ctx, stop := context.WithCancel(s.ctx)
	s.ctx, s.stop = ctx, stop
	s.ahead = make(chan scanned, 1)
	go func() {
		defer close(s.ahead)
		for {
			rec, at := s.read()
			s.ahead <- scanned{rec: rec, at: at, err: s.err, stats: s.stats}
			if rec == nil {
				return
			}
		}
	}()
}

// read returns the next non-empty record and its position, or nil at the end or at an
// error (s.err).
func (s *Scanner) read() (arrow.RecordBatch, position) {
	if s.err != nil {
		return nil, position{}
	}
	for {
		if err := s.ctx.Err(); err != nil {
			s.err = err
			return nil, position{}
		}
		if s.file == nil {
			if s.next >= len(s.files) {
				return nil, position{}
			}
			a := s.files[s.next]
			s.next++
			f, err := s.openFile(s.ctx, a)
			s.stats.add(f.stats)
			f.stats = ScanStats{}
			if err != nil {
				s.err = err
				return nil, position{}
			}
			s.file = f
		}
		rec, at, err := s.file.read(s.ctx, s)
		s.stats.add(s.file.stats)
		s.file.stats = ScanStats{}
		if err != nil {
			s.err = err
			s.closeFile()
			return nil, position{}
		}
		if rec == nil {
			s.closeFile()
			continue
		}
		return rec, at
	}
}

// add counts o's reading in st.
func (st *ScanStats) add(o ScanStats) {
	st.FilesRead += o.FilesRead
	st.RowGroupsPruned += o.RowGroupsPruned
	st.RowsRead += o.RowsRead
	st.RowsOut += o.RowsOut
}

// dvChangeRows loads the rows a change-feed read of a DV update returns: those deleted
// by c.in and not by c.notIn.
func (s *Scanner) dvChangeRows(ctx context.Context, c *dvChange) (*roaring64.Bitmap, error) {
	load := func(dv *DeletionVector) (*roaring64.Bitmap, error) {
		if dv == nil {
			return roaring64.New(), nil
		}
		return loadDeletionVector(ctx, s.store, s.root, s.opts.TableURI, dv)
	}
	in, err := load(c.in)
	if err != nil {
		return nil, err
	}
	notIn, err := load(c.notIn)
	if err != nil {
		return nil, err
	}
	in.AndNot(notIn)
	return in, nil
}

// finishBatch builds the work record from a file batch (casting to the table types,
// filling partition values and missing columns), filters it and projects the output.
func (s *Scanner) finishBatch(ctx context.Context, raw arrow.RecordBatch, file *Add) (arrow.RecordBatch, error) {
	n := raw.NumRows()
	cols := make([]arrow.Array, len(s.work))
	defer arrowx.ReleaseArrays(cols)
	for i, f := range s.work {
		tf := s.workArrow.Field(i)
		if s.isPart[strings.ToLower(f.Name)] {
			c, err := partitionColumn(s.mem, f, tf.Type, file, int(n))
			if err != nil {
				return nil, err
			}
			cols[i] = c
			continue
		}
		idx := -1
		for j, rf := range raw.Schema().Fields() {
			if strings.EqualFold(rf.Name, f.Name) {
				idx = j
				break
			}
		}
		if idx < 0 {
			cols[i] = array.MakeArrayOfNull(s.mem, tf.Type, int(n))
			continue
		}
		c, err := dschema.Cast(s.mem, raw.Column(idx), tf.Type)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		cols[i] = c
	}
	work := array.NewRecordBatch(s.workArrow, cols, n)
	defer work.Release()
	if s.filter != nil && !s.opts.FilesOnly {
		rows, all, err := s.filter.KeptRows(work)
		if err != nil {
			return nil, err
		}
		if !all {
			// Gather with Take (arrow-go's filter kernels mishandle booleans and lack maps).
			var kept arrow.RecordBatch
			switch {
			case len(rows) == 0:
				kept = work.NewSlice(0, 0)
			case int(rows[len(rows)-1]-rows[0]) == len(rows)-1:
				kept = work.NewSlice(int64(rows[0]), int64(rows[len(rows)-1])+1)
			default:
				if kept, err = arrowx.Take(ctx, s.mem, work, rows); err != nil {
					return nil, err
				}
			}
			defer kept.Release()
			work = kept
		}
	}
	outCols := make([]arrow.Array, s.out.NumFields())
	for i := range outCols {
		outCols[i] = work.Column(i)
	}
	return array.NewRecordBatch(s.out, outCols, work.NumRows()), nil
}

func (s *Scanner) closeFile() {
	if s.file != nil {
		s.file.close()
		s.file = nil
	}
}

// ReadAll runs a scan to the end and returns its records (the caller releases them).
// Meant for tests and small tables; large scans should stream with Next.
func ReadAll(s *Scanner) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for s.Next() {
		r := s.RecordBatch()
		r.Retain()
		out = append(out, r)
	}
	if err := s.Err(); err != nil {
		for _, r := range out {
			r.Release()
		}
		return nil, err
	}
	return out, nil
}
