package decode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// Format names a source file format.
type Format string

// The formats a Reader decodes.
const (
	CSV     Format = "csv"
	NDJSON  Format = "ndjson"
	Parquet Format = "parquet"
)

// OnError says what a bad record does.
type OnError string

const (
	// Fail stops at the first bad record: Next returns false and Err returns its *Error.
	Fail OnError = "fail"
	// Skip drops bad records, reporting each to Options.OnBadRecord, and goes on.
	Skip OnError = "skip"
)

// DefaultBatchSize is the number of rows per batch when Options.BatchSize is 0. Memory
// grows with it (parallel parsing keeps a few batches in flight, and so does a caller
// that encodes while the next batches are parsed); past a few ten thousand rows a larger
// batch saves no measurable time (an ingest of 10 M rows: 32768 rows, 225 MB peak; 65536,
// 320 MB; same CPU time).
const DefaultBatchSize = 32768

// CSVOptions describe a CSV dialect. The zero value is a header line, comma, double quote,
// empty field = null, built-in timestamp formats.
type CSVOptions struct {
	// NoHeader says the file has no header line: file columns map to the schema's
	// columns by position, and every record must have exactly that many fields.
	NoHeader bool
	// Delimiter separates fields (default ','); Quote encloses fields that contain a
	// delimiter, quote or newline, a quote inside being doubled (default '"').
	Delimiter, Quote byte
	// NullString is the unquoted field text that means null (default: the empty field).
	// A quoted field is never null in a string column; in other columns an empty field
	// is null as well.
	NullString string
	// TimestampFormat is a Go time layout for timestamp columns; default: RFC 3339 with
	// Z or an offset, and "YYYY-MM-DD[ HH:MM[:SS[.ffffff]]]" ('T' or space) without one.
	TimestampFormat string
}

// Options configure a Reader.
type Options struct {
	// Schema lists the columns to fill (required). File columns are matched by name,
	// ignoring case. A file column the schema lacks is an error unless
	// IgnoreExtraColumns is set. A declared column that a CSV header or a Parquet file's
	// schema lacks is an error at NewReader that names every such column, unless
	// AllowMissingColumns is set: then a missing nullable column is all null and
	// Reader.MissingColumns lists it (a missing column that is not nullable is always an
	// error). CSV without a header maps columns by position, and every record must have
	// all of them. NDJSON decides per line: a key absent from a line is null there (an
	// error if the column is not nullable), as JSON writers routinely omit null keys.
	Schema              *dschema.StructType
	IgnoreExtraColumns  bool
	AllowMissingColumns bool
	// AddedLater names declared nullable columns the table gained after the file was
	// written: a file lacking one is read with it all null, as AllowMissingColumns does
	// for every nullable column.
	AddedLater []string
	// LineColumn, if set, names one more column at the end of every batch, after the
	// declared ones: int64, not nullable, where each row comes from. For CSV and NDJSON
	// it is the 1-based physical line of the file where the record starts, counting the
	// header and blank lines (the number Error.Line gives for a bad record there; a
	// record with quoted line breaks has the line it starts on); for Parquet it is the
	// 1-based row number in the file. Skipped records leave gaps. The name must not be
	// a declared column's (ignoring case).
	LineColumn string
	Format     Format
	CSV        CSVOptions
	// BatchSize is the most rows per record batch (default DefaultBatchSize). A batch has
	// exactly that many rows except the last; in CSV a batch is also short by the records
	// skipped and the blank lines in its stretch of the file (chunks are cut by lines
	// before they are parsed in parallel).
	BatchSize int
	// Location is the zone of timestamps written without an offset (default UTC).
	Location *time.Location
	// OnError is Fail (default) or Skip. OnBadRecord, if set, is called with each bad
	// record that Skip drops, in file order, from the goroutine calling Next.
	OnError     OnError
	OnBadRecord func(*Error)
	// Parallelism is the number of goroutines parsing CSV (default GOMAXPROCS; 1 parses
	// in the goroutine calling Next).
	Parallelism int
	// Mem allocates the batches' buffers (default memory.DefaultAllocator).
	Mem memory.Allocator
}

