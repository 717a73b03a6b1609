package delta

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// TestWriteScanS3 writes partitioned files of every type to the test MinIO and reads them
// back through ranged reads (GetRange per column chunk), with a pruning filter. It runs
// under scripts/test.sh, which starts MinIO; elsewhere it skips.
func TestWriteScanS3(t *testing.T) {
	st := testenv.S3Store(t)
	ctx := context.Background()
	sch := mustSchema(t, allTypesSchema)
	asch, _ := ArrowSchema(sch)
	rec := recordFromJSON(t, asch, allTypesRows)
	defer rec.Release()
	parts := []string{"p_str", "p_date", "p_int"}
	adds, err := WriteRecords(ctx, st, "tbl", sch, parts, []arrow.RecordBatch{rec}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ForceRangedReads()()
	got, _ := scanAll(t, st, "tbl", sch, parts, adds, ScanOptions{})
	diffRows(t, rowSet(t, got), rowSet(t, []arrow.RecordBatch{rec}))

	got, stats := scanAll(t, st, "tbl", sch, parts, adds, ScanOptions{Filter: expr.Eq("p_str", "US")})
	if stats.FilesRead != 1 || len(rowSet(t, got)) != 2 {
		t.Errorf("filtered scan read %d files and %d rows, want 1 and 2", stats.FilesRead, len(rowSet(t, got)))
	}
}
