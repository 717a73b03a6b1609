package decode

import (
	"bytes"
	"context"
	"encoding/csv"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCSV checks the CSV scanner against encoding/csv: whenever encoding/csv reads the
// whole input without error and with a fixed number of fields, the decoder reads the same
// records, sequentially and in parallel with tiny batches; on any input it must not panic
// and must agree with itself across parallelism settings.
func FuzzCSV(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n", "a,b\n\"x,y\",\"\"\"\"\n", "a,b\n\"multi\nline\",2\n3,4", "a,b\n,\n\n1,\n",
		"a,b\n\"unterminated,1\n", "a,b\nx\"y,1\n", "a,b\n\"x\"y,1\n", "a,b,c\n1,2\n", "\"a\n\",b\n1,2\n",
	} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, in string, batch uint8) {
		if strings.ContainsRune(in, '\r') || !utf8.ValidString(in) || strings.HasPrefix(in, "\xef\xbb\xbf") {
			return // encoding/csv rewrites \r\n in quotes and keeps a BOM; we reject bad UTF-8
		}
		bs := 1 + int(batch%5)
		cr := csv.NewReader(strings.NewReader(in))
		want, err := cr.ReadAll()
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
		read := func(par int, onError OnError) ([]string, []string, error) {
			opts := Options{Format: CSV, Schema: schema(t, cols...), CSV: CSVOptions{NoHeader: true},
				BatchSize: bs, Parallelism: par, OnError: onError}
			var bad []string
			opts.OnBadRecord = func(e *Error) { bad = append(bad, e.Error()) }
			r, err := NewReader(context.Background(), bytes.NewReader([]byte(in)), "f.csv", opts)
			if err != nil {
				return nil, nil, err
			}
			defer r.Release()
			var rows []string
			for r.Next() {
				rec := r.RecordBatch()
				for i := 0; i < int(rec.NumRows()); i++ {
					var vals []string
					for _, c := range rec.Columns() {
						v := ""
						if !c.IsNull(i) {
							v = c.ValueStr(i)
						}
						vals = append(vals, strconv.Quote(v))
					}
					rows = append(rows, strings.Join(vals, ","))
				}
			}
			return rows, bad, r.Err()
		}
		seq, seqBad, seqErr := read(1, Skip)
		par, parBad, parErr := read(3, Skip)
		if (seqErr == nil) != (parErr == nil) || !eqStrings(seq, par) || !eqStrings(seqBad, parBad) {
			t.Fatalf("sequential and parallel differ:\nseq %q %q %v\npar %q %q %v", seq, seqBad, seqErr, par, parBad, parErr)
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
		got, _, gotErr := read(1, Fail)
		if gotErr != nil || !eqStrings(got, wantRows) {
			t.Fatalf("input %q:\ngot  %q, %v\nwant %q (encoding/csv)", in, got, gotErr, wantRows)
		}
	})
}
