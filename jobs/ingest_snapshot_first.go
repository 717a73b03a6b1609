package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// loadFirstSnapshot loads a snapshot into a table with no rows: every row inserts, so the
// files are appended as an append ingest does (on every core, streamed: a MERGE would
// hold every row), and the keyed run (kr) checks each key once: its batch is the rows'
// keys and places, held in a key index while they fit (a key twice is an error at once),
// else set aside by key hash range and checked range by range before the commit. The
// rows delete_when marks are left out.
func (s *Ingest) loadFirstSnapshot(ctx context.Context, env *Env, kr *keyed.Run, decl *Table, tbl *delta.Table, snap *delta.Snapshot, files []*sourceFile, loadTime time.Time, res *Result) error {
	l, err := s.newFirstSnapshot(ctx, snap, files)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			l.writer.abort()
		}
	}()
	batch := kr.NewBatch(l.keys, keyed.BatchOptions{Keys: []int{0}, EncodedKey: true})
	var bad []*badRecord
	for fi, f := range files {
		b, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{columns: l.extra, lines: true}, func(rec arrow.RecordBatch) error {
			return l.record(ctx, batch, fi, f, rec)
		})
		bad = append(bad, b...)
		if err != nil {
			return err
		}
	}
	if err := batch.Finish(); err != nil {
		return err
	}
	noteHeld("first snapshot", batch)
	passes, err := l.checkDuplicates(ctx, batch)
	if err != nil {
		return err
	}
	if batch.Spilled() {
		res.Notes = append(res.Notes, fmt.Sprintf("%d keys over the memory budget (%s): checked in %d passes over spill files", batch.Rows(), ByteSize(env.budget(s.cfg.MemoryBudget)), passes))
	}
	adds, err := l.writer.close()
	closed = true
	if err != nil {
		return err
	}
	if err := s.quarantine(ctx, env, files, bad, loadTime, res); err != nil {
		return err
	}
	asOf, err := s.snapshotTime(snap, files, 0, false)
	if err != nil {
		return err
	}
	if _, err := commitAppend(ctx, env, decl, tbl, snap, files, adds, l.written, asOf, res); err != nil {
		return err
	}
	res.RowsWritten += l.written
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d inserted into an empty table", strings.Join(fileNames(files), ", "), l.written))
	return nil
}

// firstSnapshot is a first snapshot load under way: its writer, the rows written so far
// and its keys.
type firstSnapshot struct {
	cfg         *IngestConfig
	files       []*sourceFile
	writer      *parallelWriter
	tableSchema *arrow.Schema
	pred        expr.Predicate // delete_when, nil without it
	extra       []string       // the file columns delete_when reads
	matcher     *expr.Matcher  // pred over the decoded records, made from the first
	written     int64
	keys        *firstKeys
	block       keyindex.Block // the keys of the record at hand
	form        *arrow.Schema  // the batch form: key (encoded), file, line, key columns
}

