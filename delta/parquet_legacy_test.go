package delta

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestScanLegacyListAndMapEncodings reads a file in the encodings Spark writes with
// spark.sql.parquet.writeLegacyFormat=true (and Hive/parquet-avro before it): lists as
// `repeated group bag { optional T array }` or two-level `repeated T array`, maps with
// a MAP_KEY_VALUE group named "map".
func TestScanLegacyListAndMapEncodings(t *testing.T) {
	must := func(n schema.Node, err error) schema.Node {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	opt, req, rep := parquet.Repetitions.Optional, parquet.Repetitions.Required, parquet.Repetitions.Repeated
	id := must(schema.NewPrimitiveNode("id", req, parquet.Types.Int64, -1, -1))
	bag := must(schema.NewGroupNode("bag", rep, schema.FieldList{must(schema.NewPrimitiveNode("array", opt, parquet.Types.Int32, -1, -1))}, -1))
	arr := must(schema.NewGroupNodeConverted("arr", opt, schema.FieldList{bag}, schema.ConvertedTypes.List, -1))
	arr2 := must(schema.NewGroupNodeConverted("arr2", opt, schema.FieldList{must(schema.NewPrimitiveNode("array", rep, parquet.Types.Int32, -1, -1))}, schema.ConvertedTypes.List, -1))
	kv := must(schema.NewGroupNodeConverted("map", rep, schema.FieldList{
		must(schema.NewPrimitiveNodeConverted("key", req, parquet.Types.ByteArray, schema.ConvertedTypes.UTF8, 0, 0, 0, -1)),
		must(schema.NewPrimitiveNode("value", opt, parquet.Types.Int32, -1, -1)),
	}, schema.ConvertedTypes.MapKeyValue, -1))
	m := must(schema.NewGroupNodeConverted("m", opt, schema.FieldList{kv}, schema.ConvertedTypes.Map, -1))
	root := must(schema.NewGroupNode("spark_schema", req, schema.FieldList{id, arr, arr2, m}, -1)).(*schema.GroupNode)

	var buf bytes.Buffer
	w := file.NewParquetWriter(&buf, root)
	rg := w.AppendRowGroup()
	next := func() file.ColumnChunkWriter {
		cw, err := rg.NextColumn()
		if err != nil {
			t.Fatal(err)
		}
		return cw
	}
	check := func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Rows: 1: arr [1,null], arr2 [5,6], m {a:1, b:null}; 2: all null; 3: all empty.
	check(next().(*file.Int64ColumnChunkWriter).WriteBatch([]int64{1, 2, 3}, nil, nil))
	check(next().(*file.Int32ColumnChunkWriter).WriteBatch([]int32{1}, []int16{3, 2, 0, 1}, []int16{0, 1, 0, 0}))
	check(next().(*file.Int32ColumnChunkWriter).WriteBatch([]int32{5, 6}, []int16{2, 2, 0, 1}, []int16{0, 1, 0, 0}))
	check(next().(*file.ByteArrayColumnChunkWriter).WriteBatch([]parquet.ByteArray{[]byte("a"), []byte("b")}, []int16{2, 2, 0, 1}, []int16{0, 1, 0, 0}))
	check(next().(*file.Int32ColumnChunkWriter).WriteBatch([]int32{1}, []int16{3, 2, 0, 1}, []int16{0, 1, 0, 0}))
	if err := rg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	st := mem.New(mem.Config{})
	ctx := context.Background()
	if err := st.Put(ctx, "t/legacy.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	sch := mustSchema(t, `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"arr","type":{"type":"array","elementType":"integer","containsNull":true},"nullable":true,"metadata":{}},
 {"name":"arr2","type":{"type":"array","elementType":"integer","containsNull":false},"nullable":true,"metadata":{}},
 {"name":"m","type":{"type":"map","keyType":"string","valueType":"integer","valueContainsNull":true},"nullable":true,"metadata":{}}]}`)
	adds := []*Add{{Path: "legacy.parquet", Size: int64(buf.Len()), PartitionValues: map[string]*string{}}}
	got, _ := scanAll(t, st, "t", sch, nil, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), []string{
		`{"arr":[1,null],"arr2":[5,6],"id":1,"m":[{"key":"a","value":1},{"key":"b","value":null}]}`,
		`{"arr":[],"arr2":[],"id":3,"m":[]}`,
		`{"arr":null,"arr2":null,"id":2,"m":null}`,
	})
}
