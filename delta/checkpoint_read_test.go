package delta

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Checkpoints written with delta.checkpoint.writeStatsAsJson=false carry only
// add.stats_parsed (and partitionValues_parsed); a reader must still see the stats.
// Columns a writer left out (remove, txn, tags) read as null.
func TestCheckpointWithOnlyStatsParsed(t *testing.T) {
	statsType := arrow.StructOf(
		arrow.Field{Name: "numRecords", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "minValues", Type: arrow.StructOf(arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true},
	)
	addType := arrow.StructOf(
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "partitionValues", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String), Nullable: true},
		arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "modificationTime", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "dataChange", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "stats_parsed", Type: statsType, Nullable: true},
		arrow.Field{Name: "partitionValues_parsed", Type: arrow.StructOf(arrow.Field{Name: "p", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
	)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "add", Type: addType, Nullable: true},
		{Name: "metaData", Type: cpMetadataType, Nullable: true},
		{Name: "protocol", Type: cpProtocolType, Nullable: true},
	}, nil)
	mem := memory.NewGoAllocator()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	addB := b.Field(0).(*array.StructBuilder)
	mdB := b.Field(1).(*array.StructBuilder)
	protoB := b.Field(2).(*array.StructBuilder)

	// Row 0: protocol.
	addB.AppendNull()
	mdB.AppendNull()
	protoB.Append(true)
	protoB.FieldBuilder(0).(*array.Int32Builder).Append(1)
	protoB.FieldBuilder(1).(*array.Int32Builder).Append(2)
	protoB.FieldBuilder(2).AppendNull()
	protoB.FieldBuilder(3).AppendNull()
	// Row 1: metaData.
	addB.AppendNull()
	protoB.AppendNull()
	mdB.Append(true)
	mdB.FieldBuilder(0).(*array.StringBuilder).Append("id-1")
	mdB.FieldBuilder(1).AppendNull()
	mdB.FieldBuilder(2).AppendNull()
	fb := mdB.FieldBuilder(3).(*array.StructBuilder)
	fb.Append(true)
	fb.FieldBuilder(0).(*array.StringBuilder).Append("parquet")
	fb.FieldBuilder(1).AppendNull()
	mdB.FieldBuilder(4).(*array.StringBuilder).Append(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"integer","nullable":true,"metadata":{}}]}`)
	appendStrList(mdB.FieldBuilder(5).(*array.ListBuilder), []string{"p"}, true)
	appendStrMap(mdB.FieldBuilder(6).(*array.MapBuilder), map[string]string{"k": "v"}, true)
	mdB.FieldBuilder(7).AppendNull()
	// Rows 2-3: adds with stats_parsed only.
	for i, path := range []string{"p=1/a.parquet", "p=2/b.parquet"} {
		mdB.AppendNull()
		protoB.AppendNull()
		addB.Append(true)
		addB.FieldBuilder(0).(*array.StringBuilder).Append(path)
		one := "1"
		appendPtrMap(addB.FieldBuilder(1).(*array.MapBuilder), map[string]*string{"p": &one})
		addB.FieldBuilder(2).(*array.Int64Builder).Append(100)
		addB.FieldBuilder(3).(*array.Int64Builder).Append(1)
		addB.FieldBuilder(4).(*array.BooleanBuilder).Append(true)
		sb := addB.FieldBuilder(5).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int64Builder).Append(int64(10 * (i + 1)))
		mb := sb.FieldBuilder(1).(*array.StructBuilder)
		mb.Append(true)
		mb.FieldBuilder(0).(*array.Int64Builder).Append(int64(i))
		pb := addB.FieldBuilder(6).(*array.StructBuilder)
		pb.Append(true)
		pb.FieldBuilder(0).(*array.Int32Builder).Append(1)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(schema, &buf, nil, pqarrow.NewArrowWriterProperties())
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}

	acts, err := decodeCheckpointParquet(context.Background(), buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	st := newTableState()
	for i := range acts {
		st.apply(&acts[i])
	}
	if st.protocol == nil || st.protocol.MinWriterVersion != 2 || st.protocol.WriterFeatures != nil {
		t.Errorf("protocol = %+v", st.protocol)
	}
	if st.metadata == nil || st.metadata.ID != "id-1" || st.metadata.PartitionColumns[0] != "p" || st.metadata.Configuration["k"] != "v" || st.metadata.Format.Options == nil {
		t.Errorf("metadata = %+v", st.metadata)
	}
	s := &Snapshot{state: st}
	if n, ok := s.NumRecords(); !ok || n != 30 {
		t.Errorf("records from stats_parsed = %d %v, want 30", n, ok)
	}
	if got := s.Files()[1].Stats; got != `{"minValues":{"id":1},"numRecords":20}` {
		t.Errorf("stats rebuilt from stats_parsed = %s", got)
	}
	if pv := s.Files()[0].PartitionValues["p"]; pv == nil || *pv != "1" {
		t.Errorf("partitionValues = %v", s.Files()[0].PartitionValues)
	}
}
