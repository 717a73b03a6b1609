package decode

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestCSVTypes(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		typ  string
		opts Options
		in   []string // field texts, one per row
		want []string
	}{
		{"string", "string", Options{}, []string{"abc", "", `"x,y"`, `"he said ""hi"""`, "ünï"},
			[]string{"abc", "∅", "x,y", `he said "hi"`, "ünï"}},
		{"long", "long", Options{}, []string{"0", "-9223372036854775808", "9223372036854775807", "+42", ""},
			[]string{"0", "-9223372036854775808", "9223372036854775807", "42", "∅"}},
		{"integer", "integer", Options{}, []string{"-2147483648", "2147483647", "7"},
			[]string{"-2147483648", "2147483647", "7"}},
		{"short", "short", Options{}, []string{"-32768", "32767"}, []string{"-32768", "32767"}},
		{"byte", "byte", Options{}, []string{"-128", "127"}, []string{"-128", "127"}},
		{"double", "double", Options{}, []string{"1.5", "-2e3", "0", ""}, []string{"1.5", "-2000", "0", "∅"}},
		{"float", "float", Options{}, []string{"0.25"}, []string{"0.25"}},
		{"boolean", "boolean", Options{}, []string{"true", "FALSE", "1", "0", "Yes", "no", ""},
			[]string{"true", "false", "true", "false", "true", "false", "∅"}},
		{"date", "date", Options{}, []string{"2026-01-14", "1970-01-01", "2024-02-29", "0001-01-01", "9999-12-31"},
			[]string{"2026-01-14", "1970-01-01", "2024-02-29", "0001-01-01", "9999-12-31"}},
		{"decimal", "decimal(10,2)", Options{}, []string{"12.50", "-0.01", "12", ".5", "-12345678.99", "12.500", "-0", "+3.1"},
			[]string{"12.50", "-0.01", "12.00", "0.50", "-12345678.99", "12.50", "0.00", "3.10"}},
		{"decimal38", "decimal(38,4)", Options{}, []string{"1234567890123456789012345678901234.5678", "-1234567890123456789012345678901234.5678", "-1", "1.5e3"},
			[]string{"1234567890123456789012345678901234.5678", "-1234567890123456789012345678901234.5678", "-1.0000", "1500.0000"}},
		{"timestamp", "timestamp", Options{}, []string{"2026-01-14T10:00:00Z", "2026-01-14 10:00:00.123456", "2026-01-14T10:00:00+01:00", "2026-01-14T10:00:00-0530", "2026-01-14", "2026-01-14 10:00", "2026-01-14T10:00:00.5+00"},
			[]string{"2026-01-14T10:00:00Z", "2026-01-14T10:00:00.123456Z", "2026-01-14T09:00:00Z", "2026-01-14T15:30:00Z", "2026-01-14T00:00:00Z", "2026-01-14T10:00:00Z", "2026-01-14T10:00:00.5Z"}},
		{"timestamp in zone", "timestamp", Options{Location: ny}, []string{"2026-01-14 10:00:00", "2026-07-14T10:00:00", "2026-01-14T10:00:00Z"},
			[]string{"2026-01-14T15:00:00Z", "2026-07-14T14:00:00Z", "2026-01-14T10:00:00Z"}},
		{"timestamp layout", "timestamp", Options{CSV: CSVOptions{TimestampFormat: "02/01/2006 15:04"}}, []string{"14/01/2026 10:30"},
			[]string{"2026-01-14T10:30:00Z"}},
		{"timestamp_ntz", "timestamp_ntz", Options{Location: ny}, []string{"2026-01-14 10:00:00.000001"},
			[]string{"2026-01-14T10:00:00.000001"}},
		{"binary", "binary", Options{}, []string{"ab"}, []string{"YWI="}},
		{"null string", "long", Options{CSV: CSVOptions{NullString: "NULL"}}, []string{"NULL", "1", ""}, []string{"∅", "1", "∅"}},
		{"null string on strings", "string", Options{CSV: CSVOptions{NullString: `\N`}}, []string{`\N`, "", `"\N"`}, []string{"∅", "", `\N`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachParallelism(t, func(t *testing.T, par int) {
				opts := tt.opts
				opts.Schema = schema(t, "v "+tt.typ)
				opts.Parallelism = par
				got := decodeAll(t, "v\n"+strings.Join(tt.in, "\n")+"\n", opts)
				if got.err != nil {
					t.Fatalf("error: %v", got.err)
				}
				if !eqStrings(got.rows, tt.want) {
					t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tt.want))
				}
			})
		})
	}
}

