package delta

import (
	"context"
	"testing"
)

// BenchmarkSchemaHistory10000Commits lists the schema changes of the 10,000-commit table
// of BenchmarkSnapshotLoad10000Commits on local disk: every commit is read (the table
// page's Schema tab and table schema --history pay this; the change feed page reads
// only its range's commits).
func BenchmarkSchemaHistory10000Commits(b *testing.B) {
	benchLogOnce.Do(func() { benchLog, benchLogErr = buildBenchLog() })
	if benchLogErr != nil {
		b.Fatal(benchLogErr)
	}
	st := copyToDir(b, benchLog, b.TempDir())
	defer st.Close()
	ctx := context.Background()
	tbl, err := Open(ctx, st, "", Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hist, err := tbl.SchemaHistory(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(hist) != 1 || hist[0].Version != 0 {
			b.Fatalf("schema history: %+v", hist)
		}
	}
}
