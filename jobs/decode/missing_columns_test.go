package decode

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// A declared column that a CSV header lacks is an error naming every such column, unless
// AllowMissingColumns fills the nullable ones with nulls and MissingColumns lists them.
func TestCSVMissingColumns(t *testing.T) {
	tests := []struct {
		name    string
		cols    []string
		opts    func(*Options)
		in      string
		err     string
		want    []string
		missing []string
	}{
		{"two missing", []string{"id long", "email string", "city string"}, nil, "id\n1\n",
			`decode f.csv: header lacks the declared columns email (string), city (string); add them to the file, or set allow_missing_columns: true on the stage to fill them with NULL`,
			nil, nil},
		{"one missing", []string{"id long", "amount decimal(10,2)"}, nil, "id\n1\n",
			`decode f.csv: header lacks the declared column amount (decimal(10,2)); add it to the file, or set allow_missing_columns: true on the stage to fill it with NULL`,
			nil, nil},
		{"header only", []string{"id long", "email string"}, nil, "id\n",
			`decode f.csv: header lacks the declared column email (string); add it to the file, or set allow_missing_columns: true on the stage to fill it with NULL`,
			nil, nil},
		{"one not nullable", []string{"id long!", "email string", "city string"}, nil, "city\nx\n",
			`decode f.csv: header lacks the declared columns id (long, not nullable), email (string); add them to the file (allow_missing_columns fills only nullable columns with NULL)`,
			nil, nil},
		{"not nullable, allowed", []string{"id long!", "email string", "city string"}, allow, "city\nx\n",
			`decode f.csv: header lacks the declared column id (long, not nullable); add it to the file (allow_missing_columns fills only nullable columns with NULL)`,
			nil, nil},
		{"with other header problems", []string{"id long", "email string"}, nil, "id,e_mail\n1,x\n",
			`decode f.csv:1: header column "e_mail" (2) is not declared: declare it on the table ({name: e_mail, type: string}, or its type) or remove it from the file; header lacks the declared column email (string); add it to the file, or set allow_missing_columns: true on the stage to fill it with NULL`,
			nil, nil},
		{"allowed", []string{"id long", "email string", "n long", "city string"}, allow, "CITY,id\nParis,1\nRome,2\n",
			"", []string{"1|∅|∅|Paris", "2|∅|∅|Rome"}, []string{"email", "n"}},
		{"allowed, none missing", []string{"id long", "city string"}, allow, "city,id\nParis,1\n",
			"", []string{"1|Paris"}, nil},
		{"allowed, with a line column", []string{"id long", "email string", "city string"}, func(o *Options) { o.AllowMissingColumns, o.LineColumn = true, "line" },
			"id,city\n1,a\n\n2,b\n", "", []string{"1|∅|a|2", "2|∅|b|4"}, []string{"email"}},
		{"no header: by position, the field count is checked", []string{"id long", "email string", "city string"},
			func(o *Options) { o.CSV.NoHeader = true }, "1,a,b\n2,c\n", `f.csv:2: 2 fields, want 3`, nil, nil},
		{"empty file: no header, no rows", []string{"id long", "email string"}, nil, "", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachParallelism(t, func(t *testing.T, par int) {
				opts := Options{Schema: schema(t, tt.cols...), Parallelism: par}
				if tt.opts != nil {
					tt.opts(&opts)
				}
				got := decodeAll(t, tt.in, opts)
				if tt.err != "" {
					if got.err == nil || got.err.Error() != tt.err {
						t.Fatalf("error:\n\t%v\nwant:\n\t%s", got.err, tt.err)
					}
					return
				}
				if got.err != nil {
					t.Fatal(got.err)
				}
				if !eqStrings(got.rows, tt.want) {
					t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tt.want))
				}
				if !eqStrings(got.missing, tt.missing) {
					t.Errorf("MissingColumns() = %q, want %q", got.missing, tt.missing)
				}
			})
		})
	}
}

func allow(o *Options) { o.AllowMissingColumns = true }