func TestCSVDialect(t *testing.T) {
	sch := func(t *testing.T) Options {
		return Options{Schema: schema(t, "id string!", "qty long", "note string")}
	}
	tests := []struct {
		name string
		opts func(*Options)
		in   string
		want []string
	}{
		{"plain", nil, "id,qty,note\na,1,x\nb,2,y\n", []string{"a|1|x", "b|2|y"}},
		{"no final newline", nil, "id,qty,note\na,1,x\nb,2,y", []string{"a|1|x", "b|2|y"}},
		{"crlf", nil, "id,qty,note\r\na,1,x\r\nb,2,\r\n", []string{"a|1|x", "b|2|∅"}},
		{"bom", nil, "\xef\xbb\xbfid,qty,note\na,1,x\n", []string{"a|1|x"}},
		{"header order and case", nil, "NOTE,Id,qty\nx,a,1\n", []string{"a|1|x"}},
		{"missing optional column allowed", func(o *Options) { o.AllowMissingColumns = true }, "qty,id\n1,a\n", []string{"a|1|∅"}},
		{"quoted delimiter newline quote", nil, "id,qty,note\n\"a,b\",1,\"line1\nline2 \"\"q\"\"\"\nc,2,\"\"\n",
			[]string{"a,b|1|line1\nline2 \"q\"", "c|2|"}},
		{"quoted crlf", nil, "id,qty,note\r\n\"a\",1,\"x\r\ny\"\r\n", []string{"a|1|x\r\ny"}},
		{"blank lines", nil, "id,qty,note\n\na,1,x\n\n", []string{"a|1|x"}},
		{"semicolon and single quote", func(o *Options) { o.CSV.Delimiter, o.CSV.Quote = ';', '\'' },
			"id;qty;note\n'a;b';1;'it''s'\n", []string{"a;b|1|it's"}},
		{"tab", func(o *Options) { o.CSV.Delimiter = '\t' }, "id\tqty\tnote\na\t1\tx y\n", []string{"a|1|x y"}},
		{"no header", func(o *Options) { o.CSV.NoHeader = true }, "a,1,x\nb,,y\n", []string{"a|1|x", "b|∅|y"}},
		{"ignored extra column", func(o *Options) { o.IgnoreExtraColumns = true }, "id,extra,qty,note\na,zz,1,x\n", []string{"a|1|x"}},
		{"empty file", nil, "", nil},
		{"header only", nil, "id,qty,note\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachParallelism(t, func(t *testing.T, par int) {
				opts := sch(t)
				opts.Parallelism = par
				if tt.opts != nil {
					tt.opts(&opts)
				}
				got := decodeAll(t, tt.in, opts)
				if got.err != nil {
					t.Fatalf("error: %v", got.err)
				}
				if !eqStrings(got.rows, tt.want) {
					t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tt.want))
				}
			})
		})
	}
}

