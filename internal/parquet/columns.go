package parquet

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// OpenColumns reads top-level fields fields of fr over rowGroups (nil: all) in batches
// of up to batchSize rows (0: all rows in one batch). what names the file in errors.
// Flat string and binary columns in PLAIN or dictionary pages are decoded by
// byteArrayReader, flat INT96 columns by an Int96Reader (as microseconds), every other
// column by pqarrow.
func OpenColumns(ctx context.Context, fr *pqarrow.FileReader, mem memory.Allocator, fields, rowGroups []int, batchSize int64, what string) (*Columns, error) {
	return openColumns(ctx, fr, mem, fields, rowGroups, batchSize, what, false)
}

// OpenColumnsToPick is OpenColumns for reading column by column, each at chosen rows
// of a batch (Begin, ReadColumn); its fixed-width columns too are decoded by our
// reader, which copies out only the values of those rows.
func OpenColumnsToPick(ctx context.Context, fr *pqarrow.FileReader, mem memory.Allocator, fields, rowGroups []int, batchSize int64, what string) (*Columns, error) {
	return openColumns(ctx, fr, mem, fields, rowGroups, batchSize, what, true)
}

func openColumns(ctx context.Context, fr *pqarrow.FileReader, mem memory.Allocator, fields, rowGroups []int, batchSize int64, what string, pick bool) (*Columns, error) {
	md := fr.ParquetReader().MetaData()
	if rowGroups == nil {
		rowGroups = AllRowGroups(fr)
	}
	var rows int64
	for _, rg := range rowGroups {
		rows += md.RowGroup(rg).NumRows()
	}
	c := &Columns{mem: mem, what: what, left: rows, batch: rows, cols: make([]columnSource, len(fields))}
	if batchSize > 0 {
		c.batch = min(batchSize, int64(bitutil.NextPowerOf2(int(rows))))
	}
	out := make([]arrow.Field, len(fields))
	for j, i := range fields {
		out[j] = *fr.Manifest.Fields[i].Field
		if plainStrings && plainStringField(fr, i, rowGroups) {
			c.cols[j].str = newByteArrayReader(fr, i, rowGroups, what+" column "+out[j].Name)
			continue
		}
		if w := fixedWidthField(fr, i, rowGroups); pick && w > 0 {
			c.cols[j].str = newFixedReader(fr, i, rowGroups, what+" column "+out[j].Name, w)
			continue
		}
		if IsInt96(fr, i) {
			c.cols[j].i96 = NewInt96Reader(fr, i, rowGroups, what+" column "+out[j].Name)
			out[j].Type = int96Type
			continue
		}
		leaves := map[int]bool{}
		for _, l := range leafIndices(fr, i) {
			leaves[l] = true
		}
		cr, err := fr.GetFieldReader(ctx, i, leaves, rowGroups)
		if err != nil {
			c.Release()
			return nil, err
		}
		c.cols[j].pq = cr
		out[j] = *cr.Field()
	}
	c.schema = arrow.NewSchema(out, nil)
	return c, nil
}

// plainStrings turns byteArrayReader on (a test turns it off to compare).
var plainStrings = true

// Columns reads a file's fields batch by batch, each field of a batch on its own
// goroutine, as pqarrow's RecordReader does; unlike it, a panic in the Parquet reader (a
// corrupt page can cause one) becomes an error naming the file and column.
type Columns struct {
	// Serial reads a batch's fields one after another on the goroutine calling Next
	// (when files are read in parallel, a goroutine per field per batch is only cost).
	Serial bool
	schema *arrow.Schema
	mem    memory.Allocator
	what   string
	cols   []columnSource
	batch  int64
	left   int64 // rows not read yet
	cur    arrow.RecordBatch
	err    error
	// A batch read column by column (Begin): its rows, and which columns were read.
	picking int64
	picked  []bool
}

type columnSource struct {
	str *byteArrayReader      // a plain string column (or, to pick, a fixed-width one)
	i96 *Int96Reader          // an INT96 timestamp column
	pq  *pqarrow.ColumnReader // anything else
}

// Next reads the next batch; false at the end or on an error (Err).
func (c *Columns) Next() bool {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	if c.err != nil || c.left == 0 {
		return false
	}
	n := min(c.batch, c.left)
	arrs := make([]arrow.Array, len(c.cols))
	read := func(j int) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%s column %s: corrupt data file: %v", c.what, c.schema.Field(j).Name, p)
			}
		}()
		if arrs[j], err = c.cols[j].read(n, c.mem); err == nil && (arrs[j] == nil || int64(arrs[j].Len()) != n) {
			got := 0
			if arrs[j] != nil {
				got = arrs[j].Len()
			}
			err = fmt.Errorf("column %s: %d rows where the row groups have %d", c.schema.Field(j).Name, got, n)
		}
		return err
	}
	var err error
	if c.Serial {
		for j := range c.cols {
			if err = read(j); err != nil {
				break
			}
		}
	} else {
		var g errgroup.Group // a goroutine per column, as pqarrow's RecordReader
		for j := range c.cols {
			g.Go(func() error { return read(j) })
		}
		err = g.Wait()
	}
	defer arrowx.ReleaseArrays(arrs)
	if err != nil {
		c.err = err
		return false
	}
	c.left -= n
	c.cur = array.NewRecordBatch(c.schema, arrs, n)
	return true
}

