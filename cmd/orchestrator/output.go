package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/orchestrator-io/orchestrator/internal/rowtext"
)

// Output formats of the table commands (--format).
const (
	formatText = "text" // aligned columns with a header; numbers right-aligned; NULL for null
	formatCSV  = "csv"  // RFC 4180 with a header row; null is an empty field
	formatJSON = "json" // JSON Lines: one object per row, keys in column order; null is null
)

const formatUsage = "output format, one of `text|csv|json`: text is aligned columns, csv has a\n" +
	"header row, json is JSON Lines (one object per row, keys in column order)"

func checkFormat(f string) error {
	switch f {
	case formatText, formatCSV, formatJSON:
		return nil
	}
	return usagef("unknown format %q: want text, csv or json", f)
}

// column is one output column; numeric columns are right-aligned in text.
type column struct {
	name    string
	numeric bool
}

// cell is one value in every rendering: Text (text and CSV) and the JSON value, as
// package rowtext renders it for the CLI and the web alike.
type cell = rowtext.Value

// rowWriter renders rows in one format. Text buffers rows in blocks to align the
// columns; CSV and JSON stream.
type rowWriter interface {
	header(cols []column) error
	row(cells []cell) error
	flush() error
}

func newRowWriter(w io.Writer, format string) rowWriter {
	switch format {
	case formatCSV:
		return &csvWriter{w: csv.NewWriter(w)}
	case formatJSON:
		return &jsonWriter{w: w}
	default:
		return &textWriter{w: w}
	}
}

// textBlock is how many rows text output aligns at a time, so that memory stays bounded
// on big tables: columns widen between blocks when later values are wider, never shrink.
const textBlock = 1000

type textWriter struct {
	w       io.Writer
	cols    []column
	rows    [][]string
	widths  []int
	started bool // header written
}

func (t *textWriter) header(cols []column) error {
	t.cols = cols
	t.widths = make([]int, len(cols))
	for i, c := range cols {
		t.widths[i] = utf8.RuneCountInString(c.name)
	}
	return nil
}

func (t *textWriter) row(cells []cell) error {
	r := make([]string, len(cells))
	for i, c := range cells {
		if c.Null {
			r[i] = "NULL"
		} else {
			r[i] = escapeControl(c.Text)
		}
	}
	t.rows = append(t.rows, r)
	if len(t.rows) >= textBlock {
		return t.writeBlock()
	}
	return nil
}

func (t *textWriter) flush() error { return t.writeBlock() }

// writeBlock writes the buffered rows (and, the first time, the header).
func (t *textWriter) writeBlock() error {
	for _, r := range t.rows {
		for i, s := range r {
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(s))
		}
	}
	var b bytes.Buffer
	line := func(vals []string) {
		var l strings.Builder
		for i, v := range vals {
			if i > 0 {
				l.WriteString("  ")
			}
			pad := strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(v))
			if t.cols[i].numeric {
				l.WriteString(pad + v)
			} else {
				l.WriteString(v + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	if !t.started {
		t.started = true
		names := make([]string, len(t.cols))
		dashes := make([]string, len(t.cols))
		for i, c := range t.cols {
			names[i] = c.name
			dashes[i] = strings.Repeat("-", t.widths[i])
		}
		line(names)
		line(dashes)
	}
	for _, r := range t.rows {
		line(r)
	}
	t.rows = t.rows[:0]
	_, err := t.w.Write(b.Bytes())
	return err
}

// escapeControl keeps one value on one line of text output.
func escapeControl(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
}

type csvWriter struct {
	w   *csv.Writer
	buf []string
}

func (c *csvWriter) header(cols []column) error {
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = col.name
	}
	return c.w.Write(names)
}

func (c *csvWriter) row(cells []cell) error {
	c.buf = c.buf[:0]
	for _, v := range cells {
		if v.Null {
			c.buf = append(c.buf, "")
		} else {
			c.buf = append(c.buf, v.Text)
		}
	}
	return c.w.Write(c.buf)
}

func (c *csvWriter) flush() error {
	c.w.Flush()
	return c.w.Error()
}

type jsonWriter struct {
	w    io.Writer
	keys [][]byte // JSON-encoded column names
	buf  bytes.Buffer
}

func (j *jsonWriter) header(cols []column) error {
	j.keys = make([][]byte, len(cols))
	for i, c := range cols {
		k, err := json.Marshal(c.name)
		if err != nil {
			return err
		}
		j.keys[i] = k
	}
	return nil
}

func (j *jsonWriter) row(cells []cell) error {
	j.buf.Reset()
	j.buf.WriteByte('{')
	for i, c := range cells {
		if i > 0 {
			j.buf.WriteByte(',')
		}
		j.buf.Write(j.keys[i])
		j.buf.WriteByte(':')
		if err := writeJSONValue(&j.buf, c); err != nil {
			return fmt.Errorf("column %s: %w", j.keys[i], err)
		}
	}
	j.buf.WriteString("}\n")
	_, err := j.w.Write(j.buf.Bytes())
	return err
}

func (j *jsonWriter) flush() error { return nil }

func writeJSONValue(b *bytes.Buffer, c cell) error {
	if c.Null || c.JSON == nil {
		b.WriteString("null")
		return nil
	}
	v, err := rowtext.Marshal(c.JSON)
	if err != nil {
		return err
	}
	b.Write(v)
	return nil
}
