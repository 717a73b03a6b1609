package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// allTypesSchema is a table schema with every supported type, nested ones included.
const allTypesSchema = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"i","type":"integer","nullable":true,"metadata":{}},
 {"name":"sh","type":"short","nullable":true,"metadata":{}},
 {"name":"by","type":"byte","nullable":true,"metadata":{}},
 {"name":"d","type":"double","nullable":true,"metadata":{}},
 {"name":"f","type":"float","nullable":true,"metadata":{}},
 {"name":"b","type":"boolean","nullable":true,"metadata":{}},
 {"name":"bin","type":"binary","nullable":true,"metadata":{}},
 {"name":"dt","type":"date","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"ntz","type":"timestamp_ntz","nullable":true,"metadata":{}},
 {"name":"dec9","type":"decimal(5,2)","nullable":true,"metadata":{}},
 {"name":"dec18","type":"decimal(18,4)","nullable":true,"metadata":{}},
 {"name":"dec38","type":"decimal(38,10)","nullable":true,"metadata":{}},
 {"name":"st","type":{"type":"struct","fields":[
   {"name":"x","type":"integer","nullable":true,"metadata":{}},
   {"name":"y","type":{"type":"struct","fields":[{"name":"z","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},
  "nullable":true,"metadata":{}},
 {"name":"arr","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}},
 {"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"string","containsNull":true},"valueContainsNull":true},"nullable":true,"metadata":{}},
 {"name":"p_str","type":"string","nullable":true,"metadata":{}},
 {"name":"p_date","type":"date","nullable":true,"metadata":{}},
 {"name":"p_int","type":"integer","nullable":true,"metadata":{}}
]}`

const allTypesRows = `[
{"id":1,"s":"alpha","i":1,"sh":1,"by":1,"d":1.5,"f":0.25,"b":true,"bin":"AQI=","dt":"2024-01-31","ts":"2024-01-31T10:11:12.345678Z","ntz":"2024-01-31T10:11:12.345678","dec9":"123.45","dec18":"12345678901234.5678","dec38":"1234567890123456789012345678.0123456789","st":{"x":1,"y":{"z":"zz"}},"arr":[1,null,3],"m":[{"key":"k","value":["a",null]}],"p_str":"US","p_date":"2024-01-01","p_int":1},
{"id":2,"s":null,"i":null,"sh":null,"by":null,"d":null,"f":null,"b":null,"bin":null,"dt":null,"ts":null,"ntz":null,"dec9":null,"dec18":null,"dec38":null,"st":null,"arr":null,"m":null,"p_str":null,"p_date":null,"p_int":null},
{"id":3,"s":"gamma","i":-7,"sh":-300,"by":-8,"d":-2.25,"f":-1.5,"b":false,"bin":"","dt":"1969-12-31","ts":"1969-12-31T23:59:59.999999Z","ntz":"1900-01-01T00:00:00","dec9":"-0.05","dec18":"-1.0000","dec38":"-0.0000000001","st":{"x":null,"y":null},"arr":[],"m":[],"p_str":"a b/c:d%e","p_date":"2024-01-01","p_int":-5},
{"id":4,"s":"delta","i":4,"sh":4,"by":4,"d":4,"f":4,"b":true,"bin":"/w==","dt":"2000-02-29","ts":"2000-02-29T00:00:00Z","ntz":"2000-02-29T12:00:00","dec9":"999.99","dec18":"0.0001","dec38":"0","st":{"x":4,"y":{"z":null}},"arr":[4],"m":[{"key":"a","value":null},{"key":"b","value":[]}],"p_str":"US","p_date":"2024-01-01","p_int":1}
]`

func mustSchema(t testing.TB, s string) *StructType {
	t.Helper()
	st, err := ParseSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func recordFromJSON(t testing.TB, sc *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatalf("record from JSON: %v", err)
	}
	return rec
}

// rowSet renders records as sorted JSON lines, one per row: an unordered multiset.
func rowSet(t testing.TB, recs []arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		var buf bytes.Buffer
		if err := array.RecordToJSON(r, &buf); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	sort.Strings(out)
	return out
}

func diffRows(t testing.TB, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	t.Errorf("rows differ: got %d, want %d", len(got), len(want))
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("row %d:\n got  %s\n want %s", i, g, w)
		}
	}
}

func scanAll(t testing.TB, st objectstore.Store, root string, sch *StructType, parts []string, adds []*Add, opts ScanOptions) ([]arrow.RecordBatch, ScanStats) {
	t.Helper()
	sc, err := Scan(context.Background(), st, root, sch, parts, adds, opts)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer sc.Release()
	recs, err := ReadAll(sc)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return recs, sc.Stats()
}

func TestRoundTripAllTypes(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, allTypesSchema)
	asch, err := ArrowSchema(sch)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		parts []string
	}{
		{"unpartitioned", nil},
		{"partitioned", []string{"p_str", "p_date", "p_int"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := mem.New(mem.Config{})
			rec := recordFromJSON(t, asch, allTypesRows)
			defer rec.Release()
			adds, err := WriteRecords(ctx, st, "tbl", sch, tc.parts, []arrow.RecordBatch{rec, rec.NewSlice(0, 2)}, WriteOptions{})
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			got, _ := scanAll(t, st, "tbl", sch, tc.parts, adds, ScanOptions{})
			want := rowSet(t, []arrow.RecordBatch{rec, rec.NewSlice(0, 2)})
			diffRows(t, rowSet(t, got), want)
			if tc.parts == nil && len(adds) != 1 {
				t.Errorf("unpartitioned write made %d files, want 1", len(adds))
			}
			if tc.parts != nil {
				checkPartitionedAdds(t, st, adds)
			}
		})
	}
}

func checkPartitionedAdds(t *testing.T, st objectstore.Store, adds []*Add) {
	t.Helper()
	nameRE := regexp.MustCompile(`/part-\d{5}-[0-9a-f-]{36}-c000\.snappy\.parquet$`)
	var paths []string
	for _, a := range adds {
		paths = append(paths, a.Path)
		if !nameRE.MatchString(a.Path) {
			t.Errorf("file name %s does not look like part-00000-<uuid>-c000.snappy.parquet", a.Path)
		}
		if !a.DataChange || a.Size <= 0 || a.ModificationTime <= 0 || a.Stats == "" {
			t.Errorf("add %s: dataChange %v size %d mtime %d stats %q", a.Path, a.DataChange, a.Size, a.ModificationTime, a.Stats)
		}
		if len(a.PartitionValues) != 3 {
			t.Errorf("add %s: partitionValues %v, want 3 entries", a.Path, a.PartitionValues)
		}
	}
	want := map[string]map[string]any{
		"p_str=US/p_date=2024-01-01/p_int=1/": {"p_str": "US", "p_date": "2024-01-01", "p_int": "1"},
		"p_str=__HIVE_DEFAULT_PARTITION__/p_date=__HIVE_DEFAULT_PARTITION__/p_int=__HIVE_DEFAULT_PARTITION__/": {"p_str": nil, "p_date": nil, "p_int": nil},
		// "/" ":" "%" are Hive-escaped in the directory, then the path is URI-encoded.
		"p_str=a%20b%252Fc%253Ad%2525e/p_date=2024-01-01/p_int=-5/": {"p_str": "a b/c:d%e", "p_date": "2024-01-01", "p_int": "-5"},
	}
	found := map[string]bool{}
	for _, a := range adds {
		for prefix, pv := range want {
			if !strings.HasPrefix(a.Path, prefix) {
				continue
			}
			found[prefix] = true
			b, _ := json.Marshal(a.PartitionValues)
			w, _ := json.Marshal(pv)
			if string(b) != string(w) {
				t.Errorf("add %s: partitionValues %s, want %s", a.Path, b, w)
			}
		}
	}
	for prefix := range want {
		if !found[prefix] {
			t.Errorf("no file under %s; paths: %v", prefix, paths)
		}
	}
	// The escaped directory exists as such on storage.
	infos, err := st.List(context.Background(), "tbl/p_str=a b%2Fc%3Ad%25e/", "")
	if err != nil || len(infos) == 0 {
		t.Errorf("list escaped partition dir: %v, %d objects", err, len(infos))
	}
}

func TestStats(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, allTypesSchema)
	asch, _ := ArrowSchema(sch)
	rec := recordFromJSON(t, asch, allTypesRows)
	defer rec.Release()
	st := mem.New(mem.Config{})
	adds, err := WriteRecords(ctx, st, "", sch, []string{"p_str", "p_date", "p_int"}, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var us *Add
	for _, a := range adds {
		if strings.HasPrefix(a.Path, "p_str=US/") {
			us = a
		}
	}
	if us == nil {
		t.Fatal("no US file")
	}
	want := `{"numRecords":2,` +
		`"minValues":{"id":1,"s":"alpha","i":1,"sh":1,"by":1,"d":1.5,"f":0.25,"dt":"2000-02-29","ts":"2000-02-29T00:00:00.000Z","ntz":"2000-02-29T12:00:00.000","dec9":123.45,"dec18":0.0001,"dec38":0.0000000000,"st":{"x":1,"y":{"z":"zz"}}},` +
		`"maxValues":{"id":4,"s":"delta","i":4,"sh":4,"by":4,"d":4,"f":4,"dt":"2024-01-31","ts":"2024-01-31T10:11:12.345Z","ntz":"2024-01-31T10:11:12.345","dec9":999.99,"dec18":12345678901234.5678,"dec38":1234567890123456789012345678.0123456789,"st":{"x":4,"y":{"z":"zz"}}},` +
		`"nullCount":{"id":0,"s":0,"i":0,"sh":0,"by":0,"d":0,"f":0,"b":0,"bin":0,"dt":0,"ts":0,"ntz":0,"dec9":0,"dec18":0,"dec38":0,"st":{"x":0,"y":{"z":1}},"arr":0,"m":0}}`
	if us.Stats != want {
		t.Errorf("stats:\n got  %s\n want %s", us.Stats, want)
	}
	var nullFile *Add
	for _, a := range adds {
		if a.PartitionValues["p_str"] == nil {
			nullFile = a
		}
	}
	wantNull := `{"numRecords":1,"minValues":{"id":2},"maxValues":{"id":2},"nullCount":{"id":0,"s":1,"i":1,"sh":1,"by":1,"d":1,"f":1,"b":1,"bin":1,"dt":1,"ts":1,"ntz":1,"dec9":1,"dec18":1,"dec38":1,"st":{"x":1,"y":{"z":1}},"arr":1,"m":1}}`
	if nullFile == nil || nullFile.Stats != wantNull {
		t.Errorf("null row stats:\n got  %v\n want %s", nullFile, wantNull)
	}
}

func TestStatsStringTruncationAndIndexedCols(t *testing.T) {
	long := strings.Repeat("a", 40)
	maxLong := strings.Repeat("z", 32) + "\U0010FFFF" + "x" + strings.Repeat("y", 8)
	for _, tc := range []struct {
		in     string
		isMax  bool
		want   string
		wantOK bool
	}{
		{"short", true, "short", true},
		{long, false, strings.Repeat("a", 32), true},
		{long, true, strings.Repeat("a", 32) + "\U0010FFFF", true},
		{strings.Repeat("é", 33), true, strings.Repeat("é", 32) + "\U0010FFFF", true},
		{maxLong, true, "", false},
	} {
		got, ok := truncateStat(tc.in, tc.isMax)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("truncateStat(%q, %v) = %q, %v; want %q, %v", tc.in, tc.isMax, got, ok, tc.want, tc.wantOK)
		}
		if ok && tc.isMax && got < tc.in {
			t.Errorf("truncated max %q < value %q", got, tc.in)
		}
	}

	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"a","type":"string","nullable":true,"metadata":{}},{"name":"b","type":"long","nullable":true,"metadata":{}},{"name":"c","type":"double","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	rec := recordFromJSON(t, asch, `[{"a":"`+long+`","b":5,"c":1},{"a":"b","b":7,"c":2}]`)
	defer rec.Release()
	adds, err := WriteRecords(context.Background(), mem.New(mem.Config{}), "", sch, nil, []arrow.RecordBatch{rec}, WriteOptions{NumIndexedCols: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"numRecords":2,"minValues":{"a":"` + strings.Repeat("a", 32) + `","b":5},"maxValues":{"a":"b","b":7},"nullCount":{"a":0,"b":0}}`
	if adds[0].Stats != want {
		t.Errorf("stats:\n got  %s\n want %s", adds[0].Stats, want)
	}
}

func TestSchemaEnforcement(t *testing.T) {
	ctx := context.Background()
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},{"name":"name","type":"string","nullable":true,"metadata":{}},{"name":"st","type":{"type":"struct","fields":[{"name":"q","type":"integer","nullable":false,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	for _, tc := range []struct {
		name    string
		fields  []arrow.Field
		rows    string
		wantErr string
	}{
		{"type mismatch", []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Float64}}, `[{"id":1}]`,
			"column id: table type long, written type double"},
		{"extra column", []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true}}, `[{"id":1}]`,
			"column extra (string) is not in the table schema"},
		{"missing non-nullable", []arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, `[{"name":"x"}]`,
			"column id (long, not nullable) is missing"},
		{"null in non-nullable", []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, `[{"id":null},{"id":2}]`,
			"column id is not nullable but the written data has 1 null values"},
		{"null in nested non-nullable", []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "st", Type: arrow.StructOf(arrow.Field{Name: "q", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true}},
			`[{"id":1,"st":{"q":null}},{"id":2,"st":null}]`, "column st.q is not nullable but the written data has 1 null values"},
		{"nested type mismatch", []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "st", Type: arrow.StructOf(arrow.Field{Name: "q", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true}},
			`[{"id":1,"st":{"q":"x"}}]`, "column st.q: table type integer, written type string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := recordFromJSON(t, arrow.NewSchema(tc.fields, nil), tc.rows)
			defer rec.Release()
			_, err := WriteRecords(ctx, mem.New(mem.Config{}), "", sch, nil, []arrow.RecordBatch{rec}, WriteOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}

	t.Run("missing nullable filled with nulls, case-insensitive names", func(t *testing.T) {
		st := mem.New(mem.Config{})
		rec := recordFromJSON(t, arrow.NewSchema([]arrow.Field{{Name: "ID", Type: arrow.PrimitiveTypes.Int64}}, nil), `[{"ID":7}]`)
		defer rec.Release()
		adds, err := WriteRecords(ctx, st, "", sch, nil, []arrow.RecordBatch{rec}, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := scanAll(t, st, "", sch, nil, adds, ScanOptions{})
		diffRows(t, rowSet(t, got), []string{`{"id":7,"name":null,"st":null}`})
	})
}

func TestParquetPhysicalTypes(t *testing.T) {
	sch := mustSchema(t, allTypesSchema)
	asch, _ := ArrowSchema(sch)
	rec := recordFromJSON(t, asch, allTypesRows)
	defer rec.Release()
	st := mem.New(mem.Config{})
	adds, err := WriteRecords(context.Background(), st, "", sch, nil, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := st.Get(context.Background(), adds[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(rc)
	rc.Close()
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Compression(); got.String() != "SNAPPY" {
		t.Errorf("codec %v, want SNAPPY", got)
	}
	want := map[string]string{
		"dec9":  "INT32 Decimal(precision=5, scale=2)",
		"dec18": "INT64 Decimal(precision=18, scale=4)",
		"dec38": "FIXED_LEN_BYTE_ARRAY Decimal(precision=38, scale=10)",
		"ts":    "INT64 Timestamp(isAdjustedToUTC=true, timeUnit=microseconds",
		"ntz":   "INT64 Timestamp(isAdjustedToUTC=false, timeUnit=microseconds",
		"dt":    "INT32 Date",
		"sh":    "INT32 Int(bitWidth=16, isSigned=true)",
	}
	sc := pf.MetaData().Schema
	for i := 0; i < sc.NumColumns(); i++ {
		c := sc.Column(i)
		w, ok := want[c.Path()]
		if !ok {
			continue
		}
		got := c.PhysicalType().String() + " " + c.LogicalType().String()
		if !strings.HasPrefix(got, w) {
			t.Errorf("column %s: %s, want %s...", c.Path(), got, w)
		}
		delete(want, c.Path())
	}
	if len(want) > 0 {
		t.Errorf("columns not found: %v", want)
	}
	_ = schema.NoLogicalType{}
}

func TestRollsFilesAtTargetSize(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	st := mem.New(mem.Config{})
	w, err := NewDataWriter(st, "t", sch, nil, WriteOptions{TargetFileSize: 64 << 10, Now: func() time.Time { return time.UnixMilli(1700000000000) }})
	if err != nil {
		t.Fatal(err)
	}
	var want []arrow.RecordBatch
	for b := 0; b < 20; b++ {
		ib := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		for i := 0; i < 2000; i++ {
			ib.Field(0).(*array.Int64Builder).Append(int64(b*2000 + i))
			ib.Field(1).(*array.StringBuilder).Append(strings.Repeat("x", i%50) + "unique" + time.Duration(b*2000+i).String())
		}
		rec := ib.NewRecordBatch()
		ib.Release()
		if err := w.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	adds, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(adds) < 3 {
		t.Errorf("wrote %d files with a 64 KiB target, want several", len(adds))
	}
	var total int64
	for _, a := range adds {
		if a.ModificationTime != 1700000000000 {
			t.Errorf("modificationTime %d, want the injected clock", a.ModificationTime)
		}
		var s struct{ NumRecords int64 }
		json.Unmarshal([]byte(a.Stats), &s)
		total += s.NumRecords
	}
	if total != 40000 {
		t.Errorf("numRecords sum %d, want 40000", total)
	}
	got, _ := scanAll(t, st, "t", sch, nil, adds, ScanOptions{BatchSize: 1000})
	diffRows(t, rowSet(t, got), rowSet(t, want))
}

func TestWriteManyPartitionsBoundedOpenFiles(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"integer","nullable":true,"metadata":{}},{"name":"at","type":"timestamp","nullable":true,"metadata":{}}]}`)
	// Rows arrive interleaved across 5 partitions, in millisecond timestamps (converted
	// to microseconds on write).
	in := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "p", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, in)
	for i := 0; i < 1000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int32Builder).Append(int32(i % 5))
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1700000000000 + int64(i)))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	st := mem.New(mem.Config{})
	adds, err := WriteRecords(context.Background(), st, "", sch, []string{"p"}, []arrow.RecordBatch{rec.NewSlice(0, 500), rec.NewSlice(500, 1000)}, WriteOptions{MaxOpenFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(adds) <= 5 {
		t.Errorf("%d files with 5 partitions and MaxOpenFiles 2, want more than 5 (files finished early)", len(adds))
	}
	got, _ := scanAll(t, st, "", sch, []string{"p"}, adds, ScanOptions{Filter: expr.Eq("p", 3)})
	rows := rowSet(t, got)
	if len(rows) != 200 {
		t.Fatalf("%d rows in partition 3, want 200", len(rows))
	}
	if want := `{"at":"2023-11-14T22:13:20.003Z","id":3,"p":3}`; rows[0] != want {
		t.Errorf("first row %s, want %s", rows[0], want)
	}
}

func TestWriteChangeFiles(t *testing.T) {
	ctx := context.Background()
	st := mem.New(mem.Config{})
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"string","nullable":true,"metadata":{}}]}`)
	cs := ChangeDataSchema(sch)
	asch, _ := ArrowSchema(cs)
	rec := recordFromJSON(t, asch, `[{"id":1,"p":"a","_change_type":"update_preimage"},{"id":1,"p":"a","_change_type":"update_postimage"}]`)
	defer rec.Release()
	cdcs, err := WriteChangeFiles(ctx, st, "t", sch, []string{"p"}, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cdcs) != 1 || !strings.HasPrefix(cdcs[0].Path, "_change_data/p=a/cdc-00000-") || cdcs[0].DataChange {
		t.Fatalf("cdc actions %+v", cdcs[0])
	}
	adds := []*Add{CDCAsAdd(cdcs[0])}
	got, _ := scanAll(t, st, "t", cs, []string{"p"}, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), []string{`{"_change_type":"update_postimage","id":1,"p":"a"}`, `{"_change_type":"update_preimage","id":1,"p":"a"}`})
	// A table scan of the same file drops the column.
	got, _ = scanAll(t, st, "t", sch, []string{"p"}, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), []string{`{"id":1,"p":"a"}`, `{"id":1,"p":"a"}`})
}

func TestWriteSpillsUnderMemoryBudget(t *testing.T) {
	sch := mustSchema(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}},{"name":"p","type":"integer","nullable":true,"metadata":{}}]}`)
	asch, _ := ArrowSchema(sch)
	tmp := t.TempDir()
	st := mem.New(mem.Config{})
	w, err := NewDataWriter(st, "t", sch, []string{"p"}, WriteOptions{MaxMemory: 256 << 10, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	var all []arrow.RecordBatch
	for b := 0; b < 10; b++ {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		for i := 0; i < 5000; i++ {
			id := b*5000 + i
			rb.Field(0).(*array.Int64Builder).Append(int64(id))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%d-%s", id*7919, strings.Repeat("v", id%64)))
			rb.Field(2).(*array.Int32Builder).Append(int32(id % 8))
		}
		rec := rb.NewRecordBatch()
		rb.Release()
		all = append(all, rec)
		if err := w.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	if w.memBytes > 256<<10 || w.rgBytes > 128<<10 {
		t.Errorf("buffered %d file bytes and %d row-group bytes, budget 256 KiB", w.memBytes, w.rgBytes)
	}
	spilled, _ := os.ReadDir(tmp)
	if len(spilled) == 0 {
		t.Errorf("no file spilled to %s under a 256 KiB budget", tmp)
	}
	adds, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("%d temporary files left after Close", len(left))
	}
	got, _ := scanAll(t, st, "t", sch, []string{"p"}, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), rowSet(t, all))
}
