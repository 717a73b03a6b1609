package delta

import (
	"context"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// BenchmarkChanges reads the 1M rows of the append benchmark back as a change feed (one
// insert version) and, side by side, as a plain snapshot scan of the same file: the
// issue's target is a feed read at least 0.8× as fast as the scan.
//
//	go test ./delta -run '^$' -bench Changes -benchtime 5x
func BenchmarkChanges(b *testing.B) {
	ctx := context.Background()
	sch, recs := benchRecords(b)
	st, err := fs.New(fs.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := Create(ctx, st, "t", CreateOptions{Schema: sch, Properties: map[string]string{PropEnableChangeDataFeed: "true"}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	adds, err := WriteRecords(ctx, st, "t", sch, nil, recs, WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	tx := tbl.NewTransaction(snap, TxOptions{Operation: "WRITE"})
	tx.AddFiles(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	start := int64(0)
	b.Run("changes", func(b *testing.B) {
		var rows int64
		for n := 0; n < b.N; n++ {
			r, err := tbl.Changes(ctx, ChangesOptions{StartVersion: &start})
			if err != nil {
				b.Fatal(err)
			}
			for r.Next() {
				rows += r.RecordBatch().NumRows()
			}
			if err := r.Err(); err != nil {
				b.Fatal(err)
			}
			r.Release()
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("scan", func(b *testing.B) {
		var rows int64
		for n := 0; n < b.N; n++ {
			s, _ := tbl.Snapshot(ctx)
			sc, err := s.Scan(ctx, ScanOptions{})
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
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	})
}
