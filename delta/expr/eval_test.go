package expr

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
)

func testSchema() *dschema.StructType {
	return &dschema.StructType{Fields: []*dschema.StructField{
		{Name: "id", Type: &dschema.PrimitiveType{Name: dschema.TypeLong}, Nullable: true, Metadata: map[string]any{}},
		{Name: "country", Type: &dschema.PrimitiveType{Name: dschema.TypeString}, Nullable: true, Metadata: map[string]any{}},
		{Name: "day", Type: &dschema.PrimitiveType{Name: dschema.TypeDate}, Nullable: true, Metadata: map[string]any{}},
	}}
}

// TestMatcherThreeValuedLogic: a row matches only where the predicate is true; a
// comparison with a null is unknown, so neither it nor its negation matches, and OR with
// a true term matches.
func TestMatcherThreeValuedLogic(t *testing.T) {
	sch := testSchema()
	as, err := dschema.ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"US", "", "FR", "US"}, []bool{true, false, true, true})
	b.Field(2).(*array.Date32Builder).AppendValues([]arrow.Date32{19723, 19724, 19725, 19726}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	for _, tc := range []struct {
		where string
		want  []bool
	}{
		{"country = 'US'", []bool{true, false, false, true}},
		{"country != 'US'", []bool{false, false, true, false}},
		{"country = 'US' OR id = 2", []bool{true, true, false, true}},
		{"country IS NULL", []bool{false, true, false, false}},
		{"day >= '2024-01-02' AND id IN (1, 2, 4)", []bool{false, true, false, true}},
	} {
		p, err := Parse(tc.where)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMatcher(p, sch)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Match(rec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: row %d matches %v, want %v", tc.where, i, got[i], tc.want[i])
			}
		}
	}
	if _, err := NewMatcher(Eq("nope", 1), sch); err == nil {
		t.Error("a predicate on a column not in the schema binds")
	}
}

// TestMayMatchFile: a file is skipped only when its partition values or statistics prove
// that no row matches; without statistics it is kept.
func TestMayMatchFile(t *testing.T) {
	sch := testSchema()
	us, fr := "US", "FR"
	stats := func(min, max int64, nulls int64) func() *Stats {
		return func() *Stats {
			n := int64(10)
			return &Stats{NumRecords: &n,
				Min:       map[string]any{"id": json.Number(itoa(min))},
				Max:       map[string]any{"id": json.Number(itoa(max))},
				NullCount: map[string]any{"id": json.Number(itoa(nulls))}}
		}
	}
	part := map[string]bool{"country": true}
	for _, tc := range []struct {
		where string
		file  File
		want  bool
	}{
		{"country = 'US'", File{PartitionValues: map[string]*string{"country": &us}, IsPartition: part}, true},
		{"country = 'US'", File{PartitionValues: map[string]*string{"COUNTRY": &fr}, IsPartition: part}, false},
		{"country IS NULL", File{PartitionValues: map[string]*string{"country": nil}, IsPartition: part}, true},
		{"id > 20", File{Stats: stats(1, 20, 0)}, false},
		{"id >= 20", File{Stats: stats(1, 20, 0)}, true},
		{"id IN (0, 21)", File{Stats: stats(1, 20, 0)}, false},
		{"id = 5", File{Stats: stats(1, 20, 10)}, false}, // every id is null
		{"id IS NOT NULL", File{Stats: stats(1, 20, 10)}, false},
		{"id > 20", File{}, true},
		{"id > 20 OR country = 'US'", File{PartitionValues: map[string]*string{"country": &us}, IsPartition: part, Stats: stats(1, 20, 0)}, true},
	} {
		p, err := Parse(tc.where)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Bind(p, sch, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.MayMatchFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s on %+v: may match %v, want %v", tc.where, tc.file.PartitionValues, got, tc.want)
		}
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// TestCollatedColumnsRefused: a comparison or IN list on a string column of a collation
// other than the byte order (Delta's collations feature, as Spark writes the schema) is
// refused, naming the column and its collation; IS NULL on it and filters on a column
// in UTF8_BINARY bind.
func TestCollatedColumnsRefused(t *testing.T) {
	sch, err := dschema.Parse(`{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{}},
 {"name":"name","type":"string","nullable":true,"metadata":{"__COLLATIONS":{"name":"spark.UTF8_LCASE"}}},
 {"name":"code","type":"string","nullable":true,"metadata":{"__COLLATIONS":{"code":"spark.UTF8_BINARY"}}},
 {"name":"addr","type":{"type":"struct","fields":[
   {"name":"city","type":"string","nullable":true,"metadata":{"__COLLATIONS":{"city":"icu.de_CI"}}}]},"nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for where, want := range map[string]string{
		"name = 'alice'":                  "column name has collation spark.UTF8_LCASE",
		"id = 1 OR name IN ('a', 'b')":    "column name has collation spark.UTF8_LCASE",
		"addr.city < 'M'":                 "column addr.city has collation icu.de_CI",
		"name IS NULL AND code = 'X1'":    "",
		"code IN ('a') AND id > 3":        "",
		"addr.city IS NOT NULL OR id = 2": "",
	} {
		p, err := Parse(where)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Bind(p, sch, nil)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want it bound", where, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want one containing %q", where, err, want)
		}
	}
}
