package delta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// rewriter streams the new data files and change data files of one DML commit (DELETE,
// UPDATE, MERGE). It holds at most the writers' buffers, never the table.
type rewriter struct {
	snap    *Snapshot
	mem     memory.Allocator
	data    *DataWriter
	cdc     *DataWriter   // nil when the change feed is off
	cdcSch  *arrow.Schema // Arrow form of ChangeDataSchema(table schema)
	tblSch  *arrow.Schema // Arrow form of the table schema
	cdcRows int64
	// carry, when not nil, has the data rows carry their row ids (two trailing columns;
	// DELETE and UPDATE).
	carry *rowCarry

	// Data rows are encoded on a goroutine of their own (started by the first
	// writeData), a record behind the caller, which goes on gathering the next rows;
	// the first error it meets fails the writes after it, and finish.
	dataQ    chan arrow.RecordBatch
	dataDone chan error
	dataErr  atomic.Pointer[error]
}

func newRewriter(snap *Snapshot) (*rewriter, error) { return newCarryingRewriter(snap, nil) }

// newCarryingRewriter is newRewriter whose data rows carry their row ids when rc is not
// nil: its data files get the materialized row tracking columns.
func newCarryingRewriter(snap *Snapshot, rc *rowCarry) (*rewriter, error) {
	t := snap.Table()
	w := &rewriter{snap: snap, mem: memory.DefaultAllocator, carry: rc}
	dataSchema := snap.Schema()
	if rc != nil {
		dataSchema = rc.ext
	}
	var err error
	if w.tblSch, err = ArrowSchema(snap.Schema()); err != nil {
		return nil, err
	}
	// An unpartitioned table's rewritten files stream to the store as they are written,
	// so a rewrite holds a row group, not a whole file (partitioned: many files open at
	// once, each would hold an upload).
	stream := len(snap.PartitionColumns()) == 0
	if w.data, err = snap.newDataWriter(dataSchema, WriteOptions{Now: t.opts.Now, StreamFiles: stream}); err != nil {
		return nil, err
	}
	if snap.ChangeDataFeedEnabled() {
		if snap.Schema().Field(ChangeTypeColumn) != nil {
			w.data.Abort()
			return nil, fmt.Errorf("table schema has a %s column, which the change data feed reserves", ChangeTypeColumn)
		}
		cs := ChangeDataSchema(snap.Schema())
		if w.cdcSch, err = ArrowSchema(cs); err != nil {
			w.data.Abort()
			return nil, err
		}
		w.cdc, err = NewDataWriter(t.Store(), t.Root(), cs, snap.PartitionColumns(),
			WriteOptions{Dir: ChangeDataDir, FilePrefix: "cdc", NoColumnStats: true, Now: t.opts.Now})
		if err != nil {
			w.data.Abort()
			return nil, err
		}
	}
	return w, nil
}

// cdfOn says whether change rows are recorded.
func (w *rewriter) cdfOn() bool { return w.cdc != nil }