// The error names the file as the caller does.
func TestMissingColumnsFileName(t *testing.T) {
	_, err := NewReader(context.Background(), strings.NewReader("id,name\n1,a\n"), "landing/a.csv", Options{Format: CSV,
		Schema: schema(t, "id long", "name string", "email string", "city string")})
	want := `decode landing/a.csv: header lacks the declared columns email (string), city (string); add them to the file, or set allow_missing_columns: true on the stage to fill them with NULL`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n\t%v\nwant:\n\t%s", err, want)
	}
}

func TestParquetMissingColumns(t *testing.T) {
	data := sampleParquet(t) // A int32, d decimal(5,2), ts, s, extra
	tests := []struct {
		name    string
		cols    []string
		allow   bool
		err     string
		want    []string
		missing []string
	}{
		{"missing", []string{"a integer", "email string", "extra long", "n long"}, false,
			`decode f.csv: file lacks the declared columns email (string), n (long); add them to the file, or set allow_missing_columns: true on the stage to fill them with NULL`,
			nil, nil},
		{"one not nullable", []string{"a integer", "email string!", "n long"}, false,
			`decode f.csv: file lacks the declared columns email (string, not nullable), n (long); add them to the file (allow_missing_columns fills only nullable columns with NULL)`,
			nil, nil},
		{"not nullable, allowed", []string{"a integer", "email string!", "n long"}, true,
			`decode f.csv: file lacks the declared column email (string, not nullable); add it to the file (allow_missing_columns fills only nullable columns with NULL)`,
			nil, nil},
		{"allowed", []string{"email string", "extra long", "n long"}, true, "",
			[]string{"∅|7|∅", "∅|8|∅", "∅|9|∅"}, []string{"email", "n"}},
		{"allowed, none missing", []string{"extra long"}, true, "", []string{"7", "8", "9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeAll(t, data, Options{Format: Parquet, Schema: schema(t, tt.cols...), IgnoreExtraColumns: true,
				AllowMissingColumns: tt.allow})
			if tt.err != "" {
				if got.err == nil || got.err.Error() != tt.err {
					t.Fatalf("error:\n\t%v\nwant:\n\t%s", got.err, tt.err)
				}
				return
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			if !eqStrings(got.rows, tt.want) {
				t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(tt.want))
			}
			if !eqStrings(got.missing, tt.missing) {
				t.Errorf("MissingColumns() = %q, want %q", got.missing, tt.missing)
			}
		})
	}
}

// NDJSON keeps its per-line rule: a key a line lacks is null on that line, with or
// without AllowMissingColumns, and MissingColumns is empty.
func TestNDJSONMissingKeys(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		got := decodeAll(t, `{"id":1}`+"\n"+`{"id":2,"email":"x"}`, Options{Format: NDJSON,
			Schema: schema(t, "id long", "email string", "city string"), AllowMissingColumns: allowed})
		if got.err != nil {
			t.Fatal(got.err)
		}
		if want := []string{"1|∅|∅", "2|x|∅"}; !eqStrings(got.rows, want) {
			t.Errorf("rows:%s\nwant:%s", showRows(got.rows), showRows(want))
		}
		if len(got.missing) != 0 {
			t.Errorf("MissingColumns() = %q, want none", got.missing)
		}
	}
}

// A missing column filled with nulls has the declared type.
func TestMissingColumnType(t *testing.T) {
	r, err := NewReader(context.Background(), strings.NewReader("id\n1\n"), "f.csv", Options{Format: CSV,
		Schema: schema(t, "id long", "amount decimal(10,2)"), AllowMissingColumns: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatal(r.Err())
	}
	col := r.RecordBatch().Column(1)
	if _, ok := col.(*array.Decimal128); !ok || !arrow.TypeEqual(col.DataType(), &arrow.Decimal128Type{Precision: 10, Scale: 2}) || col.NullN() != 1 {
		t.Errorf("missing column %s of %d nulls, want decimal(10, 2), all null", col.DataType(), col.NullN())
	}
	if got := r.MissingColumns(); len(got) != 1 || got[0] != "amount" {
		t.Errorf("MissingColumns() = %q, want [amount]", got)
	}
}
