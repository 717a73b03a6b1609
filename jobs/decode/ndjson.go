package decode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
)

// ndjsonSource decodes newline-delimited JSON: one object per line, keys matched to
// columns by name ignoring case, each value's JSON type checked against the column's type.
type ndjsonSource struct {
	file    string
	opts    *Options
	schema  *arrow.Schema
	br      *bufio.Reader
	line    int64 // lines read so far
	eof     bool
	cols    []column
	byName  map[string]int
	kinds   []jsonKind
	seen    []bool
	longBuf []byte
}

// jsonKind is what JSON a column accepts.
type jsonKind int

const (
	jsString   jsonKind = iota // a JSON string
	jsNumber                   // a JSON number
	jsNumOrStr                 // a number, or a string holding one (decimals)
	jsBool                     // true or false
	jsBinary                   // a base64 string
	jsNested                   // an object or array, decoded by the Arrow builder
)

func newNDJSONSource(r io.Reader, file string, opts *Options, schema *arrow.Schema) (*ndjsonSource, error) {
	s := &ndjsonSource{file: file, opts: opts, schema: schema, br: bufio.NewReaderSize(r, 1<<20),
		byName: map[string]int{}, seen: make([]bool, len(opts.Schema.Fields))}
	for i, f := range opts.Schema.Fields {
		col, err := newColumn(f, schema.Field(i).Type, opts.Mem, opts.Location, "", true)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", file, err)
		}
		s.cols = append(s.cols, col)
		s.byName[strings.ToLower(f.Name)] = i
		k := jsString
		switch t := f.Type.(type) {
		case *delta.DecimalType:
			k = jsNumOrStr
		case *delta.PrimitiveType:
			switch t.Name {
			case delta.TypeLong, delta.TypeInteger, delta.TypeShort, delta.TypeByte, delta.TypeDouble, delta.TypeFloat:
				k = jsNumber
			case delta.TypeBoolean:
				k = jsBool
			case delta.TypeBinary:
				k = jsBinary
			}
		default:
			k = jsNested
		}
		s.kinds = append(s.kinds, k)
	}
	return s, nil
}

// readLine returns the next line without its line break (nil at the end).
func (s *ndjsonSource) readLine() ([]byte, error) {
	if s.eof {
		return nil, nil
	}
	b, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.longBuf = append(s.longBuf[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.longBuf) > maxRecordBytes {
				return nil, &Error{File: s.file, Line: s.line + 1, Msg: fmt.Sprintf("a line longer than %d MiB", maxRecordBytes>>20)}
			}
			b, err = s.br.ReadSlice('\n')
			s.longBuf = append(s.longBuf, b...)
		}
		b = s.longBuf
	}
	if err == io.EOF {
		s.eof = true
		if len(b) == 0 {
			return nil, nil
		}
	} else if err != nil {
		return nil, err
	}
	s.line++
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'}), nil
}

func (s *ndjsonSource) next(ctx context.Context) (arrow.RecordBatch, []*Error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	rows := 0
	var bads []*Error
	for rows < s.opts.BatchSize {
		b, err := s.readLine()
		if e, ok := err.(*Error); ok {
			return nil, nil, e
		} else if err != nil {
			return nil, nil, fmt.Errorf("decode %s: %w", s.file, err)
		}
		if b == nil && s.eof {
			break
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if bad := s.record(b); bad != nil {
			for _, c := range s.cols {
				c.truncate(rows)
			}
			bad.Record = string(b)
			if s.opts.OnError != Skip {
				return nil, nil, bad
			}
			bads = append(bads, bad)
			continue
		}
		rows++
	}
	if rows == 0 && s.eof {
		return nil, bads, nil
	}
	arrs := make([]arrow.Array, len(s.cols))
	for i, c := range s.cols {
		arrs[i] = c.build(s.opts.Mem)
	}
	rec := array.NewRecordBatch(s.schema, arrs, int64(rows))
	for _, a := range arrs {
		a.Release()
	}
	return rec, bads, nil
}

// record decodes one line's object into the columns.
func (s *ndjsonSource) record(b []byte) *Error {
	bad := func(format string, a ...any) *Error {
		return &Error{File: s.file, Line: s.line, Msg: fmt.Sprintf(format, a...)}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return bad("not a JSON object")
	}
	clear(s.seen)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("malformed JSON: %v", err)
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return bad("malformed JSON: %v", err)
		}
		i, ok := s.byName[strings.ToLower(key)]
		if !ok {
			if s.opts.IgnoreExtraColumns {
				continue
			}
			return bad("key %q is not a column of the schema", key)
		}
		if s.seen[i] {
			return bad("key %q appears twice", key)
		}
		s.seen[i] = true
		if e := s.value(i, raw); e != nil {
			return e
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("text after the JSON object")
	}
	for i, ok := range s.seen {
		if ok {
			continue
		}
		if !s.opts.Schema.Fields[i].Nullable {
			return s.nullError(i)
		}
		s.cols[i].appendNull()
	}
	return nil
}

func (s *ndjsonSource) nullError(i int) *Error {
	return nullError(s.file, s.line, s.opts.Schema.Fields[i].Name, i+1)
}

// value checks raw's JSON type against column i's and appends it.
func (s *ndjsonSource) value(i int, raw []byte) *Error {
	f := s.opts.Schema.Fields[i]
	if string(raw) == "null" {
		if !f.Nullable {
			return s.nullError(i)
		}
		s.cols[i].appendNull()
		return nil
	}
	kind := s.kinds[i]
	wrong := func(want string) *Error {
		return valueError(s.file, s.line, f.Name, i+1, raw, f.Type, "want "+want)
	}
	text := raw
	switch c := raw[0]; {
	case c == '"':
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return wrong("valid JSON")
		}
		switch kind {
		case jsNumber:
			return wrong("a JSON number")
		case jsBool:
			return wrong("true or false")
		case jsNested:
			return wrong("a JSON object or array")
		case jsBinary:
			dec, err := base64.StdEncoding.DecodeString(str)
			if err != nil {
				return valueError(s.file, s.line, f.Name, i+1, []byte(str), f.Type, "want base64")
			}
			text = dec
		default:
			text = []byte(str)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if kind != jsNumber && kind != jsNumOrStr {
			return wrong(kindName(kind))
		}
	case c == 't' || c == 'f':
		if kind != jsBool {
			return wrong(kindName(kind))
		}
	case c == '{' || c == '[':
		if kind != jsNested {
			return wrong(kindName(kind))
		}
	}
	if ok, why := s.cols[i].parse(text); !ok {
		return valueError(s.file, s.line, f.Name, i+1, text, f.Type, why)
	}
	return nil
}

func kindName(k jsonKind) string {
	switch k {
	case jsNumber:
		return "a JSON number"
	case jsNumOrStr:
		return "a JSON number or string"
	case jsBool:
		return "true or false"
	case jsNested:
		return "a JSON object or array"
	}
	return "a JSON string"
}

func (s *ndjsonSource) close() {
	for _, c := range s.cols {
		if n, ok := c.(*nestedColumn); ok && n.scratch != nil {
			n.scratch.Release()
			n.scratch = nil
		}
	}
}
