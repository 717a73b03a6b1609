package decode

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
)

// parquetSource reads a Parquet file with pqarrow (flat INT96 timestamps with
// pqfile.Int96Reader), only the declared columns, and casts each to its declared type
// where that loses nothing (wider integers, rescaled decimals, coarser timestamp units,
// large/view strings).
type parquetSource struct {
	file   string
	opts   *Options
	schema *arrow.Schema
	pf     *file.Reader
	rr     pqarrow.RecordReader // nil when every column read is in i96
	src    []int                // declared column -> column of the record reader, -1: absent (nulls)
	// Flat INT96 timestamp columns (Spark's default) by declared column: read as
	// microseconds, since pqarrow's nanoseconds end in 2262.
	i96 map[int]*pqfile.Int96Reader
	row int64 // rows read so far
	n   int64 // rows in the batch advance read
	// missing lists the declared columns the file lacks (AllowMissingColumns); lines
	// builds the row numbers for Options.LineColumn (nil without one).
	missing []string
	lines   *fixed[int64]
}

func newParquetSource(ctx context.Context, r io.Reader, fileName string, opts *Options, schema *arrow.Schema) (*parquetSource, error) {
	ra, ok := r.(parquet.ReaderAtSeeker)
	if !ok {
		return nil, fmt.Errorf("decode %s: parquet needs an io.ReaderAt and io.Seeker, got %T", fileName, r)
	}
	// The reader's pages come from PageBuffers; the arrays it returns, from opts.Mem.
	pf, err := file.NewParquetReader(ra, file.WithReadProps(parquet.NewReaderProperties(pqfile.PageBuffers)))
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", fileName, err)
	}
	s := &parquetSource{file: fileName, opts: opts, schema: schema, pf: pf}
	if err := s.open(ctx); err != nil {
		pf.Close()
		return nil, err
	}
	return s, nil
}

func (s *parquetSource) open(ctx context.Context) error {
	fr, err := pqarrow.NewFileReader(s.pf, pqarrow.ArrowReadProperties{BatchSize: int64(s.opts.BatchSize)}, s.opts.Mem)
	if err != nil {
		return fmt.Errorf("decode %s: %w", s.file, err)
	}
	fileIdx, leaves, problems := s.matchColumns(fr)
	present := make([]bool, len(fileIdx))
	for di, fi := range fileIdx {
		present[di] = fi >= 0
	}
	fill, missing := checkMissing(s.opts.Schema, present, s.opts, "file")
	if missing != "" {
		problems = append(problems, missing)
	}
	s.missing = fill
	if s.opts.LineColumn != "" {
		s.lines = &fixed[int64]{typ: arrow.PrimitiveTypes.Int64}
	}
	if len(problems) > 0 {
		return fmt.Errorf("decode %s: %s", s.file, strings.Join(problems, "; "))
	}
	s.src = make([]int, len(fileIdx))
	for di := range s.src {
		s.src[di] = -1
	}
	if len(leaves) == 0 && len(s.i96) > 0 {
		return nil // the INT96 columns give the row count
	}
	if len(leaves) == 0 { // no declared column in the file: only the row count matters
		leaves = appendLeaves(nil, &fr.Manifest.Fields[0])
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return fmt.Errorf("decode %s: %w", s.file, err)
	}
	s.rr = rr
	// Map declared columns onto the reader's columns by name.
	for di, fi := range fileIdx {
		if fi < 0 || s.i96[di] != nil {
			continue
		}
		name := fr.Manifest.Fields[fi].Field.Name
		for j, f := range rr.Schema().Fields() {
			if f.Name == name {
				s.src[di] = j
			}
		}
	}
	return nil
}

// matchColumns matches the file's top-level columns with the declared ones by name:
// fileIdx[di] is the file column of declared column di (-1: absent), leaves the leaf
// columns pqarrow reads, and problems what does not fit (an extra column, two file
// columns for one declared column, a type that cannot be read as the declared one).
// Flat INT96 columns get an Int96Reader in s.i96 instead of leaves.
func (s *parquetSource) matchColumns(fr *pqarrow.FileReader) (fileIdx, leaves []int, problems []string) {
	s.i96 = map[int]*pqfile.Int96Reader{}
	fileIdx = make([]int, len(s.opts.Schema.Fields)) // declared -> manifest field
	for i := range fileIdx {
		fileIdx[i] = -1
	}
	for fi, mf := range fr.Manifest.Fields {
		name := mf.Field.Name
		di := s.opts.Schema.FieldIndex(name)
		if di < 0 {
			if !s.opts.IgnoreExtraColumns {
				typ := "its type"
				if dt, err := dschema.DataTypeFromArrow(mf.Field.Type); err == nil {
					typ = dt.String()
				}
				problems = append(problems, fmt.Sprintf("file column %s is not declared: declare it on the table ({name: %s, type: %s}) or remove it from the file", name, name, typ))
			}
			continue
		}
		if fileIdx[di] >= 0 {
			problems = append(problems, fmt.Sprintf("file columns %s and %s both name column %s",
				fr.Manifest.Fields[fileIdx[di]].Field.Name, name, s.opts.Schema.Fields[di].Name))
			continue
		}
		want, from := s.schema.Field(di).Type, mf.Field.Type
		int96 := pqfile.IsInt96(fr, fi)
		if int96 {
			from = pqfile.Int96Type()
		}
		if why := castProblem(from, want); why != "" {
			problems = append(problems, fmt.Sprintf("column %s (%d): file type %s cannot be read as %s (%s): %s",
				s.opts.Schema.Fields[di].Name, di+1, from, s.opts.Schema.Fields[di].Type, want, why))
		}
		fileIdx[di] = fi
		if int96 {
			s.i96[di] = pqfile.NewInt96Reader(fr, fi, nil, fmt.Sprintf("decode %s: column %s", s.file, name))
			continue
		}
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[fi])
	}
	return fileIdx, leaves, problems
}

