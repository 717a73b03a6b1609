package delta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
)

// ChangesReader streams change data feed rows as Arrow records, one file at a time. It
// implements array.RecordReader; a record is valid until the next call to Next.
type ChangesReader struct {
	ctx   context.Context
	table *Table
	plan  *changesPlan
	opts  ChangesOptions
	mem   memory.Allocator
	types map[string]bool // nil: every type

	dataCols []string // data columns returned, schema spelling
	out      *arrow.Schema

	next    int // index into plan.units
	cur     *Scanner
	curUnit *cdfUnit
	rec     arrow.RecordBatch
	err     error
	refs    atomic.Int64

	// consts caches the constant columns (change type, version, timestamp) of the last
	// batch, reused while the unit and the batch length stay the same.
	consts     []arrow.Array
	constsUnit *cdfUnit
	constsN    int
}

var _ array.RecordReader = (*ChangesReader)(nil)

// CommitTxn returns the version of the txn action with the given appId that the commit
// of version v carries (ok false: it carries none), for any version of the range read:
// a writer can record, in the commit that made some changes, what they mean.
func (r *ChangesReader) CommitTxn(v int64, appID string) (int64, bool) {
	txn, ok := r.plan.txns[v][appID]
	return txn, ok
}

func newChangesReader(ctx context.Context, t *Table, plan *changesPlan, opts ChangesOptions) (*ChangesReader, error) {
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultScanBatchSize
	}
	r := &ChangesReader{ctx: ctx, table: t, plan: plan, opts: opts, mem: opts.Allocator}
	r.refs.Store(1)
	if len(opts.Types) > 0 {
		r.types = map[string]bool{}
		for _, ty := range opts.Types {
			r.types[ty] = true
		}
	}
	for _, c := range []string{ChangeTypeColumn, CommitVersionColumn, CommitTimestampColumn} {
		if plan.schema.Field(c) != nil {
			return nil, fmt.Errorf("the table has a column named %s, which the change data feed adds itself", c)
		}
	}
	var fields []*StructField
	if len(opts.Columns) == 0 {
		fields = plan.schema.Fields
	} else {
		for _, c := range opts.Columns {
			switch strings.ToLower(c) {
			case ChangeTypeColumn, CommitVersionColumn, CommitTimestampColumn:
				continue // always returned
			}
			f := plan.schema.Field(c)
			if f == nil {
				return nil, fmt.Errorf("column %s is not in the table schema (version %d)", c, plan.end)
			}
			fields = append(fields, f)
		}
	}
	for _, f := range fields {
		r.dataCols = append(r.dataCols, f.Name)
	}
	af, err := dschema.ArrowFields(&StructType{Fields: fields})
	if err != nil {
		return nil, err
	}
	af = append(af,
		arrow.Field{Name: ChangeTypeColumn, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: CommitVersionColumn, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: CommitTimestampColumn, Type: dschema.TimestampUTC},
	)
	r.out = arrow.NewSchema(af, nil)
	return r, nil
}

// RowsHint is about how many change rows the reader will return at most, from the
// files' stats (a file written without CDC files counts its rows; one with them, every
// change it records, pre-images included): room a reader can make at once. False when
// a file's stats do not say.
func (r *ChangesReader) RowsHint() (int64, bool) {
	var n int64
	for _, u := range r.plan.units {
		for _, f := range u.files {
			c, ok := f.NumRecords()
			if !ok {
				return 0, false
			}
			n += c
		}
	}
	return n, true
}

// Schema is the schema of the returned records: the data columns, then _change_type,
// _commit_version and _commit_timestamp.
func (r *ChangesReader) Schema() *arrow.Schema { return r.out }

// StartVersion is the first version of the resolved range.
func (r *ChangesReader) StartVersion() int64 { return r.plan.start }

// EndVersion is the last version of the resolved range.
func (r *ChangesReader) EndVersion() int64 { return r.plan.end }

// Err is the error that ended the stream, if any.
func (r *ChangesReader) Err() error { return r.err }

// RecordBatch is the current record.
func (r *ChangesReader) RecordBatch() arrow.RecordBatch { return r.rec }

// Record is RecordBatch (array.RecordReader's deprecated name).
func (r *ChangesReader) Record() arrow.RecordBatch { return r.rec }

// Retain adds a reference.
func (r *ChangesReader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last one closes the current file and record.
func (r *ChangesReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.closeUnit()
		if r.rec != nil {
			r.rec.Release()
			r.rec = nil
		}
	}
}

func (r *ChangesReader) closeUnit() {
	arrowx.ReleaseArrays(r.consts)
	r.consts, r.constsUnit = nil, nil
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.curUnit = nil
}

// Next advances to the next non-empty record.
func (r *ChangesReader) Next() bool {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	if r.err != nil {
		return false
	}
	for {
		if r.cur == nil {
			if r.next >= len(r.plan.units) {
				return false
			}
			u := &r.plan.units[r.next]
			r.next++
			if u.changeType != "" && r.types != nil && !r.types[u.changeType] {
				continue
			}
			if err := r.openUnit(u); err != nil {
				r.fail(u, err)
				return false
			}
		}
		if !r.cur.Next() {
			if err := r.cur.Err(); err != nil {
				r.fail(r.curUnit, err)
				return false
			}
			r.closeUnit()
			continue
		}
		rec, err := r.finish(r.cur.RecordBatch())
		if err != nil {
			r.fail(r.curUnit, err)
			return false
		}
		r.rec = rec
		return true
	}
}