func (s *columnSource) read(n int64, mem memory.Allocator) (arrow.Array, error) {
	if s.str != nil {
		return s.str.next(int(n), mem)
	}
	if s.i96 != nil {
		return s.i96.Read(int(n), mem)
	}
	ch, err := s.pq.NextBatch(n)
	if err != nil {
		return nil, err
	}
	defer ch.Release()
	switch len(ch.Chunks()) {
	case 0:
		return nil, nil
	case 1:
		a := ch.Chunk(0)
		a.Retain()
		return a, nil
	}
	return array.Concatenate(ch.Chunks(), mem)
}

// Begin starts the next batch of a read column by column and returns its rows (0 at the
// end or on an error, Err). Each column of the batch is then read at most once, with
// ReadColumn; the next Begin skips those that were not.
func (c *Columns) Begin() int64 {
	if c.picking > 0 {
		for j, done := range c.picked {
			if !done {
				a, err := c.ReadColumn(j, []int32{})
				if err != nil {
					return 0
				}
				a.Release()
			}
		}
	}
	c.picking = 0
	if c.err != nil || c.left == 0 {
		return 0
	}
	c.picking = min(c.batch, c.left)
	c.left -= c.picking
	c.picked = make([]bool, len(c.cols))
	return c.picking
}

// ReadColumn reads column j of the batch Begin started, at rows (ascending indexes in
// the batch; nil: every row), as an array of len(rows) rows.
func (c *Columns) ReadColumn(j int, rows []int32) (a arrow.Array, err error) {
	if c.picking == 0 || c.picked[j] {
		return nil, fmt.Errorf("%s column %s: read twice in a batch, or outside one", c.what, c.schema.Field(j).Name)
	}
	c.picked[j] = true
	defer func() {
		if p := recover(); p != nil {
			a, err = nil, fmt.Errorf("%s column %s: corrupt data file: %v", c.what, c.schema.Field(j).Name, p)
		}
		if err != nil && c.err == nil {
			c.err = err
		}
	}()
	n := int(c.picking)
	s := &c.cols[j]
	if s.str != nil {
		want := n
		if rows != nil {
			want = len(rows)
		}
		a, err := s.str.pick(n, rows, c.mem)
		if err == nil && (a == nil || a.Len() != want) { // (a column that ends early)
			if a != nil {
				a.Release()
			}
			return nil, fmt.Errorf("column %s: fewer rows than the row groups have", c.schema.Field(j).Name)
		}
		return a, err
	}
	whole, err := s.read(int64(n), c.mem)
	if err == nil && (whole == nil || whole.Len() != n) {
		got := 0
		if whole != nil {
			got = whole.Len()
			whole.Release()
		}
		return nil, fmt.Errorf("column %s: %d rows where the row groups have %d", c.schema.Field(j).Name, got, n)
	}
	if err != nil || rows == nil {
		return whole, err
	}
	defer whole.Release()
	return arrowx.GatherColumn(context.Background(), c.mem, whole, rows)
}

// RecordBatch is the batch Next read, valid until the next call of Next or Release.
func (c *Columns) RecordBatch() arrow.RecordBatch { return c.cur }

// Err is the error that ended reading, if any.
func (c *Columns) Err() error { return c.err }

// Release releases the batch and every column's pages.
func (c *Columns) Release() {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	for _, s := range c.cols {
		if s.str != nil {
			s.str.release()
		}
		if s.i96 != nil {
			s.i96.Close()
		}
		if s.pq != nil {
			s.pq.Release()
		}
	}
	c.cols = nil
}

// AllRowGroups lists every row group of fr.
func AllRowGroups(fr *pqarrow.FileReader) []int {
	rgs := make([]int, fr.ParquetReader().NumRowGroups())
	for k := range rgs {
		rgs[k] = k
	}
	return rgs
}

// leafIndices lists the Parquet leaf column indices under top-level field i.
func leafIndices(fr *pqarrow.FileReader, i int) []int {
	var out []int
	var walk func(f *pqarrow.SchemaField)
	walk = func(f *pqarrow.SchemaField) {
		if f.IsLeaf() {
			out = append(out, f.ColIndex)
			return
		}
		for j := range f.Children {
			walk(&f.Children[j])
		}
	}
	walk(&fr.Manifest.Fields[i])
	return out
}