// advance reads the next record (false at the end). arrow-go's page reader panics on
// some corrupt page headers: that is an error naming the file, as any corruption is.
func (s *parquetSource) advance() (more bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			more, err = false, fmt.Errorf("decode %s: corrupt Parquet file: %v", s.file, p)
		}
	}()
	if s.rr == nil {
		s.n = min(int64(s.opts.BatchSize), s.pf.NumRows()-s.row)
		return s.n > 0, nil
	}
	if !s.rr.Next() {
		if err := s.rr.Err(); err != nil && err != io.EOF {
			return false, fmt.Errorf("decode %s: %w", s.file, err)
		}
		return false, nil
	}
	s.n = s.rr.RecordBatch().NumRows()
	return true, nil
}

// readInt96 reads the batch's n values of declared column di's INT96 column.
func (s *parquetSource) readInt96(di int) (a arrow.Array, err error) {
	defer func() {
		if p := recover(); p != nil {
			a, err = nil, fmt.Errorf("decode %s: corrupt Parquet file: %v", s.file, p)
		}
	}()
	if a, err = s.i96[di].Read(int(s.n), s.opts.Mem); err == nil && int64(a.Len()) != s.n {
		err = fmt.Errorf("decode %s: column %s: %d values where the file has %d rows", s.file, s.opts.Schema.Fields[di].Name, a.Len(), s.n)
		a.Release()
		a = nil
	}
	return a, err
}

func appendLeaves(out []int, f *pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(out, f.ColIndex)
	}
	for i := range f.Children {
		out = appendLeaves(out, &f.Children[i])
	}
	return out
}