func TestCSVErrors(t *testing.T) {
	tests := []struct {
		name string
		cols []string
		opts func(*Options)
		in   string
		want string
	}{
		{"decimal comma", []string{"id string", "amount decimal(10,2)"}, nil,
			"id,amount\na,1.00\nb,\"12,50\"\n", `f.csv:3: column amount (2): "12,50" is not a decimal(10,2)`},
		{"decimal scale", []string{"amount decimal(10,2)"}, nil,
			"amount\n12.345\n", `f.csv:2: column amount (1): "12.345" is not a decimal(10,2): more digits after the point than the scale 2 (no rounding)`},
		{"decimal precision", []string{"amount decimal(10,2)"}, nil,
			"amount\n123456789.5\n", `f.csv:2: column amount (1): "123456789.5" is not a decimal(10,2): more than 8 digits before the point`},
		{"integer range", []string{"n integer"}, nil,
			"n\n2147483648\n", `f.csv:2: column n (1): "2147483648" is not an integer: out of range`},
		{"byte range", []string{"n byte"}, nil, "n\n-129\n", `f.csv:2: column n (1): "-129" is not a byte: out of range`},
		{"long syntax", []string{"n long"}, nil, "n\n1.0\n", `f.csv:2: column n (1): "1.0" is not a long`},
		{"boolean", []string{"b boolean"}, nil, "b\nmaybe\n", `f.csv:2: column b (1): "maybe" is not a boolean`},
		{"date", []string{"d date"}, nil, "d\n2026-02-30\n", `f.csv:2: column d (1): "2026-02-30" is not a date`},
		{"timestamp", []string{"ts timestamp"}, nil, "ts\n2026-01-14 25:00:00\n", `f.csv:2: column ts (1): "2026-01-14 25:00:00" is not a timestamp`},
		{"timestamp nanos", []string{"ts timestamp"}, nil, "ts\n2026-01-14 10:00:00.0000001\n",
			`f.csv:2: column ts (1): "2026-01-14 10:00:00.0000001" is not a timestamp: finer than microseconds`},
		{"timestamp_ntz offset", []string{"ts timestamp_ntz"}, nil, "ts\n2026-01-14T10:00:00Z\n",
			`f.csv:2: column ts (1): "2026-01-14T10:00:00Z" is not a timestamp_ntz: has a zone offset; timestamp_ntz holds wall-clock times`},
		{"line counts quoted newlines", []string{"s string", "n long"}, nil,
			"s,n\n\"a\nb\nc\",1\nx,y\n", `f.csv:5: column n (2): "y" is not a long`},
		{"column number is the file position", []string{"n long", "s string"}, nil,
			"s,n\nx,1\ny,zz\n", `f.csv:3: column n (2): "zz" is not a long`},
		{"null in not nullable", []string{"id string!", "n long"}, nil, "id,n\n,1\n",
			`f.csv:2: column id (1): null in a column that is not nullable`},
		{"too few fields", []string{"a long", "b long"}, nil, "a,b\n1\n", `f.csv:2: 1 fields, want 2`},
		{"too many fields", []string{"a long", "b long"}, nil, "a,b\n1,2,3\n", `f.csv:2: 3 fields, want 2`},
		{"unterminated quote", []string{"a string"}, nil, "a\n\"abc\n", `f.csv:2: quoted field never closed`},
		{"junk after quote", []string{"a string", "b string"}, nil, "a,b\n\"x\"y,1\n", `f.csv:2: field 1: 'y' after the closing quote`},
		{"bare quote", []string{"a string"}, nil, "a\nx\"y\n", `f.csv:2: field 1: quote inside an unquoted field (quote the whole field and double the quote)`},
		{"invalid utf8", []string{"a string"}, nil, "a\n\xff\n", `f.csv:2: column a (1): "\xff" is not a string: invalid UTF-8`},
		{"unknown column", []string{"a string"}, nil, "a,b\nx,y\n", `decode f.csv:1: header column "b" (2) is not declared: declare it on the table ({name: b, type: string}, or its type) or remove it from the file`},
		{"missing required column", []string{"a string", "id long!"}, func(o *Options) { o.AllowMissingColumns = true }, "a\nx\n",
			`decode f.csv: header lacks the declared column id (long, not nullable); add it to the file (allow_missing_columns fills only nullable columns with NULL)`},
		{"duplicate header", []string{"a string"}, nil, "a,A\nx,y\n", `decode f.csv:1: header columns "a" and "A" (2) both name column a`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachParallelism(t, func(t *testing.T, par int) {
				opts := Options{Schema: schema(t, tt.cols...), Parallelism: par}
				if tt.opts != nil {
					tt.opts(&opts)
				}
				got := decodeAll(t, tt.in, opts)
				if got.err == nil {
					t.Fatalf("no error; rows:%s\nwant error %s", showRows(got.rows), tt.want)
				}
				if got.err.Error() != tt.want {
					t.Errorf("error:\n\t%s\nwant:\n\t%s", got.err, tt.want)
				}
			})
		})
	}
}

