package decode

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

// schema builds a declared schema from "name type" pairs; a trailing "!" on the type
// makes the column not nullable: schema("id string!", "amount decimal(10,2)").
func schema(t testing.TB, cols ...string) *dschema.StructType {
	t.Helper()
	st := &dschema.StructType{}
	for _, c := range cols {
		name, typ, _ := strings.Cut(c, " ")
		nullable := !strings.HasSuffix(typ, "!")
		dt, err := dschema.ParsePrimitive(strings.TrimSuffix(typ, "!"))
		if err != nil {
			t.Fatal(err)
		}
		st.Fields = append(st.Fields, &dschema.StructField{Name: name, Type: dt, Nullable: nullable})
	}
	return st
}

type decoded struct {
	rows       []string // one line per row: values joined by "|", null as "∅"
	batches    []int    // rows per batch
	bad        []string // Error() of each skipped record
	badRecords []string // and its Record
	err        error
	schema     *arrow.Schema
	missing    []string // MissingColumns
}

// decodeAll reads everything; opts.Mem is a checked allocator verified at the end.
func decodeAll(t testing.TB, data string, opts Options) decoded {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	opts.Mem = mem
	var out decoded
	if opts.OnError == Skip {
		opts.OnBadRecord = func(e *Error) {
			out.bad = append(out.bad, e.Error())
			out.badRecords = append(out.badRecords, e.Record)
		}
	}
	if opts.Format == "" {
		opts.Format = CSV
	}
	r, err := NewReader(context.Background(), bytes.NewReader([]byte(data)), "f.csv", opts)
	if err != nil {
		out.err = err
		return out
	}
	defer r.Release()
	out.schema = r.Schema()
	out.missing = r.MissingColumns()
	for r.Next() {
		rec := r.RecordBatch()
		out.batches = append(out.batches, int(rec.NumRows()))
		for i := 0; i < int(rec.NumRows()); i++ {
			vals := make([]string, rec.NumCols())
			for j, col := range rec.Columns() {
				if col.IsNull(i) {
					vals[j] = "∅"
				} else if d, ok := col.(*array.Decimal128); ok {
					vals[j] = d.Value(i).ToString(d.DataType().(*arrow.Decimal128Type).Scale)
				} else {
					vals[j] = col.ValueStr(i)
				}
			}
			out.rows = append(out.rows, strings.Join(vals, "|"))
		}
	}
	out.err = r.Err()
	if got, want := r.Rows(), int64(len(out.rows)); got != want {
		t.Errorf("Rows() = %d, want %d", got, want)
	}
	if got, want := r.BadRecords(), int64(len(out.bad)); opts.OnError == Skip && got != want {
		t.Errorf("BadRecords() = %d, want %d", got, want)
	}
	return out
}

func eqStrings(a, b []string) bool {
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

func showRows(rows []string) string {
	if len(rows) == 0 {
		return "(none)"
	}
	return "\n\t" + strings.Join(rows, "\n\t")
}

// forEachParallelism runs f sequentially and with parallel parsing.
func forEachParallelism(t *testing.T, f func(t *testing.T, par int)) {
	for _, par := range []int{1, 3} {
		t.Run(fmt.Sprintf("par%d", par), func(t *testing.T) { f(t, par) })
	}
}
