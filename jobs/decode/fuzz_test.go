package decode

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCSV checks the CSV scanner against encoding/csv: whenever encoding/csv reads the
// whole input without error and with a fixed number of fields, the decoder reads the same
// records, starting on the same lines, sequentially and in parallel with tiny batches; on
// any input it must not panic and must agree with itself across parallelism settings,
// lines included.
func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n", "a,b\n\"x,y\",\"\"\"\"\n", "a,b\n\"multi\nline\",2\n3,4", "a,b\n,\n\n1,\n",
		"a,b\n\"unterminated,1\n", "a,b\nx\"y,1\n", "a,b\n\"x\"y,1\n", "a,b,c\n1,2\n", "\"a\n\",b\n1,2\n",
		"\n\na,b\n\n\"x\n\n\",\"\ny\"\n\n1,2", "a,b\n\"x\ny\"z,1\n2,3\n4,5\n", "a,b\nx,\"y\n\"\"\n\"\n\n\nc,d\n",
	} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, in string, batch uint8) {
		if strings.ContainsRune(in, '\r') || !utf8.ValidString(in) || strings.HasPrefix(in, "\xef\xbb\xbf") {
			return // encoding/csv rewrites \r\n in quotes and keeps a BOM; we reject bad UTF-8
		}
		bs := 1 + int(batch%5)
		cr := csv.NewReader(strings.NewReader(in))
		cr.FieldsPerRecord = -1
		var want [][]string
		var wantLines []string // the line each record starts on
		var err error
		for {
			rec, rerr := cr.Read()
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				err = rerr
				break
			}
			line, _ := cr.FieldPos(0)
			want = append(want, rec)
			wantLines = append(wantLines, strconv.Itoa(line))
		}
		nf := 2
		if err == nil && len(want) > 0 {
			nf = len(want[0])
		}
		if nf < 2 || nf > 20 {
			return // one column: blank lines are values for us, skipped by encoding/csv
		}
		var cols []string
		for i := range nf {
			cols = append(cols, "c"+strconv.Itoa(i)+" string")
		}
		read := func(par int, onError OnError) (rows, lines, bad []string, err error) {
			opts := Options{Format: CSV, Schema: schema(t, cols...), CSV: CSVOptions{NoHeader: true},
				BatchSize: bs, Parallelism: par, OnError: onError, LineColumn: "_line"}
			opts.OnBadRecord = func(e *Error) { bad = append(bad, e.Error()) }
			r, err := NewReader(context.Background(), bytes.NewReader([]byte(in)), "f.csv", opts)
			if err != nil {
				return nil, nil, nil, err
			}
			defer r.Release()
			for r.Next() {
				rec := r.RecordBatch()
				for i := 0; i < int(rec.NumRows()); i++ {
					lines = append(lines, rec.Column(nf).ValueStr(i))
					var vals []string
					for _, c := range rec.Columns()[:nf] {
						v := ""
						if !c.IsNull(i) {
							v = c.ValueStr(i)
						}
						vals = append(vals, strconv.Quote(v))
					}
					rows = append(rows, strings.Join(vals, ","))
				}
			}
			return rows, lines, bad, r.Err()
		}
		seq, seqLines, seqBad, seqErr := read(1, Skip)
		par, parLines, parBad, parErr := read(3, Skip)
		if (seqErr == nil) != (parErr == nil) || !eqStrings(seq, par) || !eqStrings(seqLines, parLines) || !eqStrings(seqBad, parBad) {
			t.Fatalf("sequential and parallel differ:\nseq %q %q %q %v\npar %q %q %q %v", seq, seqLines, seqBad, seqErr, par, parLines, parBad, parErr)
		}
		if err != nil {
			return
		}
		var wantRows []string
		for _, rec := range want {
			if len(rec) != nf {
				return
			}
			var vals []string
			for _, v := range rec {
				vals = append(vals, strconv.Quote(v))
			}
			wantRows = append(wantRows, strings.Join(vals, ","))
		}
		got, gotLines, _, gotErr := read(1, Fail)
		if gotErr != nil || !eqStrings(got, wantRows) || !eqStrings(gotLines, wantLines) {
			t.Fatalf("input %q:\ngot  %q on lines %q, %v\nwant %q on lines %q (encoding/csv)", in, got, gotLines, gotErr, wantRows, wantLines)
		}
	})
}

