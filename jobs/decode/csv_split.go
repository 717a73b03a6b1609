package decode

import (
	"bytes"
	"fmt"
	"io"
)

// Limits that keep memory bounded on odd input: a chunk is cut early once it holds
// maxChunkBytes (its batch is then short), and a record longer than maxRecordBytes (an
// unclosed quote, most likely) is an error. Variables so tests can lower them.
var (
	maxChunkBytes  = 128 << 20
	maxRecordBytes = 64 << 20
)

// longRecordError is a record longer than maxRecordBytes, starting at line.
type longRecordError struct{ line int64 }

func (e *longRecordError) Error() string {
	return fmt.Sprintf("line %d: a record longer than %d MiB (an unclosed quote?)", e.line, maxRecordBytes>>20)
}

// readSize is the most bytes asked of the source per Read: small enough that the partial
// record left over after a chunk (which is copied) stays small.
const readSize = 256 << 10

// chunk is a run of whole CSV records cut from the input.
type chunk struct {
	seq  int
	data []byte
	line int64  // physical line of data[0], 1-based
	buf  []byte // the backing buffer, recycled once the chunk is parsed
}

// splitter cuts the input into chunks of at most rows records. It finds record ends with
// a quote-parity scan (a newline ends a record when the quotes seen so far in the record
// are balanced), which is exact for well-formed CSV and lets chunks be parsed in parallel.
type splitter struct {
	r          io.Reader
	buf        []byte
	start, end int // unconsumed input is buf[start:end]
	eof        bool
	rerr       error
	line       int64 // physical line of buf[start]
	quote      byte
	rows       int
	seq        int
	bomChecked bool
	// handoff gives each chunk its own buffer (parallel parsing); otherwise the buffer is
	// reused and a chunk is valid only until the next call.
	handoff bool
	free    chan []byte
}

func newSplitter(r io.Reader, quote byte, rows int, handoff bool) *splitter {
	return &splitter{r: r, buf: make([]byte, 64<<10), line: 1, quote: quote, rows: rows,
		handoff: handoff, free: make(chan []byte, 16)}
}

// recycle returns a parsed chunk's buffer for reuse.
func (s *splitter) recycle(b []byte) {
	if !s.handoff || b == nil {
		return
	}
	select {
	case s.free <- b:
	default:
	}
}

func (s *splitter) newBuf(n int) []byte {
	for {
		select {
		case b := <-s.free:
			if len(b) >= n {
				return b
			}
			continue
		default:
		}
		return make([]byte, n)
	}
}

// fill reads more input, keeping buf[start:end]; it returns the shift applied to indexes.
func (s *splitter) fill() (shift int) {
	if s.start > 0 && (s.end == len(s.buf) || s.start > len(s.buf)/2) {
		copy(s.buf, s.buf[s.start:s.end])
		shift = s.start
		s.end -= s.start
		s.start = 0
	}
	if s.end == len(s.buf) {
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	lim := min(len(s.buf), s.end+readSize)
	n, err := s.r.Read(s.buf[s.end:lim])
	s.end += n
	if err == io.EOF {
		s.eof = true
	} else if err != nil {
		s.rerr, s.eof = err, true
	}
	return shift
}

// scanRecord finds the end of the record starting at from (the index after its newline)
// and the number of lines it spans.
func (s *splitter) scanRecord(from int) (int, int64, bool) {
	b := s.buf[from:s.end]
	q := s.quote
	inQ := false
	i := 0
	lines := int64(0)
	for {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return 0, 0, false
		}
		lines++
		seg := b[i : i+j]
		if inQ || bytes.IndexByte(seg, q) >= 0 {
			if bytes.Count(seg, []byte{q})%2 == 1 {
				inQ = !inQ
			}
		}
		i += j + 1
		if !inQ {
			return from + i, lines, true
		}
	}
}

// next returns the next chunk; a chunk with no data means the end of the input. The
// error is a read error of the underlying reader.
func (s *splitter) next() (chunk, error) {
	for !s.bomChecked {
		if s.end-s.start >= 3 || s.eof {
			if bytes.HasPrefix(s.buf[s.start:s.end], []byte("\xef\xbb\xbf")) {
				s.start += 3
			}
			s.bomChecked = true
			break
		}
		s.fill()
	}
	pos := s.start
	lines := int64(0)
	for recs := 0; recs < s.rows; {
		if recs > 0 && pos-s.start >= maxChunkBytes {
			break
		}
		// Lines before the next quote are whole records: count them off quickly.
		limit := s.end
		qpos := bytes.IndexByte(s.buf[pos:s.end], s.quote)
		if qpos >= 0 {
			limit = pos + qpos
		}
		for recs < s.rows { // whole blocks at a time while they hold fewer lines than needed
			blk := s.buf[pos:min(limit, pos+64<<10)]
			cnt := bytes.Count(blk, []byte{'\n'})
			if cnt == 0 || recs+cnt > s.rows {
				break
			}
			pos += bytes.LastIndexByte(blk, '\n') + 1
			recs += cnt
			lines += int64(cnt)
		}
		for recs < s.rows {
			j := bytes.IndexByte(s.buf[pos:limit], '\n')
			if j < 0 {
				break
			}
			pos += j + 1
			recs++
			lines++
		}
		if recs == s.rows {
			break
		}
		if qpos >= 0 { // the record at pos has a quote: scan it with quote parity
			if end, nl, ok := s.scanRecord(pos); ok {
				lines += nl
				pos = end
				recs++
				continue
			}
		}
		if s.eof {
			if s.rerr != nil {
				return chunk{}, s.rerr
			}
			if pos < s.end {
				lines += int64(bytes.Count(s.buf[pos:s.end], []byte{'\n'}))
				pos = s.end
			}
			break
		}
		if s.end-pos > maxRecordBytes {
			return chunk{}, &longRecordError{line: s.line + lines}
		}
		pos -= s.fill()
	}
	c := chunk{seq: s.seq, data: s.buf[s.start:pos], line: s.line}
	s.seq++
	s.line += lines
	if !s.handoff {
		s.start = pos
		return c, nil
	}
	c.buf = s.buf
	nb := s.newBuf(len(s.buf))
	s.end = copy(nb, s.buf[pos:s.end])
	s.buf, s.start = nb, 0
	return c, nil
}

// splitFields splits one record (the header) into its fields.
func splitFields(rec []byte, delim, quote byte) ([]string, bool) {
	rec = bytes.TrimSuffix(rec, []byte{'\n'})
	rec = bytes.TrimSuffix(rec, []byte{'\r'})
	var out []string
	pos := 0
	for {
		var f []byte
		if pos < len(rec) && rec[pos] == quote {
			pos++
			for {
				k := bytes.IndexByte(rec[pos:], quote)
				if k < 0 {
					return nil, false
				}
				f = append(f, rec[pos:pos+k]...)
				pos += k + 1
				if pos < len(rec) && rec[pos] == quote {
					f = append(f, quote)
					pos++
					continue
				}
				break
			}
			if pos < len(rec) && rec[pos] != delim {
				return nil, false
			}
		} else {
			k := bytes.IndexByte(rec[pos:], delim)
			if k < 0 {
				k = len(rec) - pos
			}
			f = rec[pos : pos+k]
			pos += k
		}
		out = append(out, string(f))
		if pos >= len(rec) {
			return out, true
		}
		pos++ // delimiter
	}
}