// Error is a bad record: where it is and what is wrong with it.
type Error struct {
	File string
	// Line is the 1-based physical line of the file where the record starts, counting
	// the header (CSV, NDJSON); for Parquet it is 0 and Row says which row.
	Line int64
	Row  int64
	// Column and ColumnNumber (1-based: the field's position in the CSV record, else in
	// the schema) name the column, or are empty for a record-level problem such as a
	// wrong number of fields.
	Column       string
	ColumnNumber int
	// Value is the bad value as written in the file: a CSV field without its quotes, a
	// JSON string's content (its escapes decoded), the JSON text of another JSON value.
	// Record is the whole record as it is in the file (without its line break; empty for
	// Parquet), for a quarantine table.
	Value  string
	Record string
	// Msg says what is wrong, e.g. `column amount (5): "12,50" is not a decimal(10,2)`.
	Msg string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	if e.Row > 0 {
		return fmt.Sprintf("%s: row %d: %s", e.File, e.Row, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// valueError builds the error for a bad value: val is its text as written (a CSV field
// without its quotes, a JSON string's content), shown quoted once.
func valueError(file string, line int64, col string, num int, val []byte, typ dschema.DataType, why string) *Error {
	return badValue(file, line, col, num, string(val), strconv.Quote(clip(string(val))), typ, why)
}

// literalError is valueError for a JSON literal (a number, true, false, an object or
// array): it is shown as written, without quotes, so that 5 reads apart from "5" (quoted
// only if it has control characters or is not UTF-8).
func literalError(file string, line int64, col string, num int, val []byte, typ dschema.DataType, why string) *Error {
	shown := clip(string(val))
	if !printable(shown) {
		shown = strconv.Quote(shown)
	}
	return badValue(file, line, col, num, string(val), shown, typ, why)
}

func badValue(file string, line int64, col string, num int, val, shown string, typ dschema.DataType, why string) *Error {
	ts := typ.String()
	article := "a"
	if strings.IndexByte("aeiou", ts[0]) >= 0 {
		article = "an"
	}
	msg := fmt.Sprintf("column %s (%d): %s is not %s %s", col, num, shown, article, ts)
	if why != "" {
		msg += ": " + why
	}
	return &Error{File: file, Line: line, Column: col, ColumnNumber: num, Value: val, Msg: msg}
}

// clip shortens a value for a message to about 120 bytes, cut at a character boundary.
func clip(v string) string {
	const most = 120
	if len(v) <= most {
		return v
	}
	n := most
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n] + "..."
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}

func nullError(file string, line int64, col string, num int) *Error {
	return &Error{File: file, Line: line, Column: col, ColumnNumber: num,
		Msg: fmt.Sprintf("column %s (%d): null in a column that is not nullable", col, num)}
}

// source produces decoded batches for a Reader.
type source interface {
	// next returns the next batch (nil at the end) and the bad records skipped before and
	// in it, in file order; err is an *Error in Fail mode, or an I/O or context error.
	next(ctx context.Context) (rec arrow.RecordBatch, bad []*Error, err error)
	// missingColumns lists the declared columns the file lacks, filled with nulls
	// (AllowMissingColumns), in schema order.
	missingColumns() []string
	close()
}

// Reader decodes one file into record batches of the declared schema. It implements
// array.RecordReader; like every RecordReader, the batch returned by RecordBatch is valid
// until the next call to Next (Retain it to keep it).
type Reader struct {
	ctx    context.Context
	opts   Options
	schema *arrow.Schema
	src    source
	cur    arrow.RecordBatch
	err    error
	rows   int64
	bad    int64
	refs   atomic.Int64
	done   bool
}

var _ array.RecordReader = (*Reader)(nil)

// NewReader opens a decoder over r, a file named fileName (used in errors). For Parquet, r
// must also be an io.ReaderAt and io.Seeker (an *os.File, a *bytes.Reader). Reading stops
// at the end of the file, at a bad record in Fail mode, or when ctx is done; call Release
// when finished.
func NewReader(ctx context.Context, r io.Reader, fileName string, opts Options) (*Reader, error) {
	if opts.Schema == nil || len(opts.Schema.Fields) == 0 {
		return nil, fmt.Errorf("decode %s: no schema", fileName)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	if opts.Mem == nil {
		opts.Mem = memory.DefaultAllocator
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	switch opts.OnError {
	case "":
		opts.OnError = Fail
	case Fail, Skip:
	default:
		return nil, fmt.Errorf("decode %s: on_error %q: want fail or skip", fileName, opts.OnError)
	}
	schema, err := arrowSchema(opts.Schema)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", fileName, err)
	}
	if opts.LineColumn != "" {
		if i := opts.Schema.FieldIndex(opts.LineColumn); i >= 0 {
			return nil, fmt.Errorf("decode %s: line column %s: the schema already has a column %s (%d)",
				fileName, opts.LineColumn, opts.Schema.Fields[i].Name, i+1)
		}
		fields := append(slices.Clone(schema.Fields()), arrow.Field{Name: opts.LineColumn, Type: arrow.PrimitiveTypes.Int64})
		schema = arrow.NewSchema(fields, nil)
	}
	rd := &Reader{ctx: ctx, opts: opts, schema: schema}
	rd.refs.Store(1)
	switch strings.ToLower(string(opts.Format)) {
	case string(CSV):
		rd.src, err = newCSVSource(ctx, r, fileName, &rd.opts, schema)
	case string(NDJSON):
		rd.src, err = newNDJSONSource(r, fileName, &rd.opts, schema)
	case string(Parquet):
		rd.src, err = newParquetSource(ctx, r, fileName, &rd.opts, schema)
	default:
		err = fmt.Errorf("decode %s: unknown format %q; want csv, ndjson or parquet", fileName, opts.Format)
	}
	if err != nil {
		return nil, err
	}
	return rd, nil
}

// Schema is the Arrow schema of the batches: the declared schema mapped as
// dschema.ArrowSchema maps it, then the LineColumn (int64, not nullable) if it is set.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// MissingColumns lists the declared columns the file lacks (by their declared names, in
// schema order), which are all null in every batch; it is empty unless
// AllowMissingColumns is set, since a missing column is otherwise an error at NewReader.
// It is known once NewReader returns. NDJSON, whose lines each have their own keys, and
// CSV without a header have none.
func (r *Reader) MissingColumns() []string { return slices.Clone(r.src.missingColumns()) }

// Next decodes the next batch; false at the end or on error (see Err).
func (r *Reader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done {
		return false
	}
	for {
		rec, bad, err := r.src.next(r.ctx)
		for _, e := range bad {
			r.bad++
			if r.opts.OnBadRecord != nil {
				r.opts.OnBadRecord(e)
			}
		}
		if err != nil {
			if rec != nil {
				rec.Release()
			}
			r.err, r.done = err, true
			r.src.close()
			return false
		}
		if rec == nil {
			r.done = true
			r.src.close()
			return false
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		r.rows += rec.NumRows()
		r.cur = rec
		return true
	}
}

// RecordBatch returns the current batch.
func (r *Reader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record returns the current batch.
//
// Deprecated: use RecordBatch (kept for array.RecordReader).
func (r *Reader) Record() arrow.RecordBatch { return r.cur }

// Err returns the error that ended the reading, nil at a clean end of file. A bad record
// in Fail mode is an *Error (use errors.As).
func (r *Reader) Err() error { return r.err }

// Rows is the number of rows returned so far; BadRecords the number of records skipped.
func (r *Reader) Rows() int64       { return r.rows }
func (r *Reader) BadRecords() int64 { return r.bad }

// Retain adds a reference.
func (r *Reader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last one stops any parsing goroutines and frees the
// current batch.
func (r *Reader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.done = true
	r.src.close()
}

// AsError returns err's *Error if it has one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
