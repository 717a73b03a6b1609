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

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
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
	lines   *fixed[int64] // each row's line, for Options.LineColumn; nil without one
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
		s.byName[f.Name] = i
		k := jsString
		switch t := f.Type.(type) {
		case *dschema.DecimalType:
			k = jsNumOrStr
		case *dschema.PrimitiveType:
			switch t.Name {
			case dschema.TypeLong, dschema.TypeInteger, dschema.TypeShort, dschema.TypeByte, dschema.TypeDouble, dschema.TypeFloat:
				k = jsNumber
			case dschema.TypeBoolean:
				k = jsBool
			case dschema.TypeBinary:
				k = jsBinary
			}
		default:
			k = jsNested
		}
		s.kinds = append(s.kinds, k)
	}
	if opts.LineColumn != "" {
		s.lines = &fixed[int64]{typ: arrow.PrimitiveTypes.Int64}
	}
	return s, nil
}

// missingColumns is empty: a key absent from a line is null on that line.
func (s *ndjsonSource) missingColumns() []string { return nil }

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
		if s.lines != nil {
			s.lines.add(s.line)
		}
		rows++
	}
	if rows == 0 && s.eof {
		return nil, bads, nil
	}
	arrs := make([]arrow.Array, len(s.cols), s.schema.NumFields())
	for i, c := range s.cols {
		arrs[i] = c.build(s.opts.Mem)
	}
	if s.lines != nil {
		arrs = append(arrs, s.lines.build(s.opts.Mem))
	}
	rec := array.NewRecordBatch(s.schema, arrs, int64(rows))
	for _, a := range arrs {
		a.Release()
	}
	return rec, bads, nil
}

// record decodes one line's object into the columns. The object's top level is scanned
// here (keys, and the extent of each value); scalar values go to the column parsers,
// nested ones to Arrow's JSON decoding.
func (s *ndjsonSource) record(b []byte) *Error {
	bad := func(format string, a ...any) *Error {
		return &Error{File: s.file, Line: s.line, Msg: fmt.Sprintf(format, a...)}
	}
	i := skipWS(b, 0)
	if i == len(b) || b[i] != '{' {
		return bad("not a JSON object")
	}
	clear(s.seen)
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i == len(b) || b[i] != '"' {
				return bad("malformed JSON at column %d: want a key string", i+1)
			}
			kend, ok := scanString(b, i)
			if !ok {
				return bad("malformed JSON at column %d: unterminated string", i+1)
			}
			keyRaw := b[i:kend]
			i = skipWS(b, kend)
			if i == len(b) || b[i] != ':' {
				return bad("malformed JSON at column %d: want ':' after a key", i+1)
			}
			i = skipWS(b, i+1)
			vend, ok := scanValue(b, i)
			if !ok {
				return bad("malformed JSON at column %d: want a value", i+1)
			}
			raw := b[i:vend]
			col, ok := s.column(keyRaw)
			if !ok {
				if !s.opts.IgnoreExtraColumns {
					return bad("key %s is not a column of the schema", keyRaw)
				}
				if (raw[0] == '{' || raw[0] == '[') && !json.Valid(raw) {
					return bad("malformed JSON at column %d: want a value", i+1)
				}
			} else {
				if s.seen[col] {
					return bad("key %s appears twice", keyRaw)
				}
				s.seen[col] = true
				if e := s.value(col, raw); e != nil {
					return e
				}
			}
			i = skipWS(b, vend)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return bad("malformed JSON at column %d: want ',' or '}'", i+1)
		}
	}
	if skipWS(b, i) != len(b) {
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

// column finds the column a key (a JSON string, quotes included) names, ignoring case.
func (s *ndjsonSource) column(keyRaw []byte) (int, bool) {
	k := keyRaw[1 : len(keyRaw)-1]
	if i, ok := s.byName[string(k)]; ok { // exact name: no allocation
		return i, true
	}
	var key string
	if bytes.IndexByte(k, '\\') >= 0 {
		if json.Unmarshal(keyRaw, &key) != nil {
			return 0, false
		}
	} else {
		key = string(k)
	}
	i, ok := s.byName[strings.ToLower(key)]
	return i, ok
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// scanString returns the index after the JSON string starting at b[i] == '"', checking
// its escapes and that it has no control characters.
func scanString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			i++
			if i == len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h|0x20 && h|0x20 <= 'f') {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// scanValue returns the index after the JSON value starting at b[i]. Scalars are checked
// here or by the column parsers; objects and arrays only for balance and strings (Arrow's
// decoder checks the rest).
func scanValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{' || c == '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := scanString(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	case c == 't':
		return i + 4, bytes.HasPrefix(b[i:], []byte("true"))
	case c == 'f':
		return i + 5, bytes.HasPrefix(b[i:], []byte("false"))
	case c == 'n':
		return i + 4, bytes.HasPrefix(b[i:], []byte("null"))
	case c == '-' || (c >= '0' && c <= '9'):
		j := i
		for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || (b[j] >= '0' && b[j] <= '9')) {
			j++
		}
		return j, jsonNumber(b[i:j])
	}
	return 0, false
}

// jsonNumber reports whether n follows JSON's number grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func jsonNumber(n []byte) bool {
	i := 0
	if i < len(n) && n[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
		return i - s
	}
	switch d := digits(); {
	case d == 0:
		return false
	case d > 1 && n[i-d] == '0':
		return false
	}
	if i < len(n) && n[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		i++
		if i < len(n) && (n[i] == '+' || n[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(n)
}

func (s *ndjsonSource) nullError(i int) *Error {
	return nullError(s.file, s.line, s.opts.Schema.Fields[i].Name, i+1)
}

// value checks raw's JSON type against column i's and appends it. A bad value is
// reported as written: a string by its content (quoted once in the message), anything
// else by its JSON text.
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
	literal := func(why string) *Error {
		return literalError(s.file, s.line, f.Name, i+1, raw, f.Type, why)
	}
	var str []byte // a string's content
	isStr := false
	text := raw
	switch c := raw[0]; {
	case c == '"':
		if plainString(raw) {
			str = raw[1 : len(raw)-1]
		} else {
			var u string
			if err := json.Unmarshal(raw, &u); err != nil {
				return literal("want a valid JSON string")
			}
			str = []byte(u)
		}
		isStr, text = true, str
		if kind == jsNumber || kind == jsBool || kind == jsNested {
			return valueError(s.file, s.line, f.Name, i+1, str, f.Type, "want "+kindName(kind))
		}
		if kind == jsBinary {
			dec, err := base64.StdEncoding.DecodeString(string(str))
			if err != nil {
				return valueError(s.file, s.line, f.Name, i+1, str, f.Type, "want base64")
			}
			text = dec
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if kind != jsNumber && kind != jsNumOrStr {
			return literal("want " + kindName(kind))
		}
	case c == 't' || c == 'f':
		if kind != jsBool {
			return literal("want " + kindName(kind))
		}
	case c == '{' || c == '[':
		if kind != jsNested {
			return literal("want " + kindName(kind))
		}
	}
	if ok, why := s.cols[i].parse(text); !ok {
		if isStr {
			return valueError(s.file, s.line, f.Name, i+1, str, f.Type, why)
		}
		return literal(why)
	}
	return nil
}

// plainString reports whether a JSON string (quotes included) has no escapes or control
// characters, so its bytes between the quotes are its value.
func plainString(raw []byte) bool {
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
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
