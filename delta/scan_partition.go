package delta

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// partitionColumn builds the constant column of n rows holding a file's partition value
// for field f (Arrow type at).
func partitionColumn(mem memory.Allocator, f *StructField, at arrow.DataType, a *Add, n int) (arrow.Array, error) {
	v, err := expr.ParsePartitionValue(f.Type, partitionValue(a, f.Name, physicalName(f)))
	if err != nil {
		return nil, fmt.Errorf("partition column %s: %w", f.Name, err)
	}
	if v.IsNull() {
		return array.MakeArrayOfNull(mem, at, n), nil
	}
	b := array.NewBuilder(mem, at)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		if err := expr.AppendValue(b, v); err != nil {
			return nil, fmt.Errorf("partition column %s: %w", f.Name, err)
		}
	}
	return b.NewArray(), nil
}
