package decode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// csvSource decodes CSV: a splitter cuts the input into chunks of whole records, a
// csvParser per goroutine turns a chunk into one batch.
type csvSource struct {
	file   string
	opts   *Options
	schema *arrow.Schema
	delim  byte
	quote  byte
	null   []byte
	// fileCols maps a file column to the schema column it fills, or -1 (ignored);
	// fileNames are the file's column names, for errors.
	fileCols  []int
	fileNames []string
	missing   []string // declared columns the header lacks, all null (AllowMissingColumns)
	split     *splitter
	seq       *csvParser // sequential mode
	par       *pipeline  // parallel mode
}

func newCSVSource(ctx context.Context, r io.Reader, file string, opts *Options, schema *arrow.Schema) (*csvSource, error) {
	s := &csvSource{file: file, opts: opts, schema: schema, delim: opts.CSV.Delimiter,
		quote: opts.CSV.Quote, null: []byte(opts.CSV.NullString)}
	if s.delim == 0 {
		s.delim = ','
	}
	if s.quote == 0 {
		s.quote = '"'
	}
	if s.delim == s.quote || s.delim == '\n' || s.delim == '\r' || s.quote == '\n' || s.quote == '\r' {
		return nil, fmt.Errorf("decode %s: delimiter %q and quote %q must differ and not be line breaks", file, s.delim, s.quote)
	}
	for _, f := range opts.Schema.Fields {
		switch f.Type.(type) {
		case *dschema.StructType, *dschema.ArrayType, *dschema.MapType:
			return nil, fmt.Errorf("decode %s: column %s: type %s cannot be read from CSV", file, f.Name, f.Type)
		}
	}
	s.split = newSplitter(r, s.quote, opts.BatchSize, opts.Parallelism > 1)
	if opts.CSV.NoHeader {
		for i, f := range opts.Schema.Fields {
			s.fileCols = append(s.fileCols, i)
			s.fileNames = append(s.fileNames, f.Name)
		}
	} else if err := s.readHeader(); err != nil {
		return nil, err
	}
	s.split.rows = opts.BatchSize
	if opts.Parallelism > 1 {
		s.par = newPipeline(ctx, s, opts.Parallelism)
	} else {
		p, err := s.newParser()
		if err != nil {
			return nil, err
		}
		s.seq = p
	}
	return s, nil
}

// readHeader reads the first record and maps its names onto the schema, reporting every
// problem at once.
func (s *csvSource) readHeader() error {
	s.split.rows = 1
	s.split.handoff = false
	c, err := s.split.next()
	s.split.handoff = s.opts.Parallelism > 1
	s.split.seq = 0 // chunks are numbered from the first record
	if err != nil {
		return fmt.Errorf("decode %s: read header: %w", s.file, err)
	}
	if len(c.data) == 0 { // empty file: no rows
		s.fileCols, s.fileNames = nil, nil
		return nil
	}
	names, ok := splitFields(c.data, s.delim, s.quote)
	if !ok {
		return fmt.Errorf("decode %s:%d: header: malformed quoting", s.file, c.line)
	}
	var problems []string
	seen := map[int]string{}
	for i, n := range names {
		si := s.opts.Schema.FieldIndex(n)
		if si < 0 {
			s.fileCols = append(s.fileCols, -1)
			if !s.opts.IgnoreExtraColumns {
				problems = append(problems, fmt.Sprintf("header column %q (%d) is not declared: declare it on the table ({name: %s, type: string}, or its type) or remove it from the file", n, i+1, n))
			}
		} else {
			if prev, dup := seen[si]; dup {
				problems = append(problems, fmt.Sprintf("header columns %q and %q (%d) both name column %s", prev, n, i+1, s.opts.Schema.Fields[si].Name))
			}
			seen[si] = n
			s.fileCols = append(s.fileCols, si)
		}
		s.fileNames = append(s.fileNames, n)
	}
	present := make([]bool, len(s.opts.Schema.Fields))
	for si := range seen {
		present[si] = true
	}
	fill, missing := checkMissing(s.opts.Schema, present, s.opts, "header")
	if len(problems) > 0 {
		if missing != "" {
			problems = append(problems, missing)
		}
		return fmt.Errorf("decode %s:%d: %s", s.file, c.line, strings.Join(problems, "; "))
	}
	if missing != "" {
		return fmt.Errorf("decode %s: %s", s.file, missing)
	}
	s.missing = fill
	return nil
}