// newFirstSnapshot starts a first snapshot load: the writer of the files into snap's
// table and the delete_when predicate.
func (s *Ingest) newFirstSnapshot(ctx context.Context, snap *delta.Snapshot, files []*sourceFile) (*firstSnapshot, error) {
	var sourceBytes int64
	for _, f := range files {
		sourceBytes += f.Size
	}
	opts := delta.WriteOptions{MaxMemory: ingestWriterMemory, StreamFiles: len(snap.PartitionColumns()) == 0}
	writer, err := newParallelWriter(ctx, snap, ingestLanes(sourceBytes), opts)
	if err != nil {
		return nil, err
	}
	tableSchema, err := delta.ArrowSchema(snap.Schema())
	if err != nil {
		writer.abort()
		return nil, err
	}
	fields := []arrow.Field{
		{Name: "_orchestrator_key", Type: arrow.BinaryTypes.Binary},
		{Name: runFileColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: lineColumn, Type: arrow.PrimitiveTypes.Int64},
	}
	for _, c := range columnsByName(tableSchema, s.cfg.Keys) {
		f := tableSchema.Field(c)
		f.Nullable = true // (null in the keys handed over)
		fields = append(fields, f)
	}
	l := &firstSnapshot{cfg: s.cfg, files: files, writer: writer, tableSchema: tableSchema, form: arrow.NewSchema(fields, nil)}
	l.keys = &firstKeys{l: l, seen: &snapSide{}, index: keyindex.New(1 << 16)}
	if s.cfg.DeleteWhen != "" {
		if l.pred, err = expr.Parse(s.cfg.DeleteWhen); err != nil {
			writer.abort()
			return nil, fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		l.extra = expr.Columns(l.pred)
	}
	return l, nil
}

// record loads a decoded record of file f (files[fi]): its keys go to the batch and its
// rows that delete_when does not mark are written.
func (l *firstSnapshot) record(ctx context.Context, batch *keyed.Batch, fi int, f *sourceFile, rec arrow.RecordBatch) error {
	marks, err := l.deleteMarks(f, rec)
	if err != nil {
		return err
	}
	keyCols := columnsByName(rec.Schema(), l.cfg.Keys)
	lines := rec.Column(columnsByName(rec.Schema(), []string{lineColumn})[0]).(*array.Int64)
	l.block.Reset()
	if err := keyed.AppendKeys(&l.block, rec, keyCols, 0, int(rec.NumRows())); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	n := int(rec.NumRows())
	kb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	kb.ReserveData(len(l.block.Buf))
	l.block.Each(func(_ int, key []byte) { kb.Append(key) })
	fis := make([]int64, n)
	for i := range fis {
		fis[i] = int64(fi)
	}
	cols := []arrow.Array{kb.NewArray(), keyed.Int64s(fis)}
	kb.Release()
	lines.Retain()
	cols = append(cols, lines)
	for _, c := range keyCols {
		rec.Column(c).Retain()
		cols = append(cols, rec.Column(c))
	}
	form := array.NewRecordBatch(l.form, cols, int64(n))
	arrowx.ReleaseArrays(cols)
	err = batch.Add(ctx, form)
	form.Release()
	if err != nil {
		return err
	}
	var keep []int32
	for i := range n {
		if marks == nil || !marks[i] {
			keep = append(keep, int32(i))
		}
	}
	return l.write(ctx, f, rec, keep)
}

// deleteMarks says which of rec's rows delete_when marks (nil without delete_when).
func (l *firstSnapshot) deleteMarks(f *sourceFile, rec arrow.RecordBatch) ([]bool, error) {
	if l.matcher == nil && l.pred != nil {
		var err error
		if l.matcher, err = expr.NewMatcher(l.pred, schemaOfRecord(rec)); err != nil {
			return nil, fmt.Errorf("delete_when %q (a predicate over the source row): %w", l.cfg.DeleteWhen, err)
		}
	}
	if l.matcher == nil {
		return nil, nil
	}
	marks, err := l.matcher.Match(rec)
	if err != nil {
		return nil, fmt.Errorf("%s: delete_when: %w", f.Name, err)
	}
	return marks, nil
}

// write writes rec's rows at keep (in the table's columns) from file f.
func (l *firstSnapshot) write(ctx context.Context, f *sourceFile, rec arrow.RecordBatch, keep []int32) error {
	out := projectRecord(rec, l.tableSchema)
	defer out.Release()
	if len(keep) < int(rec.NumRows()) {
		g, err := arrowx.GatherRows(ctx, out, keep)
		if err != nil {
			return err
		}
		defer g.Release()
		out = g
	}
	l.written += out.NumRows()
	return l.writer.write(out, f.Name)
}

// projectRecord is rec's columns of schema (found by name), in schema's order.
func projectRecord(rec arrow.RecordBatch, schema *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = rec.Column(columnsByName(rec.Schema(), []string{f.Name})[0])
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows())
}

// firstKeys checks the keys of a first snapshot: in a key index with each key's first
// place (the batch's live pass: a key twice is an error at once) while it fits, set
// aside by range then.
type firstKeys struct {
	l     *firstSnapshot
	index *keyindex.Index
	seen  *snapSide
	block keyindex.Block
}