// writeData writes rows (in the table's Arrow schema) to new data files: it queues
// them for the data writer's goroutine (rec is retained until written).
func (w *rewriter) writeData(ctx context.Context, rec arrow.RecordBatch) error {
	if rec == nil || rec.NumRows() == 0 {
		return nil
	}
	if err := w.dataErr.Load(); err != nil {
		return *err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.dataQ == nil {
		w.dataQ, w.dataDone = make(chan arrow.RecordBatch, 1), make(chan error, 1)
		// The writes outlive the ctx of the call that starts them (a MERGE's file):
		// finish or abort ends them.
		wctx := context.WithoutCancel(ctx)
		go func() {
			var err error
			for r := range w.dataQ {
				if err == nil {
					if err = w.data.Write(wctx, r); err != nil {
						w.dataErr.Store(&err)
					}
				}
				r.Release()
			}
			w.dataDone <- err
		}()
	}
	// (the writers of data and of change rows, each on a goroutine of its own, may be
	// given the same arrays)
	arrowx.SettleNullCounts(rec.Columns())
	rec.Retain()
	w.dataQ <- rec
	return nil
}

// stopData waits for the queued data rows to be written and returns the first error.
func (w *rewriter) stopData() error {
	if w.dataQ == nil {
		return nil
	}
	close(w.dataQ)
	err := <-w.dataDone
	w.dataQ = nil
	return err
}

// writeChanges records rows (in the table's Arrow schema) as change rows of type typ; a
// no-op when the change feed is off.
func (w *rewriter) writeChanges(ctx context.Context, rec arrow.RecordBatch, typ string) error {
	if w.cdc == nil || rec == nil || rec.NumRows() == 0 {
		return nil
	}
	rec = w.carry.dataColumns(rec)
	defer rec.Release()
	if !rec.Schema().Equal(w.tblSch) {
		conf, err := dschema.Conform(w.mem, rec, w.snap.Schema(), w.tblSch)
		if err != nil {
			return fmt.Errorf("change rows: %w", err)
		}
		defer conf.Release()
		rec = conf
	}
	n := int(rec.NumRows())
	b := array.NewStringBuilder(w.mem)
	b.Reserve(n)
	for i := 0; i < n; i++ {
		b.Append(typ)
	}
	ct := b.NewArray()
	b.Release()
	defer ct.Release()
	cols := make([]arrow.Array, 0, rec.NumCols()+1)
	cols = append(cols, rec.Columns()...)
	cols = append(cols, ct)
	out := array.NewRecordBatch(w.cdcSch, cols, int64(n))
	defer out.Release()
	w.cdcRows += int64(n)
	return w.cdc.Write(ctx, out)
}

// finish closes the writers and returns the adds and cdc actions. The data files and
// the change files are finished (their last row groups encoded, then uploaded) at once.
func (w *rewriter) finish(ctx context.Context) ([]*Add, []*CDC, error) {
	if err := w.stopData(); err != nil {
		w.abort()
		return nil, nil, err
	}
	if w.cdc == nil {
		adds, err := w.data.Close(ctx)
		return adds, nil, err
	}
	var adds, cas []*Add
	var cdcErr error
	var wg sync.WaitGroup
	wg.Go(func() { cas, cdcErr = w.cdc.Close(ctx) })
	adds, err := w.data.Close(ctx)
	wg.Wait()
	if err = errors.Join(err, cdcErr); err != nil {
		return nil, nil, err
	}
	cdcs := make([]*CDC, len(cas))
	for i, a := range cas {
		cdcs[i] = &CDC{Path: a.Path, PartitionValues: a.PartitionValues, Size: a.Size}
	}
	return adds, cdcs, nil
}

// abort drops whatever the writers buffered (files already uploaded stay as orphans for
// VACUUM; nothing references them).
func (w *rewriter) abort() {
	w.stopData()
	w.data.Abort()
	if w.cdc != nil {
		w.cdc.Abort()
	}
}

// scanFile reads one live file whole, in the table's Arrow schema, calling fn per record
// (valid only during the call).
func scanFile(ctx context.Context, snap *Snapshot, a *Add, fn func(rec arrow.RecordBatch) error) error {
	t := snap.Table()
	sc, err := Scan(ctx, t.Store(), t.Root(), snap.Schema(), snap.PartitionColumns(), []*Add{a}, ScanOptions{})
	if err != nil {
		return err
	}
	defer sc.Release()
	for sc.Next() {
		if err := fn(sc.RecordBatch()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", a.Path, err)
	}
	return nil
}

// predicatePartitions turns a predicate into the PartitionPredicate a transaction
// declares it read: a file's partition values can satisfy it (data columns are unknown
// and so always may). nil means every partition.
func predicatePartitions(bp *expr.Bound, partitionColumns []string) PartitionPredicate {
	isPart := map[string]bool{}
	for _, c := range partitionColumns {
		isPart[strings.ToLower(c)] = true
	}
	return func(pv map[string]*string) bool {
		if bp == nil {
			return true
		}
		ok, err := bp.MayMatchFile(fileFacts(&Add{PartitionValues: pv}, isPart))
		return err != nil || ok
	}
}

// onlyPartitionColumns says whether every column the predicate reads is a partition
// column (the predicate then decides whole files from the log alone).
func onlyPartitionColumns(bp *expr.Bound, partitionColumns []string) bool {
	for _, c := range bp.Columns() {
		found := false
		for _, p := range partitionColumns {
			if strings.EqualFold(c, p) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// indexRange returns 0..n-1 as int32 row indices.
func indexRange(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// takeOrAll gathers rows of rec; when rows is every row in order, rec itself is retained
// and returned.
func takeOrAll(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	if len(rows) == int(rec.NumRows()) {
		rec.Retain()
		return rec, nil
	}
	return arrowx.Take(ctx, mem, rec, rows)
}