func TestCSVErrorFields(t *testing.T) {
	opts := Options{Schema: schema(t, "id string", "amount decimal(10,2)")}
	got := decodeAll(t, "id,amount\na,1\nb,\"12,50\"\n", opts)
	e, ok := AsError(got.err)
	if !ok {
		t.Fatalf("error %v is not an *Error", got.err)
	}
	want := Error{File: "f.csv", Line: 3, Column: "amount", ColumnNumber: 2, Value: "12,50", Record: `b,"12,50"`,
		Msg: `column amount (2): "12,50" is not a decimal(10,2)`}
	if *e != want {
		t.Errorf("got  %+v\nwant %+v", *e, want)
	}
}

func TestCSVSkip(t *testing.T) {
	forEachParallelism(t, func(t *testing.T, par int) {
		in := "id,qty,amount\n" +
			"a,1,1.00\n" +
			"b,x,2.00\n" + // bad qty
			"c,3,3.00\n" +
			"d,4,4.001\n" + // bad amount
			"e,5\n" + // too few fields
			"\"f\nf\",6,6.00\n" +
			",7,7.00\n" + // null id
			"g,8,8.00\n"
		opts := Options{Schema: schema(t, "id string!", "qty long", "amount decimal(10,2)"), OnError: Skip,
			Parallelism: par, BatchSize: 2}
		got := decodeAll(t, in, opts)
		if got.err != nil {
			t.Fatal(got.err)
		}
		want := []string{"a|1|1.00", "c|3|3.00", "f\nf|6|6.00", "g|8|8.00"}
		if !eqStrings(got.rows, want) {
			t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(want))
		}
		wantBad := []string{
			`f.csv:3: column qty (2): "x" is not a long`,
			`f.csv:5: column amount (3): "4.001" is not a decimal(10,2): more digits after the point than the scale 2 (no rounding)`,
			`f.csv:6: 2 fields, want 3`,
			`f.csv:9: column id (1): null in a column that is not nullable`,
		}
		if !eqStrings(got.bad, wantBad) {
			t.Errorf("bad records:%s\nwant:%s", showRows(got.bad), showRows(wantBad))
		}
		wantRecords := []string{"b,x,2.00", "d,4,4.001", "e,5", ",7,7.00"}
		if !eqStrings(got.badRecords, wantRecords) {
			t.Errorf("bad record texts:%s\nwant:%s", showRows(got.badRecords), showRows(wantRecords))
		}
	})
}

func TestCSVBatches(t *testing.T) {
	forEachParallelism(t, func(t *testing.T, par int) {
		var sb strings.Builder
		sb.WriteString("n\n")
		var want []string
		for i := range 10 {
			sb.WriteString("1" + string(rune('0'+i)) + "\n")
			want = append(want, "1"+string(rune('0'+i)))
		}
		got := decodeAll(t, sb.String(), Options{Schema: schema(t, "n long"), BatchSize: 3, Parallelism: par})
		if got.err != nil {
			t.Fatal(got.err)
		}
		if !eqStrings(got.rows, want) {
			t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(want))
		}
		if wantB := []int{3, 3, 3, 1}; !eqInts(got.batches, wantB) {
			t.Errorf("batches %v, want %v", got.batches, wantB)
		}
	})
}