func (s *csvSource) missingColumns() []string { return s.missing }

func (s *csvSource) next(ctx context.Context) (arrow.RecordBatch, []*Error, error) {
	if s.par != nil {
		return s.par.next()
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	c, err := s.split.next()
	if err != nil {
		return nil, nil, s.splitError(err)
	}
	if len(c.data) == 0 {
		return nil, nil, nil
	}
	return s.seq.parseChunk(c)
}

// splitError turns a splitter error into the reader's: an *Error for a record too long,
// else a wrapped read error.
func (s *csvSource) splitError(err error) error {
	if le, ok := err.(*longRecordError); ok {
		return &Error{File: s.file, Line: le.line, Msg: fmt.Sprintf("a record longer than %d MiB (an unclosed quote?)", maxRecordBytes>>20)}
	}
	return fmt.Errorf("decode %s: %w", s.file, err)
}

func (s *csvSource) close() {
	if s.par != nil {
		s.par.close()
	}
}

// csvParser turns chunks into batches; each parsing goroutine has its own.
type csvParser struct {
	src      *csvSource
	cols     []column // per schema column; nil when the file lacks it
	isString []bool
	nullable []bool
	scratch  []byte
	line     int64         // physical line being parsed
	lines    *fixed[int64] // each row's line, for Options.LineColumn; nil without one
	// The bulk path (csv_bulk.go): per schema column its bulkColumn and null rule; bulkOK
	// when every column the file has can take it.
	table  fieldTable
	bulk   []bulkColumn
	rules  []nullRule
	bulkOK bool
}

func (s *csvSource) newParser() (*csvParser, error) {
	p := &csvParser{src: s, cols: make([]column, len(s.opts.Schema.Fields)), bulkOK: bulkCSV,
		bulk: make([]bulkColumn, len(s.opts.Schema.Fields)), rules: make([]nullRule, len(s.opts.Schema.Fields))}
	present := map[int]bool{}
	for _, si := range s.fileCols {
		if si >= 0 {
			present[si] = true
		}
	}
	for i, f := range s.opts.Schema.Fields {
		p.nullable = append(p.nullable, f.Nullable)
		pt, ok := f.Type.(*dschema.PrimitiveType)
		p.isString = append(p.isString, ok && (pt.Name == dschema.TypeString || pt.Name == dschema.TypeBinary))
		if !present[i] {
			continue
		}
		col, err := newColumn(f, s.schema.Field(i).Type, s.opts.Mem, s.opts.Location, s.opts.CSV.TimestampFormat, false)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", s.file, err)
		}
		p.cols[i] = col
		p.rules[i] = nullRule{text: s.null, isString: p.isString[i], nullable: f.Nullable}
		bc, ok := col.(bulkColumn)
		p.bulk[i], p.bulkOK = bc, p.bulkOK && ok
	}
	if s.opts.LineColumn != "" {
		p.lines = &fixed[int64]{typ: arrow.PrimitiveTypes.Int64}
	}
	return p, nil
}

// reserve makes room in the columns for the records of a chunk of size bytes: at most a
// batch, and no more records than the chunk can hold (each has a byte per field), so a
// small file does not clear room for a whole batch.
func (p *csvParser) reserve(size int) {
	n := min(p.src.opts.BatchSize, size/max(1, len(p.src.fileCols))+1)
	for _, col := range p.cols {
		if col != nil {
			col.reserve(n)
		}
	}
	if p.lines != nil {
		p.lines.reserve(n)
	}
}