func (r *ChangesReader) openUnit(u *cdfUnit) error {
	schema := r.plan.schema
	cols := append([]string(nil), r.dataCols...)
	// A unit's files are decoded in parallel: reading the feed is mostly decoding.
	so := ScanOptions{BatchSize: r.opts.BatchSize, Allocator: r.mem, TableURI: r.opts.TableURI, ParallelFiles: true}
	if u.changeType == "" {
		schema = ChangeDataSchema(schema)
		cols = append(cols, ChangeTypeColumn)
		if r.types != nil {
			vals := make([]any, 0, len(r.types))
			for _, ty := range r.opts.Types {
				vals = append(vals, ty)
			}
			so.Filter = expr.In(ChangeTypeColumn, vals...)
		}
	}
	so.Columns = cols
	if len(so.Columns) == 0 {
		// Scan returns every column when none is named: ask for the first (finish drops
		// it), so only row counts are needed when it is a partition column.
		so.Columns = []string{schema.Fields[0].Name}
	}
	sc, err := Scan(r.ctx, r.table.store, r.table.root, schema, r.plan.partCols, u.files, so)
	if err != nil {
		return err
	}
	r.cur, r.curUnit = sc, u
	return nil
}

// finish appends the change type, version and timestamp columns to a scanned batch.
func (r *ChangesReader) finish(in arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := int(in.NumRows())
	cols := make([]arrow.Array, 0, r.out.NumFields())
	for i := range r.dataCols {
		cols = append(cols, in.Column(i))
	}
	if r.curUnit.changeType == "" {
		c := in.Column(len(r.dataCols))
		if _, ok := c.(*array.String); !ok {
			return nil, fmt.Errorf("%s column has type %s, want string", ChangeTypeColumn, c.DataType())
		}
		cols = append(cols, c)
	}
	consts := r.constColumns(n)
	defer arrowx.ReleaseArrays(consts)
	cols = append(cols, consts...)
	return array.NewRecordBatch(r.out, cols, int64(n)), nil // retains cols
}

// constColumns returns the unit's constant columns for a batch of n rows, as slices the
// caller releases: the change type (unless it comes from the file), the version and the
// timestamp.
func (r *ChangesReader) constColumns(n int) []arrow.Array {
	u := r.curUnit
	if r.constsUnit != u || r.constsN < n {
		// Built once per unit at the largest batch size so far: a unit's files end in
		// shorter batches, which take slices.
		arrowx.ReleaseArrays(r.consts)
		r.consts = nil
		if u.changeType != "" {
			b := array.NewStringBuilder(r.mem)
			b.Reserve(n)
			b.ReserveData(n * len(u.changeType))
			for i := 0; i < n; i++ {
				b.Append(u.changeType)
			}
			r.consts = append(r.consts, b.NewArray())
			b.Release()
		}
		vb := array.NewInt64Builder(r.mem)
		vb.Reserve(n)
		tb := array.NewTimestampBuilder(r.mem, dschema.TimestampUTC)
		tb.Reserve(n)
		for i := 0; i < n; i++ {
			vb.UnsafeAppend(u.version)
			tb.UnsafeAppend(arrow.Timestamp(u.tsMicros))
		}
		r.consts = append(r.consts, vb.NewArray(), tb.NewArray())
		vb.Release()
		tb.Release()
		r.constsUnit, r.constsN = u, n
	}
	out := make([]arrow.Array, len(r.consts))
	for i, c := range r.consts {
		out[i] = array.NewSlice(c, 0, int64(n))
	}
	return out
}

// fail records the error that ends the stream. A data file deleted by VACUUM is reported
// with the earliest version from which the range can still be read.
func (r *ChangesReader) fail(u *cdfUnit, err error) {
	r.closeUnit()
	if u != nil && isNotExist(err) && !errors.Is(err, context.Canceled) {
		from := r.earliestReadable()
		hint := fmt.Sprintf("no version up to %d can be read any more", r.plan.end)
		if from >= 0 {
			hint = fmt.Sprintf("the earliest version from which the feed up to %d can still be read is %d", r.plan.end, from)
		}
		r.err = fmt.Errorf("change data feed of table %s: %w: a data file of version %d was deleted (by VACUUM?): %v; %s",
			r.table.displayRoot(), ErrVersionCleaned, u.version, err, hint)
		return
	}
	r.err = fmt.Errorf("change data feed of table %s at version %d: %w", r.table.displayRoot(), u.version, err)
}

// earliestReadable walks the planned versions from the end back and returns the first
// version after the newest one with a missing file (-1 when the last version has one).
func (r *ChangesReader) earliestReadable() int64 {
	from := r.plan.start
	for i := len(r.plan.units) - 1; i >= 0; i-- {
		u := &r.plan.units[i]
		for _, f := range u.files {
			rel, ok := r.table.relPath(f.Path)
			if !ok {
				continue
			}
			if _, err := r.table.store.Stat(r.ctx, r.table.key(rel)); isNotExist(err) {
				if u.version >= r.plan.end {
					return -1
				}
				return u.version + 1
			}
		}
	}
	return from
}
