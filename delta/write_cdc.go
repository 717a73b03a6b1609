package delta

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// ChangeTypeColumn is the change data feed column of _change_data files ("insert",
// "delete", "update_preimage", "update_postimage"). A table scan never returns it, even
// when a data file carries it.
const ChangeTypeColumn = "_change_type"

// ChangeDataDir is the directory of change data files under the table root.
const ChangeDataDir = "_change_data"

// ChangeDataSchema is the schema of change data files: the table's columns plus
// _change_type (string, not null).
func ChangeDataSchema(schema *StructType) *StructType {
	out := &StructType{Fields: append([]*StructField(nil), schema.Fields...)}
	out.Fields = append(out.Fields, &StructField{Name: ChangeTypeColumn, Type: &PrimitiveType{Name: TypeString}, Metadata: map[string]any{}})
	return out
}

// WriteChangeFiles writes change rows (the table's columns plus _change_type) as
// _change_data files, partitioned like the table, and returns their cdc actions
// (dataChange false). opts.Dir and opts.FilePrefix are set here.
func WriteChangeFiles(ctx context.Context, store objectstore.Store, root string, schema *StructType, partitionColumns []string, recs []arrow.RecordBatch, opts WriteOptions) ([]*CDC, error) {
	if schema.Field(ChangeTypeColumn) != nil {
		return nil, fmt.Errorf("write change data: table schema already has a %s column", ChangeTypeColumn)
	}
	opts.Dir, opts.FilePrefix, opts.NoColumnStats = ChangeDataDir, "cdc", true
	adds, err := WriteRecords(ctx, store, root, ChangeDataSchema(schema), partitionColumns, recs, opts)
	if err != nil {
		return nil, fmt.Errorf("write change data: %w", err)
	}
	out := make([]*CDC, len(adds))
	for i, a := range adds {
		out[i] = &CDC{Path: a.Path, PartitionValues: a.PartitionValues, Size: a.Size, DataChange: false}
	}
	return out, nil
}

// CDCAsAdd views a cdc action as an add so that Scan can read change files: scan them
// with ChangeDataSchema(schema) to get _change_type with the rows.
func CDCAsAdd(c *CDC) *Add {
	return &Add{Path: c.Path, PartitionValues: c.PartitionValues, Size: c.Size}
}
