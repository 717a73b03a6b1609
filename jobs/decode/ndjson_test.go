package decode

import (
	"strings"
	"testing"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

func TestNDJSON(t *testing.T) {
	opts := func(t *testing.T) Options {
		return Options{Format: NDJSON, Schema: schema(t, "id string!", "qty long", "amount decimal(10,2)",
			"ok boolean", "day date", "ts timestamp", "ratio double")}
	}
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"all types", `{"id":"a","qty":3,"amount":12.5,"ok":true,"day":"2026-01-14","ts":"2026-01-14T10:00:00Z","ratio":0.25}` + "\n",
			[]string{"a|3|12.50|true|2026-01-14|2026-01-14T10:00:00Z|0.25"}},
		{"decimal as string, keys in any order and case", `{"AMOUNT":"-0.01","ID":"b"}` + "\n",
			[]string{"b|∅|-0.01|∅|∅|∅|∅"}},
		{"nulls and missing keys", `{"id":"c","qty":null}` + "\r\n\n" + `{"id":"d"}`,
			[]string{"c|∅|∅|∅|∅|∅|∅", "d|∅|∅|∅|∅|∅|∅"}},
		{"escapes", `{"id":"x\"y\u00e9\n"}` + "\n", []string{"x\"yé\n|∅|∅|∅|∅|∅|∅"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeAll(t, tt.in, opts(t))
			if got.err != nil {
				t.Fatal(got.err)
			}
			if !eqStrings(got.rows, tt.want) {
				t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tt.want))
			}
		})
	}
}

func TestNDJSONErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"string for long", `{"id":"a"}` + "\n" + `{"id":"b","qty":"5"}`, `f.csv:2: column qty (2): "5" is not a long: want a JSON number`},
		{"fraction for long", `{"id":"a","qty":1.5}`, `f.csv:1: column qty (2): 1.5 is not a long`},
		{"decimal scale", `{"id":"a","amount":1.234}`, `f.csv:1: column amount (3): 1.234 is not a decimal(10,2): more digits after the point than the scale 2 (no rounding)`},
		{"number for date", `{"id":"a","day":20260114}`, `f.csv:1: column day (5): 20260114 is not a date: want a JSON string`},
		{"bad timestamp", `{"id":"a","ts":"yesterday"}`, `f.csv:1: column ts (6): "yesterday" is not a timestamp`},
		{"string for boolean", `{"id":"a","ok":"true"}`, `f.csv:1: column ok (4): "true" is not a boolean: want true or false`},
		{"missing required", `{"qty":1}`, `f.csv:1: column id (1): null in a column that is not nullable`},
		{"unknown key", `{"id":"a","colour":"red"}`, `f.csv:1: key "colour" is not a column of the schema`},
		{"duplicate key", `{"id":"a","ID":"b"}`, `f.csv:1: key "ID" appears twice`},
		{"not an object", `["a"]`, `f.csv:1: not a JSON object`},
		{"trailing text", `{"id":"a"} x`, `f.csv:1: text after the JSON object`},
		{"malformed", `{"id":"a",}`, `f.csv:1: malformed JSON at column 11: want a key string`},
		{"malformed number", `{"id":"a","qty":01}`, `f.csv:1: malformed JSON at column 17: want a value`},
		{"bad escape", `{"id":"a\x"}`, `f.csv:1: malformed JSON at column 7: want a value`},
		{"missing colon", `{"id" "a"}`, `f.csv:1: malformed JSON at column 7: want ':' after a key`},
		{"unterminated", `{"id":"a`, `f.csv:1: malformed JSON at column 7: want a value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Format: NDJSON, Schema: schema(t, "id string!", "qty long", "amount decimal(10,2)",
				"ok boolean", "day date", "ts timestamp")}
			got := decodeAll(t, tt.in, opts)
			if got.err == nil {
				t.Fatalf("no error; rows:%s", showRows(got.rows))
			}
			if got.err.Error() != tt.want {
				t.Errorf("error:\n\t%s\nwant:\n\t%s", got.err, tt.want)
			}
		})
	}
}

func TestNDJSONSkipAndBatches(t *testing.T) {
	in := `{"n":1}` + "\n" + `{"n":"x"}` + "\n" + `{"n":2}` + "\n" + `{"n":3}` + "\n" + `{"n":4,"m":1}` + "\n" + `{"n":5}` + "\n"
	got := decodeAll(t, in, Options{Format: NDJSON, Schema: schema(t, "n long"), OnError: Skip, BatchSize: 2})
	if got.err != nil {
		t.Fatal(got.err)
	}
	if want := []string{"1", "2", "3", "5"}; !eqStrings(got.rows, want) {
		t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(want))
	}
	wantBad := []string{`f.csv:2: column n (1): "x" is not a long: want a JSON number`, `f.csv:5: key "m" is not a column of the schema`}
	if !eqStrings(got.bad, wantBad) {
		t.Errorf("bad:%s\nwant:%s", showRows(got.bad), showRows(wantBad))
	}
	if want := []int{2, 2}; !eqInts(got.batches, want) {
		t.Errorf("batches %v, want %v", got.batches, want)
	}
}

func TestNDJSONNested(t *testing.T) {
	st := &dschema.StructType{Fields: []*dschema.StructField{
		{Name: "id", Type: &dschema.PrimitiveType{Name: "string"}, Nullable: true},
		{Name: "tags", Type: &dschema.ArrayType{ElementType: &dschema.PrimitiveType{Name: "string"}, ContainsNull: true}, Nullable: true},
		{Name: "addr", Type: &dschema.StructType{Fields: []*dschema.StructField{
			{Name: "city", Type: &dschema.PrimitiveType{Name: "string"}, Nullable: true},
			{Name: "zip", Type: &dschema.PrimitiveType{Name: "integer"}, Nullable: true},
		}}, Nullable: true},
	}}
	in := `{"id":"a","tags":["x","y"],"addr":{"city":"Seattle","zip":98101}}` + "\n" +
		`{"id":"b","tags":"oops"}` + "\n" +
		`{"id":"c","tags":null,"addr":{"city":"Portland"}}` + "\n"
	got := decodeAll(t, in, Options{Format: NDJSON, Schema: st, OnError: Skip})
	if got.err != nil {
		t.Fatal(got.err)
	}
	want := []string{`a|["x","y"]|{"city":"Seattle","zip":98101}`, `c|∅|{"city":"Portland","zip":null}`}
	if !eqStrings(got.rows, want) {
		t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(want))
	}
	if len(got.bad) != 1 || got.bad[0][:9] != "f.csv:2: " {
		t.Errorf("bad records %q, want one on line 2", got.bad)
	}
}

func eqInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNDJSONLongLine(t *testing.T) {
	defer func(r int) { maxRecordBytes = r }(maxRecordBytes)
	maxRecordBytes = 2 << 20
	in := `{"n":"a"}` + "\n" + `{"n":"` + strings.Repeat("x", 5<<20) + `"}` + "\n"
	got := decodeAll(t, in, Options{Format: NDJSON, Schema: schema(t, "n string")})
	if want := "f.csv:2: a line longer than 2 MiB"; got.err == nil || got.err.Error() != want {
		t.Errorf("error %v, want %s", got.err, want)
	}
}

// A bad value is shown as written in the file: a string by its content, quoted once (not
// its JSON text quoted again), anything else by its JSON text, unquoted.
func TestNDJSONErrorValues(t *testing.T) {
	tests := []struct {
		name       string
		line       string
		column     string
		num        int
		value, msg string
	}{
		{"string for a decimal", `{"amount":"12,5"}`, "amount", 3, `12,5`,
			`column amount (3): "12,5" is not a decimal(10,2)`},
		{"string with a quote and a backslash, for a long", `{"qty":"1\"2\\3"}`, "qty", 2, `1"2\3`,
			`column qty (2): "1\"2\\3" is not a long: want a JSON number`},
		{"string with a quote and a backslash, for a date", `{"day":"x\"y\\z"}`, "day", 5, `x"y\z`,
			`column day (5): "x\"y\\z" is not a date`},
		{"unicode escapes are decoded", `{"qty":"\u00e9t\u00e9 \ud83d\ude00"}`, "qty", 2, "été 😀",
			`column qty (2): "été 😀" is not a long: want a JSON number`},
		{"control character", `{"ok":"a\tb"}`, "ok", 4, "a\tb",
			`column ok (4): "a\tb" is not a boolean: want true or false`},
		{"bad base64", `{"bin":"not base64\\"}`, "bin", 7, `not base64\`,
			`column bin (7): "not base64\\" is not a binary: want base64`},
		{"number", `{"day":20260114}`, "day", 5, `20260114`,
			`column day (5): 20260114 is not a date: want a JSON string`},
		{"number out of range", `{"qty":1e400}`, "qty", 2, `1e400`,
			`column qty (2): 1e400 is not a long`},
		{"boolean", `{"qty":true}`, "qty", 2, `true`,
			`column qty (2): true is not a long: want a JSON number`},
		{"object", `{"qty":{"a":"x\"y"}}`, "qty", 2, `{"a":"x\"y"}`,
			`column qty (2): {"a":"x\"y"} is not a long: want a JSON number`},
		{"array with a tab", "{\"day\":[1,\t2]}", "day", 5, "[1,\t2]",
			`column day (5): "[1,\t2]" is not a date: want a JSON string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Format: NDJSON, Schema: schema(t, "id string", "qty long", "amount decimal(10,2)",
				"ok boolean", "day date", "ts timestamp", "bin binary")}
			got := decodeAll(t, `{"id":"a"}`+"\n"+tt.line+"\n", opts)
			e, ok := AsError(got.err)
			if !ok {
				t.Fatalf("error %v, want an *Error", got.err)
			}
			want := Error{File: "f.csv", Line: 2, Column: tt.column, ColumnNumber: tt.num, Value: tt.value, Record: tt.line, Msg: tt.msg}
			if *e != want {
				t.Errorf("got  %+v\nwant %+v", *e, want)
			}
		})
	}
}