// TestCSVLargeQuoted crosses chunk and read-buffer boundaries with quoted newlines.
func TestCSVLargeQuoted(t *testing.T) {
	forEachParallelism(t, func(t *testing.T, par int) {
		var sb strings.Builder
		sb.WriteString("id,note\n")
		var want []string
		big := strings.Repeat("x", 300<<10)
		for i := range 2000 {
			note := "n\"\"" + string(rune('a'+i%26)) + "\nsecond"
			wantNote := "n\"" + string(rune('a'+i%26)) + "\nsecond"
			if i == 777 {
				note, wantNote = big, big
			}
			sb.WriteString(strconv.Itoa(i) + ",\"" + note + "\"\n")
			want = append(want, strconv.Itoa(i)+"|"+wantNote)
		}
		sb.WriteString("2000,zz\n")
		opts := Options{Schema: schema(t, "id long", "note string"), BatchSize: 100, Parallelism: par, OnError: Skip}
		got := decodeAll(t, sb.String(), opts)
		want = append(want, "2000|zz")
		if got.err != nil {
			t.Fatal(got.err)
		}
		if !eqStrings(got.rows, want) {
			t.Errorf("got %d rows, want %d; first difference at %d", len(got.rows), len(want), firstDiff(got.rows, want))
		}
		if len(got.batches) != 21 {
			t.Errorf("%d batches, want 21", len(got.batches))
		}
	})
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestCSVStopEarly releases a parallel reader after one batch, and cancels another: the
// parsing goroutines stop, nothing leaks, and the cancellation is the reader's error.
func TestCSVStopEarly(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("n\n")
	for i := range 5000 {
		sb.WriteString(strconv.Itoa(i) + "\n")
	}
	base := runtime.NumGoroutine()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	opts := Options{Format: CSV, Schema: schema(t, "n long"), BatchSize: 10, Parallelism: 3, Mem: mem}

	r, err := NewReader(context.Background(), strings.NewReader(sb.String()), "f.csv", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Next() {
		t.Fatalf("no first batch: %v", r.Err())
	}
	r.Release()

	ctx, cancel := context.WithCancel(context.Background())
	r, err = NewReader(ctx, strings.NewReader(sb.String()), "f.csv", opts)
	if err != nil {
		t.Fatal(err)
	}
	r.Next()
	cancel()
	for r.Next() {
	}
	if !errors.Is(r.Err(), context.Canceled) {
		t.Errorf("Err() = %v, want context.Canceled", r.Err())
	}
	r.Release()

	mem.AssertSize(t, 0)
	for i := 0; runtime.NumGoroutine() > base; i++ {
		if i == 100 {
			t.Fatalf("%d goroutines, %d before: parsing goroutines still running", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCSVLimits: an unclosed quote does not read the whole file into memory, and a chunk
// is cut early when its records are large.
func TestCSVLimits(t *testing.T) {
	defer func(c, r int) { maxChunkBytes, maxRecordBytes = c, r }(maxChunkBytes, maxRecordBytes)
	maxChunkBytes, maxRecordBytes = 1<<20, 1<<20
	forEachParallelism(t, func(t *testing.T, par int) {
		in := "a,b\n1,2\n3,\"never closed\n" + strings.Repeat("x,y\n", 1<<20)
		got := decodeAll(t, in, Options{Schema: schema(t, "a long", "b string"), Parallelism: par})
		if want := "f.csv:3: a record longer than 1 MiB (an unclosed quote?)"; got.err == nil || got.err.Error() != want {
			t.Errorf("error %v, want %s", got.err, want)
		}

		var sb strings.Builder
		sb.WriteString("a,b\n")
		big := strings.Repeat("z", 100<<10)
		for i := range 30 {
			sb.WriteString(strconv.Itoa(i) + "," + big + "\n")
		}
		got = decodeAll(t, sb.String(), Options{Schema: schema(t, "a long", "b string"), Parallelism: par})
		if got.err != nil {
			t.Fatal(got.err)
		}
		if len(got.rows) != 30 || len(got.batches) < 3 {
			t.Errorf("%d rows in batches %v, want 30 rows in at least 3 batches of about 1 MiB", len(got.rows), got.batches)
		}
	})
}
