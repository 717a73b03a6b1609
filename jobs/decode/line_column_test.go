package decode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// The line column: each row ends with the physical line its record starts on (CSV,
// NDJSON) or its row number (Parquet).
func TestCSVLineColumn(t *testing.T) {
	tests := []struct {
		name string
		opts func(*Options)
		in   string
		want []string // rows, the line last
		bad  []string // Skip mode's bad records
	}{
		{"header", nil, "id,qty,note\na,1,x\nb,2,y\n", []string{"a|1|x|2", "b|2|y|3"}, nil},
		{"no final newline", nil, "id,qty,note\na,1,x\nb,2,y", []string{"a|1|x|2", "b|2|y|3"}, nil},
		{"blank lines count", nil, "id,qty,note\n\na,1,x\n\n\nb,2,y\n\n", []string{"a|1|x|3", "b|2|y|6"}, nil},
		{"quoted line breaks: the line the record starts on", nil,
			"id,qty,note\n\"a\",1,\"l1\nl2\nl3\"\nb,2,y\n\"c\nc\",3,z\nd,4,\"\"\n",
			[]string{"a|1|l1\nl2\nl3|2", "b|2|y|5", "c\nc|3|z|6", "d|4||8"}, nil},
		{"crlf", nil, "id,qty,note\r\na,1,x\r\n\r\nb,2,\"p\r\nq\"\r\nc,3,z\r\n",
			[]string{"a|1|x|2", "b|2|p\r\nq|4", "c|3|z|6"}, nil},
		{"bom", nil, "\xef\xbb\xbfid,qty,note\na,1,x\n", []string{"a|1|x|2"}, nil},
		{"no header", func(o *Options) { o.CSV.NoHeader = true }, "a,1,x\n\nb,,y\n", []string{"a|1|x|1", "b|∅|y|3"}, nil},
		{"skip keeps the true lines", func(o *Options) { o.OnError = Skip },
			"id,qty,note\n" +
				"a,1,x\n" + // 2
				"b,zz,x\n" + // 3: bad qty
				"\n" + // 4
				"c,3,\"two\nlines\"\n" + // 5-6
				"d,4\n" + // 7: too few fields
				"\"e\ne\",x,\n" + // 8-9: bad qty, quoted
				"f,6,\"\"\"q\"\"\"\n" + // 10
				",7,x\n" + // 11: null id
				"g,8,x\n", // 12
			[]string{"a|1|x|2", "c|3|two\nlines|5", "f|6|\"q\"|10", "g|8|x|12"},
			[]string{`f.csv:3: column qty (2): "zz" is not a long`, `f.csv:7: 2 fields, want 3`,
				`f.csv:8: column qty (2): "x" is not a long`, `f.csv:11: column id (1): null in a column that is not nullable`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachParallelism(t, func(t *testing.T, par int) {
				for _, batch := range []int{1, 2, 1000} {
					opts := Options{Schema: schema(t, "id string!", "qty long", "note string"), LineColumn: "_line",
						Parallelism: par, BatchSize: batch}
					if tt.opts != nil {
						tt.opts(&opts)
					}
					got := decodeAll(t, tt.in, opts)
					if got.err != nil {
						t.Fatalf("batch %d: %v", batch, got.err)
					}
					if !eqStrings(got.rows, tt.want) {
						t.Errorf("batch %d: rows:%s\nwant:%s", batch, showRows(got.rows), showRows(tt.want))
					}
					if !eqStrings(got.bad, tt.bad) {
						t.Errorf("batch %d: bad:%s\nwant:%s", batch, showRows(got.bad), showRows(tt.bad))
					}
				}
			})
		})
	}
}

// TestCSVLineColumnOneColumn: with one column an empty line is a record (an empty
// field), so it has a line of its own.
func TestCSVLineColumnOneColumn(t *testing.T) {
	forEachParallelism(t, func(t *testing.T, par int) {
		got := decodeAll(t, "v\na\n\nb\n", Options{Schema: schema(t, "v string"), LineColumn: "line", Parallelism: par})
		if got.err != nil {
			t.Fatal(got.err)
		}
		if want := []string{"a|2", "∅|3", "b|4"}; !eqStrings(got.rows, want) {
			t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(want))
		}
	})
}

