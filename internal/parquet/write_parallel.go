package parquet

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// encodingBatches counts the batches being encoded by FlatWriters across the process:
// a writer spreads a batch's columns over goroutines only while fewer batches than cores
// are being encoded, so that a load written on every core at once (the ingest) stays
// sequential per file, and a single file (a MERGE's rewrite) uses the idle cores.
var encodingBatches atomic.Int32

// minParallelRows is the smallest batch whose columns are worth a goroutine each.
const minParallelRows = 4096

// writeColumns encodes each column of rec into its column chunk of the open row group.
func (fw *FlatWriter) writeColumns(rec arrow.RecordBatch) error {
	// (columns written at once may share arrays: one array in two columns)
	arrowx.SettleNullCounts(rec.Columns())
	return fw.forColumns(rec.NumRows(), func(i int) error { return fw.writeColumn(i, rec.Column(i)) })
}

// forColumns runs fn for every column, concurrently when cores are idle and the work is
// worth it (rows: the batch's rows; 0 for a row group's close). Every column has its own
// encoder, page buffer and scratch (flatColumn), so the bytes do not depend on the order
// the columns finish in.
func (fw *FlatWriter) forColumns(rows int64, fn func(i int) error) error {
	busy := int(encodingBatches.Add(1))
	defer encodingBatches.Add(-1)
	n := len(fw.cols)
	workers := min(runtime.GOMAXPROCS(0)-busy+1, n)
	if workers < 2 || (rows > 0 && rows < minParallelRows) {
		for i := range n {
			if err := fn(i); err != nil {
				return fmt.Errorf("column %s: %w", fw.names[i], err)
			}
		}
		return nil
	}
	// Columns are started in order, workers at a time; each goroutine is waited for
	// before returning.
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error {
			if err := fn(i); err != nil {
				return fmt.Errorf("column %s: %w", fw.names[i], err)
			}
			return nil
		})
	}
	return g.Wait()
}
