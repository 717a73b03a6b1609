package delta

import (
	"context"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// BenchmarkScan reads back the 1M rows of the append benchmark (one file) through Scan,
// with and without a filter that keeps 1% of the rows. The "strings" case reads only the
// string column (internal/parquet's BenchmarkColumnsStrings compares its decoder with
// pqarrow's).
func BenchmarkScan(b *testing.B) {
	ctx := context.Background()
	sch, recs := benchRecords(b)
	st, err := fs.New(fs.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	adds, err := WriteRecords(ctx, st, "t", sch, nil, recs, WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, a := range adds {
		size += a.Size
	}
	for _, bc := range []struct {
		name    string
		filter  expr.Predicate
		columns []string
	}{
		{"all", nil, nil},
		{"filtered", expr.Lt("score", 1.0), nil},
		{"strings", nil, []string{"customer"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var rows int64
			for n := 0; n < b.N; n++ {
				sc, err := Scan(ctx, st, "t", sch, nil, adds, ScanOptions{Filter: bc.filter, Columns: bc.columns})
				if err != nil {
					b.Fatal(err)
				}
				for sc.Next() {
					rows += sc.RecordBatch().NumRows()
				}
				if err := sc.Err(); err != nil {
					b.Fatal(err)
				}
				sc.Release()
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(size)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(float64(rows)/float64(b.N), "rows_out/op")
		})
	}
}