// parseChunk decodes the records of c into one batch. In Fail mode the first bad record
// is returned as the error (and no batch); in Skip mode bad records are dropped and
// returned in order.
func (p *csvParser) parseChunk(c chunk) (arrow.RecordBatch, []*Error, error) {
	s := p.src
	failFast := s.opts.OnError != Skip
	data := c.data
	n := len(data)
	p.line = c.line
	p.reserve(n)
	nf := len(s.fileCols)
	delim, q := s.delim, s.quote
	// A chunk that is valid UTF-8 as a whole has valid fields (they are cut at ASCII
	// bytes), so string columns need not check each value.
	p.setTrusted(delim < utf8.RuneSelf && q < utf8.RuneSelf && utf8.Valid(data))
	noQuotes := bytes.IndexByte(data, q) < 0
	if noQuotes && p.bulkOK {
		if rec, ok := p.parseBulk(c); ok {
			return rec, nil, nil
		}
	}
	rows := 0
	var bads []*Error
	pos := 0
	skipBlank := nf > 1 // with one column, an empty line is an empty field
	for pos < n {
		recLine, recStart := p.line, pos
		var bad *Error
		eol := bytes.IndexByte(data[pos:], '\n')
		if eol < 0 {
			eol = n
		} else {
			eol += pos
		}
		rec := data[pos:eol]
		if len(rec) > 0 && rec[len(rec)-1] == '\r' {
			rec = rec[:len(rec)-1]
		}
		if len(rec) == 0 && skipBlank {
			pos = eol + 1
			p.line++
			continue
		}
		if noQuotes || bytes.IndexByte(rec, q) < 0 {
			// Fast path: no quotes, the record is this line.
			fi := 0
			for {
				k := bytes.IndexByte(rec, delim)
				field := rec
				if k >= 0 {
					field = rec[:k]
				}
				if fi < nf && bad == nil {
					bad = p.value(fi, field, false, recLine)
				}
				fi++
				if k < 0 {
					break
				}
				rec = rec[k+1:]
			}
			if bad == nil && fi != nf {
				bad = &Error{File: s.file, Line: recLine, Msg: fmt.Sprintf("%d fields, want %d", fi, nf)}
			}
			pos = eol + 1
			p.line++
		} else {
			bad, pos = p.quotedRecord(data, pos, recLine)
		}
		if bad != nil {
			for _, col := range p.cols {
				if col != nil {
					col.truncate(rows)
				}
			}
			rec := data[recStart:min(pos, n)]
			rec = bytes.TrimSuffix(bytes.TrimSuffix(rec, []byte{'\n'}), []byte{'\r'})
			bad.Record = string(rec)
			if failFast {
				return nil, nil, bad
			}
			bads = append(bads, bad)
			continue
		}
		if p.lines != nil {
			p.lines.add(recLine)
		}
		rows++
	}
	return p.build(rows), bads, nil
}

func (p *csvParser) setTrusted(ok bool) {
	for _, c := range p.cols {
		if sc, isStr := c.(*stringColumn); isStr {
			sc.trusted = ok
		}
	}
}

// value appends field (file column fi) to its column, or returns why it cannot.
func (p *csvParser) value(fi int, field []byte, quoted bool, line int64) *Error {
	s := p.src
	si := s.fileCols[fi]
	if si < 0 {
		return nil
	}
	col := p.cols[si]
	if (!quoted && len(field) == len(s.null) && string(field) == string(s.null)) || (len(field) == 0 && !p.isString[si]) {
		if p.nullable[si] {
			col.appendNull()
			return nil
		}
		return nullError(s.file, line, s.fileNames[fi], fi+1)
	}
	if ok, why := col.parse(field); !ok {
		return valueError(s.file, line, s.fileNames[fi], fi+1, field, s.opts.Schema.Fields[si].Type, why)
	}
	return nil
}