// TestCSVLineColumnGenerated decodes a generated file (blank lines, quoted line breaks,
// CRLF, bad records) in Skip and Fail mode, sequentially and in parallel with tiny
// batches and chunks cut early by size: every row's line and every bad record's
// Error.Line is the line the generator wrote it on.
func TestCSVLineColumnGenerated(t *testing.T) {
	defer func(c int) { maxChunkBytes = c }(maxChunkBytes)
	maxChunkBytes = 300 // cut chunks after a few records whatever the batch size
	rng := rand.New(rand.NewPCG(7, 11))
	var sb strings.Builder
	sb.WriteString("id,n,note\n")
	line := int64(2)
	var wantRows, wantBad []string
	firstBad := int64(0)
	for i := range 3000 {
		nl := "\n"
		if rng.IntN(3) == 0 {
			nl = "\r\n"
		}
		for rng.IntN(8) == 0 {
			sb.WriteString(nl)
			line++
		}
		note, wantNote, breaks := "x", "x", 0
		switch rng.IntN(4) {
		case 0:
			note, wantNote, breaks = "\"a\nb\"\"c\r\nd\"", "a\nb\"c\r\nd", 2
		case 1:
			note, wantNote = "", "∅"
		}
		n := strconv.Itoa(i)
		bad := rng.IntN(10) == 0
		if bad {
			n = "bad" + n
			if firstBad == 0 {
				firstBad = line
			}
			wantBad = append(wantBad, fmt.Sprintf(`f.csv:%d: column n (2): %q is not a long`, line, n))
		} else {
			wantRows = append(wantRows, fmt.Sprintf("r%d|%s|%s|%d", i, n, wantNote, line))
		}
		fmt.Fprintf(&sb, "r%d,%s,%s%s", i, n, note, nl)
		line += int64(1 + breaks)
	}
	in := sb.String()
	forEachParallelism(t, func(t *testing.T, par int) {
		for _, batch := range []int{1, 7, 100} {
			opts := Options{Schema: schema(t, "id string", "n long", "note string"), LineColumn: "line",
				Parallelism: par, BatchSize: batch, OnError: Skip}
			got := decodeAll(t, in, opts)
			if got.err != nil {
				t.Fatal(got.err)
			}
			if !eqStrings(got.rows, wantRows) {
				i := firstDiff(got.rows, wantRows)
				t.Fatalf("batch %d: %d rows, want %d; first difference at %d: %q, want %q", batch, len(got.rows), len(wantRows), i,
					nth(got.rows, i), nth(wantRows, i))
			}
			if !eqStrings(got.bad, wantBad) {
				i := firstDiff(got.bad, wantBad)
				t.Fatalf("batch %d: %d bad, want %d; first difference at %d: %q, want %q", batch, len(got.bad), len(wantBad), i,
					nth(got.bad, i), nth(wantBad, i))
			}
			opts.OnError = Fail
			got = decodeAll(t, in, opts)
			if e, ok := AsError(got.err); !ok || e.Line != firstBad {
				t.Errorf("batch %d: Fail mode: error %v, want one on line %d", batch, got.err, firstBad)
			}
		}
	})
}