func (s *parquetSource) next(ctx context.Context) (arrow.RecordBatch, []*Error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if more, err := s.advance(); err != nil || !more {
		return nil, nil, err
	}
	n := s.n
	first := s.row
	s.row += n
	cols := make([]arrow.Array, len(s.src), s.schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for di, j := range s.src {
		want := s.schema.Field(di).Type
		var in arrow.Array
		switch {
		case s.i96[di] != nil:
			a, err := s.readInt96(di)
			if err != nil {
				return nil, nil, err
			}
			defer a.Release()
			in = a
		case j >= 0:
			in = s.rr.RecordBatch().Column(j)
		default:
			cols[di] = array.MakeArrayOfNull(s.opts.Mem, want, int(n))
			continue
		}
		a, err := castArray(ctx, s.opts.Mem, in, want)
		if err != nil {
			f := s.opts.Schema.Fields[di]
			return nil, nil, fmt.Errorf("decode %s: rows %d-%d: column %s (%d): %s to %s: %w",
				s.file, first+1, first+n, f.Name, di+1, in.DataType(), f.Type, err)
		}
		cols[di] = a
	}
	if s.lines != nil {
		s.lines.reserve(int(n))
		for i := range n {
			s.lines.add(first + i + 1)
		}
		cols = append(cols, s.lines.build(s.opts.Mem))
	}
	// Nulls in columns declared not nullable make their rows bad.
	var bads []*Error
	var keep []bool
	for di, f := range s.opts.Schema.Fields {
		if f.Nullable || cols[di].NullN() == 0 {
			continue
		}
		if keep == nil {
			keep = make([]bool, n)
			for i := range keep {
				keep[i] = true
			}
		}
		for i := range keep {
			if keep[i] && cols[di].IsNull(i) {
				keep[i] = false
				e := &Error{File: s.file, Row: first + int64(i) + 1, Column: f.Name, ColumnNumber: di + 1,
					Msg: fmt.Sprintf("column %s (%d): null in a column that is not nullable", f.Name, di+1)}
				if s.opts.OnError != Skip {
					return nil, nil, e
				}
				bads = append(bads, e)
			}
		}
	}
	rec := array.NewRecordBatch(s.schema, cols, n)
	if keep == nil {
		return rec, nil, nil
	}
	defer rec.Release()
	bad := len(bads)
	if bad == len(keep) {
		empty := emptyCols(s.opts.Mem, s.schema)
		defer func() {
			for _, a := range empty {
				a.Release()
			}
		}()
		return array.NewRecordBatch(s.schema, empty, 0), bads, nil
	}
	mask := array.NewBooleanBuilder(s.opts.Mem)
	defer mask.Release()
	mask.AppendValues(keep, nil)
	m := mask.NewArray()
	defer m.Release()
	out, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
	if err != nil {
		return nil, nil, fmt.Errorf("decode %s: %w", s.file, err)
	}
	return out, bads, nil
}

func emptyCols(mem memory.Allocator, sch *arrow.Schema) []arrow.Array {
	out := make([]arrow.Array, sch.NumFields())
	for i, f := range sch.Fields() {
		out[i] = array.MakeArrayOfNull(mem, f.Type, 0)
	}
	return out
}

func (s *parquetSource) missingColumns() []string { return s.missing }

func (s *parquetSource) close() {
	for _, c := range s.i96 {
		c.Close()
	}
	s.i96 = nil
	if s.rr != nil {
		s.rr.Release()
		s.rr = nil
	}
	if s.pf != nil {
		s.pf.Close()
		s.pf = nil
	}
}

// castArray converts a to want; a no-op (a retained) when the types already agree.
func castArray(ctx context.Context, mem memory.Allocator, a arrow.Array, want arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(a.DataType(), want) {
		a.Retain()
		return a, nil
	}
	if ft, ok := a.DataType().(*arrow.TimestampType); ok {
		if wt, ok := want.(*arrow.TimestampType); ok && ft.Unit == wt.Unit && ft.TimeZone != "" && wt.TimeZone != "" {
			// same instants, another zone label: only the type changes
			ad := a.Data()
			d := array.NewData(want, ad.Len(), ad.Buffers(), ad.Children(), ad.NullN(), ad.Offset())
			defer d.Release()
			return array.MakeFromData(d), nil
		}
	}
	return compute.CastArray(compute.WithAllocator(ctx, mem), a, compute.SafeCastOptions(want))
}

var intDigits = map[arrow.Type]int32{
	arrow.INT8: 3, arrow.INT16: 5, arrow.INT32: 10, arrow.INT64: 19,
	arrow.UINT8: 3, arrow.UINT16: 5, arrow.UINT32: 10, arrow.UINT64: 20,
}

var intBits = map[arrow.Type]int{
	arrow.INT8: 8, arrow.INT16: 16, arrow.INT32: 32, arrow.INT64: 64,
	arrow.UINT8: 8, arrow.UINT16: 16, arrow.UINT32: 32, arrow.UINT64: 64,
}

// castProblem says why a file column of type from cannot be read as want without loss,
// or "" when it can.
func castProblem(from, want arrow.DataType) string {
	if arrow.TypeEqual(from, want) {
		return ""
	}
	switch w := want.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
		fb, ok := intBits[from.ID()]
		if !ok {
			return "not an integer"
		}
		signed := from.ID() == arrow.INT8 || from.ID() == arrow.INT16 || from.ID() == arrow.INT32 || from.ID() == arrow.INT64
		wb := intBits[w.ID()]
		if fb > wb || (!signed && fb >= wb) {
			return "narrower integer"
		}
		return ""
	case *arrow.Float64Type:
		if from.ID() == arrow.FLOAT32 || from.ID() == arrow.FLOAT16 {
			return ""
		}
		return "not a float"
	case *arrow.Float32Type:
		if from.ID() == arrow.FLOAT16 {
			return ""
		}
		return "not a float of at most 32 bits"
	case *arrow.Decimal128Type:
		switch f := from.(type) {
		case *arrow.Decimal128Type:
			return decimalFits(f.Precision, f.Scale, w)
		case *arrow.Decimal256Type:
			return decimalFits(f.Precision, f.Scale, w)
		}
		if d, ok := intDigits[from.ID()]; ok {
			return decimalFits(d, 0, w)
		}
		return "not a decimal or integer"
	case *arrow.TimestampType:
		f, ok := from.(*arrow.TimestampType)
		if !ok {
			return "not a timestamp"
		}
		if (f.TimeZone == "") != (w.TimeZone == "") {
			if w.TimeZone == "" {
				return "an instant (with a time zone) is not a wall-clock timestamp_ntz"
			}
			return "a wall-clock timestamp without a zone is not an instant"
		}
		return "" // a unit finer than µs is checked per value
	case *arrow.Date32Type:
		if from.ID() == arrow.DATE64 {
			return ""
		}
		return "not a date"
	case *arrow.StringType:
		switch from.ID() {
		case arrow.LARGE_STRING, arrow.STRING_VIEW:
			return ""
		}
		return "not a string"
	case *arrow.BinaryType:
		switch from.ID() {
		case arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.STRING, arrow.LARGE_STRING:
			return ""
		}
		return "not binary"
	case *arrow.BooleanType:
		return "not a boolean"
	}
	return "different nested type" // structs, lists and maps must match (Cast tries field by field)
}

func decimalFits(p, s int32, w *arrow.Decimal128Type) string {
	if w.Scale < s {
		return fmt.Sprintf("scale %d would round to %d", s, w.Scale)
	}
	if w.Precision-w.Scale < p-s {
		return fmt.Sprintf("%d integer digits do not fit in %d", p-s, w.Precision-w.Scale)
	}
	return ""
}