// quotedRecord decodes a record that has quotes somewhere, from data[pos]; it returns
// the record's problem, if any, and the position after the record.
func (p *csvParser) quotedRecord(data []byte, pos int, recLine int64) (*Error, int) {
	s := p.src
	n := len(data)
	nf := len(s.fileCols)
	delim, q := s.delim, s.quote
	var bad *Error
	fi := 0
	for {
		var field []byte
		quoted := false
		if pos < n && data[pos] == q {
			quoted = true
			pos++
			fieldStart, segStart := pos, pos
			esc := false
			for {
				k := bytes.IndexByte(data[pos:], q)
				if k < 0 {
					p.line += int64(bytes.Count(data[fieldStart:], []byte{'\n'}))
					pos = n
					if bad == nil {
						bad = &Error{File: s.file, Line: recLine, Msg: "quoted field never closed"}
					}
					break
				}
				qi := pos + k
				if qi+1 < n && data[qi+1] == q { // doubled quote
					if !esc {
						p.scratch = p.scratch[:0]
						esc = true
					}
					p.scratch = append(p.scratch, data[segStart:qi+1]...)
					pos = qi + 2
					segStart = pos
					continue
				}
				if esc {
					p.scratch = append(p.scratch, data[segStart:qi]...)
					field = p.scratch
				} else {
					field = data[segStart:qi]
				}
				p.line += int64(bytes.Count(data[fieldStart:qi], []byte{'\n'}))
				pos = qi + 1
				break
			}
			if pos < n && data[pos] != delim && data[pos] != '\n' {
				if data[pos] == '\r' && (pos+1 == n || data[pos+1] == '\n') {
					pos++
				} else {
					if bad == nil {
						bad = &Error{File: s.file, Line: recLine, Msg: fmt.Sprintf("field %d: %q after the closing quote", fi+1, data[pos])}
					}
					for pos < n && data[pos] != delim && data[pos] != '\n' {
						pos++
					}
				}
			}
		} else {
			start := pos
			for pos < n && data[pos] != delim && data[pos] != '\n' && data[pos] != q {
				pos++
			}
			if pos < n && data[pos] == q {
				if bad == nil {
					bad = &Error{File: s.file, Line: recLine, Msg: fmt.Sprintf("field %d: quote inside an unquoted field (quote the whole field and double the quote)", fi+1)}
				}
				for pos < n && data[pos] != delim && data[pos] != '\n' {
					pos++
				}
			}
			field = data[start:pos]
			if (pos >= n || data[pos] == '\n') && len(field) > 0 && field[len(field)-1] == '\r' {
				field = field[:len(field)-1]
			}
		}
		if fi < nf && bad == nil {
			bad = p.value(fi, field, quoted, recLine)
		}
		fi++
		if pos >= n || data[pos] == '\n' {
			pos++
			p.line++
			break
		}
		pos++ // delimiter
	}
	if bad == nil && fi != nf {
		bad = &Error{File: s.file, Line: recLine, Msg: fmt.Sprintf("%d fields, want %d", fi, nf)}
	}
	return bad, pos
}

func (p *csvParser) build(rows int) arrow.RecordBatch {
	s := p.src
	arrs := make([]arrow.Array, len(p.cols), s.schema.NumFields())
	for i, col := range p.cols {
		if col == nil {
			arrs[i] = array.MakeArrayOfNull(s.opts.Mem, s.schema.Field(i).Type, rows)
		} else {
			arrs[i] = col.build(s.opts.Mem)
		}
	}
	if p.lines != nil {
		arrs = append(arrs, p.lines.build(s.opts.Mem))
	}
	rec := array.NewRecordBatch(s.schema, arrs, int64(rows))
	for _, a := range arrs {
		a.Release()
	}
	return rec
}