func nth(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

func TestNDJSONLineColumn(t *testing.T) {
	in := `{"n":1}` + "\n" + // 1
		"\n" + // 2
		`{"n":"x"}` + "\r\n" + // 3: bad
		"   \n" + // 4
		`{"n":2}` + "\r\n" + // 5
		`{"n":3,"m":1}` + "\n" + // 6: bad
		`{}` + "\n" + // 7
		`{"n":4}` // 8
	for _, batch := range []int{1, 2, 100} {
		got := decodeAll(t, in, Options{Format: NDJSON, Schema: schema(t, "n long"), LineColumn: "LINE", OnError: Skip, BatchSize: batch})
		if got.err != nil {
			t.Fatal(got.err)
		}
		if want := []string{"1|1", "2|5", "∅|7", "4|8"}; !eqStrings(got.rows, want) {
			t.Errorf("batch %d: rows:%s\nwant:%s", batch, showRows(got.rows), showRows(want))
		}
		if want := []string{`f.csv:3: column n (1): "x" is not a long: want a JSON number`, `f.csv:6: key "m" is not a column of the schema`}; !eqStrings(got.bad, want) {
			t.Errorf("batch %d: bad:%s\nwant:%s", batch, showRows(got.bad), showRows(want))
		}
	}
}

func TestParquetLineColumn(t *testing.T) {
	data := sampleParquet(t)
	times := make([]*time.Time, 7)
	for i := range times {
		if i%3 != 1 {
			ts := time.Date(2026, 1, i+1, 0, 0, 0, 0, time.UTC)
			times[i] = &ts
		}
	}
	int96 := int96Parquet(t, times, 3) // row groups of 3 rows
	tests := []struct {
		name string
		data string
		cols []string
		opts Options
		want []string
	}{
		{"all rows", data, []string{"a long", "extra long"}, Options{IgnoreExtraColumns: true},
			[]string{"1|7|1", "-2|8|2", "∅|9|3"}},
		{"skipped rows leave gaps", data, []string{"a long!", "s string"}, Options{IgnoreExtraColumns: true, OnError: Skip},
			[]string{"1|x|1", "-2|∅|2"}},
		{"skipped rows leave gaps (2)", data, []string{"s string!"}, Options{IgnoreExtraColumns: true, OnError: Skip},
			[]string{"x|1", "z|3"}},
		{"only missing columns", data, []string{"nothere string"}, Options{IgnoreExtraColumns: true, AllowMissingColumns: true},
			[]string{"∅|1", "∅|2", "∅|3"}},
		{"row groups", int96, []string{"id long", "ts timestamp!"}, Options{OnError: Skip},
			[]string{"0|2026-01-01T00:00:00Z|1", "2|2026-01-03T00:00:00Z|3", "3|2026-01-04T00:00:00Z|4",
				"5|2026-01-06T00:00:00Z|6", "6|2026-01-07T00:00:00Z|7"}},
		{"row groups, INT96 alone", int96, []string{"ts timestamp"}, Options{IgnoreExtraColumns: true},
			[]string{"2026-01-01T00:00:00Z|1", "∅|2", "2026-01-03T00:00:00Z|3", "2026-01-04T00:00:00Z|4",
				"∅|5", "2026-01-06T00:00:00Z|6", "2026-01-07T00:00:00Z|7"}},
	}
	for _, tt := range tests {
		for _, batch := range []int{1, 2, 100} {
			t.Run(fmt.Sprintf("%s batch %d", tt.name, batch), func(t *testing.T) {
				opts := tt.opts
				opts.Format, opts.Schema, opts.LineColumn, opts.BatchSize = Parquet, schema(t, tt.cols...), "row", batch
				got := decodeAll(t, tt.data, opts)
				if got.err != nil {
					t.Fatal(got.err)
				}
				if !eqStrings(got.rows, tt.want) {
					t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tt.want))
				}
			})
		}
	}
}

// The line column is in the reader's schema (last, int64, not nullable) for every
// format, and may not share a declared column's name.
func TestLineColumnSchema(t *testing.T) {
	inputs := map[Format]string{CSV: "id,n\na,1\n", NDJSON: `{"id":"a","n":1}`, Parquet: sampleParquet(t)}
	for _, f := range []Format{CSV, NDJSON, Parquet} {
		t.Run(string(f), func(t *testing.T) {
			opts := Options{Format: f, Schema: schema(t, "id string", "n long"), LineColumn: "src_line",
				IgnoreExtraColumns: true, AllowMissingColumns: true}
			got := decodeAll(t, inputs[f], opts)
			if got.err != nil {
				t.Fatal(got.err)
			}
			want := arrow.Field{Name: "src_line", Type: arrow.PrimitiveTypes.Int64}
			if n := got.schema.NumFields(); n != 3 || !got.schema.Field(2).Equal(want) {
				t.Errorf("schema %s, want 3 columns, the last %s", got.schema, want)
			}
			opts.LineColumn = "N"
			got = decodeAll(t, inputs[f], opts)
			if want := "decode f.csv: line column N: the schema already has a column n (2)"; got.err == nil || got.err.Error() != want {
				t.Errorf("error %v, want %s", got.err, want)
			}
		})
	}
}

// Without a line column the reader's schema is the declared one.
func TestNoLineColumn(t *testing.T) {
	r, err := NewReader(context.Background(), strings.NewReader("a\n1\n"), "f.csv", Options{Format: CSV, Schema: schema(t, "a long")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if n := r.Schema().NumFields(); n != 1 {
		t.Errorf("%d columns, want 1", n)
	}
	for r.Next() {
		if n := r.RecordBatch().NumCols(); n != 1 {
			t.Errorf("batch of %d columns, want 1", n)
		}
	}
}