var _ keyed.Holder = (*firstKeys)(nil)

// check offers the keys of a batch-form record to index and seen: a key seen before is
// an error naming both places (the first returned; spilled: every one offered).
func (k *firstKeys) check(rec arrow.RecordBatch, index *keyindex.Index, seen *snapSide, clash func(err error, file int32, line int64) error) error {
	keys := rec.Column(0).(*array.Binary)
	files, lines := rec.Column(1).(*array.Int64), rec.Column(2).(*array.Int64)
	k.block.Reset()
	for i := range keys.Len() {
		k.block.Buf = append(k.block.Buf, keys.Value(i)...)
		k.block.End()
	}
	index.AddBlock(&k.block)
	seen.grow(index.Len())
	for i, id := range k.block.IDs {
		r := snapRow{file: int32(files.Value(i)), line: lines.Value(i)}
		if _, dup := seen.offer(id, r); dup {
			err := seen.clash(id, r, k.l.files, keyText(rec, allColumns(int(rec.NumCols()))[3:], i), nil)
			if err := clash(err, r.file, r.line); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *firstKeys) Add(_ context.Context, rec arrow.RecordBatch) error {
	return k.check(rec, k.index, k.seen, func(err error, _ int32, _ int64) error { return err })
}

// Held is what the check holds: its key index as allocated (its keys' bytes with it) and
// each key's first place.
func (k *firstKeys) Held() int64 {
	return k.index.Bytes() + int64(cap(k.seen.keys))*int64(unsafe.Sizeof(snapKey{}))
}

// HandOver sets aside the keys checked so far with their places (no key columns: a
// duplicate is named by its later row), in the order they came.
func (k *firstKeys) HandOver(ctx context.Context, b *keyed.Batch) error {
	defer func() { k.index, k.seen = nil, nil }()
	mem := memory.DefaultAllocator
	for lo := 0; lo < k.index.Len(); lo += 1 << 14 {
		hi := min(lo+1<<14, k.index.Len())
		kb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		files, lines := make([]int64, 0, hi-lo), make([]int64, 0, hi-lo)
		for id := lo; id < hi; id++ {
			kb.Append(k.index.Key(int32(id)))
			files, lines = append(files, int64(k.seen.keys[id].file)), append(lines, int64(k.seen.keys[id].line))
		}
		cols := []arrow.Array{kb.NewArray(), keyed.Int64s(files), keyed.Int64s(lines)}
		kb.Release()
		for _, f := range k.l.form.Fields()[3:] {
			cols = append(cols, array.MakeArrayOfNull(mem, f.Type, hi-lo))
		}
		rec := array.NewRecordBatch(k.l.form, cols, int64(hi-lo))
		arrowx.ReleaseArrays(cols)
		err := b.Spill(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// checkDuplicates checks the keys set aside, range after range: every duplicate is
// found and the one of the earliest row (file, line) is named, as a check in memory
// names it. (In memory the keys were checked as they came.) It returns the passes.
func (l *firstSnapshot) checkDuplicates(ctx context.Context, batch *keyed.Batch) (int, error) {
	var first error
	var firstAt [2]int64
	passes, err := batch.Passes(ctx, 0, nil, func(bb, br, _, _ int64) int64 { return bb + br*snapKeyCost }, func(ctx context.Context, p *keyed.Pass) error {
		if p.Live != nil {
			return nil
		}
		index, seen := keyindex.New(1<<10), &snapSide{}
		return p.EachBatch(ctx, func(_ context.Context, rec arrow.RecordBatch) error {
			return l.keys.check(rec, index, seen, func(err error, file int32, line int64) error {
				if at := [2]int64{int64(file), line}; first == nil || slices.Compare(at[:], firstAt[:]) < 0 {
					first, firstAt = err, at
				}
				return nil
			})
		})
	})
	if err != nil {
		return 0, err
	}
	return passes, first
}