// FuzzNDJSON checks the NDJSON scanner against encoding/json on one-line inputs: a line
// the decoder accepts must be a valid JSON object whose values it read as encoding/json
// does, and a valid object with the right value types must be accepted.
func FuzzNDJSON(f *testing.F) {
	for _, s := range []string{`{"s":"a","n":1}`, `{"S":"\u00e9\"","n":-0}`, `{}`, `{"s":null}`, `{"n":1e2}`, `{"s":"a"} x`, `{"s":"a",}`, `[1]`, `{"n":01}`, "{\"\x00\":null}", `{"x":{1},"s":"a"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n\r") {
			return
		}
		opts := Options{Format: NDJSON, Schema: schema(t, "s string", "n long"), IgnoreExtraColumns: true}
		r, err := NewReader(context.Background(), strings.NewReader(line), "f.ndjson", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		var got []string
		for r.Next() {
			rec := r.RecordBatch()
			for _, c := range rec.Columns() {
				if c.IsNull(0) {
					got = append(got, "null")
				} else {
					got = append(got, c.ValueStr(0))
				}
			}
		}
		accepted := r.Err() == nil && len(got) == 2
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		valid := json.Valid([]byte(line)) && dec.Decode(&m) == nil
		if accepted && strings.TrimSpace(line) != "" && !valid {
			t.Fatalf("accepted invalid JSON %q as %q", line, got)
		}
		if !valid || m == nil {
			return
		}
		// Reference: keys fold case; last one wins in encoding/json, duplicates are our error.
		want := []string{"null", "null"}
		seen := map[string]bool{}
		typesOK := true
		for k, v := range m {
			lk := strings.ToLower(k)
			if seen[lk] {
				return // duplicate keys differing in case: we reject, json keeps one
			}
			seen[lk] = true
			switch lk {
			case "s":
				switch v := v.(type) {
				case string:
					if !utf8.ValidString(v) || strings.ContainsRune(v, utf8.RuneError) {
						return
					}
					want[0] = v
				case nil:
				default:
					typesOK = false
				}
			case "n":
				switch v := v.(type) {
				case json.Number:
					n, err := strconv.ParseInt(string(v), 10, 64)
					if err != nil {
						typesOK = false
					}
					want[1] = strconv.FormatInt(n, 10)
				case nil:
				default:
					typesOK = false
				}
			}
		}
		if bytes.Count([]byte(strings.ToLower(line)), []byte(`"s"`))+bytes.Count([]byte(strings.ToLower(line)), []byte(`"n"`)) > len(seen) {
			return // a duplicate key json silently merged
		}
		if typesOK != accepted {
			t.Fatalf("%q: accepted=%v (err %v), encoding/json says types ok=%v", line, accepted, r.Err(), typesOK)
		}
		if accepted && !eqStrings(got, want) {
			t.Fatalf("%q: got %q, want %q", line, got, want)
		}
	})
}

// typedColumns covers every primitive type a declared table can have.
var typedColumns = []string{"id long!", "i integer", "sm short", "ti byte", "x double", "f float", "amt decimal(10,2)",
	"big decimal(38,10)", "b boolean", "d date", "ts timestamp", "tn timestamp_ntz", "s string", "bin binary"}

// FuzzTypedRecords reads the input as CSV (any delimiter, quote and null text) or
// NDJSON into a schema of every column type. Whatever the input: no panic, sequential
// and parallel CSV parsing agree, every bad record names the file, a line and (for a
// value) a column of the schema, a non-nullable column is never null, and on_error
// fail stops exactly when skip would drop a record.
func FuzzTypedRecords(f *testing.F) {
	f.Fuzz(func(t *testing.T, in string, ndjson bool, delim, quote byte, null string, batch uint8) {
		if len(in) > 1<<16 {
			return
		}
		sch := schema(t, typedColumns...)
		format, file := CSV, "f.csv"
		if ndjson {
			format, file = NDJSON, "f.ndjson"
		}
		read := func(par int, onError OnError) (rows []string, bad []*Error, err error) {
			opts := Options{Format: format, Schema: sch, BatchSize: 1 + int(batch%7), Parallelism: par, OnError: onError,
				CSV: CSVOptions{NoHeader: true, Delimiter: delim, Quote: quote, NullString: null}}
			opts.OnBadRecord = func(e *Error) { bad = append(bad, e) }
			r, err := NewReader(context.Background(), strings.NewReader(in), file, opts)
			if err != nil {
				return nil, nil, err
			}
			defer r.Release()
			for r.Next() {
				rec := r.RecordBatch()
				for i := 0; i < int(rec.NumRows()); i++ {
					if rec.Column(0).IsNull(i) {
						t.Fatalf("%q: the non-nullable column id is null in a record read", in)
					}
					var vals []string
					for _, c := range rec.Columns() {
						vals = append(vals, c.ValueStr(i))
					}
					rows = append(rows, strings.Join(vals, "|"))
				}
			}
			return rows, bad, r.Err()
		}
		seq, seqBad, seqErr := read(1, Skip)
		if seqErr != nil && len(seq) == 0 && len(seqBad) == 0 {
			return // refused as a whole (e.g. an invalid delimiter or quote)
		}
		for _, e := range seqBad {
			if e.File != file || e.Line < 1 || e.Msg == "" ||
				e.Column != "" && (e.ColumnNumber < 1 || !strings.EqualFold(strings.Fields(typedColumns[min(e.ColumnNumber, len(typedColumns))-1])[0], e.Column)) {
				t.Fatalf("%q: bad record %+v does not name the file, a line and a column of the schema", in, e)
			}
		}
		if !ndjson {
			var rows []string
			var rowsBad []*Error
			var rowsErr error
			withBulk(false, func() { rows, rowsBad, rowsErr = read(1, Skip) })
			if fmt.Sprint(seqErr) != fmt.Sprint(rowsErr) || !eqStrings(seq, rows) || fmt.Sprint(seqBad) != fmt.Sprint(rowsBad) {
				t.Fatalf("%q: bulk and record-by-record parsing differ:\nbulk %q %v %v\nrecord-by-record %q %v %v", in, seq, seqBad, seqErr, rows, rowsBad, rowsErr)
			}
			par, parBad, parErr := read(3, Skip)
			if (seqErr == nil) != (parErr == nil) || !eqStrings(seq, par) || len(seqBad) != len(parBad) {
				t.Fatalf("%q: sequential and parallel differ:\nseq %q %d bad %v\npar %q %d bad %v", in, seq, len(seqBad), seqErr, par, len(parBad), parErr)
			}
		}
		_, _, failErr := read(1, Fail)
		if seqErr == nil && (failErr == nil) != (len(seqBad) == 0) {
			t.Fatalf("%q: on_error skip dropped %d records, on_error fail gave %v", in, len(seqBad), failErr)
		}
	})
}
