package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Upsert mode (snapshot mode is ingest_snapshot.go). A run decodes its new files first,
// each row with its line and whether delete_when marks it a delete, and checks them
// before anything is written:
//   - without sequence_by, a key twice in one file is an error naming the file, both
//     lines and the key;
//   - with sequence_by, a run's rows of one key are folded: the last by sequence wins, a
//     delete wins a tie, exact duplicates are dropped, and two different rows at one
//     sequence are an error naming the key, the sequence and both places.
//
// Without sequence_by each file is merged in its own commit (in file name order, so a
// later file's correction is an update in the change feed); with it the run's folded
// rows are one commit, where a row older than the table's row of its key changes
// nothing. Every commit carries the txns of the files it loads. An upsert target never
// holds a duplicate key.

// lineColumn holds each decoded row's line (decode.Options.LineColumn) and deleteColumn
// whether delete_when marks it; neither is a table column, so the MERGE leaves them out.
const (
	lineColumn   = "_orchestrator_line"
	deleteColumn = "_orchestrator_delete"
)

// keyedFile is one source file of a keyed ingest: the idx-th of the run, and the bad
// records the decoder skipped in it.
type keyedFile struct {
	f   *sourceFile
	idx int
	bad []*badRecord
}

// rowProblem is what is wrong with a decoded row (its key twice, a null sequence), with
// the row's place: the index of its file in the run, and its line.
type rowProblem struct {
	file int
	line int64
	err  error
}

func (p *rowProblem) Error() string { return p.err.Error() }
func (p *rowProblem) Unwrap() error { return p.err }

// before reports whether p's row comes before q's in the run (nil comes last).
func (p *rowProblem) before(q *rowProblem) bool {
	return q == nil || p.file < q.file || p.file == q.file && p.line < q.line
}

// The columns a keyed ingest adds to a decoded record (the table's columns, the file
// columns delete_when reads, lineColumn) in its batch form: deleteColumn, then the index
// of its file in the run and each row's order in the run.
const (
	runFileColumn = "_orchestrator_run_file"
	ordColumn     = "_orchestrator_ord"
)

// keyedRun is a keyed run's files and where the columns of its batch form are.
type keyedRun struct {
	seqName string
	files   []*keyedFile
	keyCols []int // in every record (same schema)
	seqCol  int   // -1: no sequence_by
	dataCol []int // table columns compared for equality (lineage aside)
	lineCol int
	delCol  int
	fileCol int
	ordCol  int
	nsource int // the leading columns that make a MERGE source row (the marked record)
	schema  *arrow.Schema
}

// loadKeyed runs an upsert ingest of files: they are decoded once into the keyed batch
// (jobs/internal/keyed; without sequence_by each file is a group of its own, merged in
// its own commit), every file is checked before anything is written, then each group is
// merged: its rows folded by key (without sequence_by: checked), the standing rows
// matched by place with the table's rows of their keys, ONE commit per group.
func (s *Ingest) loadKeyed(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, files []*sourceFile, loadTime time.Time, res *Result) error {
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	kr, end := env.keyedRun(s.cfg.MemoryBudget)
	defer end()
	run, schema, err := s.keyedForm(snap)
	if err != nil {
		return err
	}
	grouped := s.cfg.SequenceBy == ""
	live := &recordHolder{perRow: keyedRowCost, byteFactor: 3}
	opts := keyed.BatchOptions{Keys: run.keyCols, TwoAtOnce: true}
	if grouped {
		opts.Groups, opts.Group = len(files), func(rec arrow.RecordBatch) int { return int(fileOf(rec, run)) }
	}
	batch := kr.NewBatch(live, opts)
	if err := s.readKeyed(ctx, env, snap, run, schema, files, batch, loadTime, res); err != nil {
		return err
	}
	if err := batch.Finish(); err != nil {
		return err
	}
	noteHeld("upsert", batch)
	var seqText func(int64) string
	if s.cfg.SequenceBy != "" {
		seqText = sequenceText(snap.Schema().Field(s.cfg.SequenceBy).Type)
	}
	groups := [][]*keyedFile{run.files}
	if grouped {
		groups = groups[:0]
		for _, kf := range run.files {
			groups = append(groups, []*keyedFile{kf})
		}
		// Every file is checked before anything is written (with sequence_by, by the
		// fold of the MERGE, which writes nothing before it has folded every range).
		for g := range groups {
			if err := s.checkKeyed(ctx, batch, g, run, live); err != nil {
				return err
			}
		}
	}
	for g, files := range groups {
		if err := s.mergeKeyed(ctx, env, decl, tbl, batch, g, run, live, files, seqText, loadTime, res); err != nil {
			return err
		}
	}
	return nil
}

// keyedForm is the batch form of a keyed ingest into snap's table (its schema) and a run
// with its columns.
func (s *Ingest) keyedForm(snap *delta.Snapshot) (*keyedRun, *arrow.Schema, error) {
	_, target, err := s.decodeOptions(snap.Schema(), decode.CSV, decodeExtras{columns: s.deleteColumns(), lines: true}, nil)
	if err != nil {
		return nil, nil, err
	}
	fields := append(slices.Clone(target.Fields()), arrow.Field{Name: deleteColumn, Type: arrow.FixedWidthTypes.Boolean})
	nsource := len(fields)
	fields = append(fields, arrow.Field{Name: runFileColumn, Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: ordColumn, Type: arrow.PrimitiveTypes.Int64})
	schema := arrow.NewSchema(fields, nil)
	run := &keyedRun{seqCol: -1, seqName: s.cfg.SequenceBy, nsource: nsource, schema: schema}
	if err := s.keyedColumns(run, schema, snap); err != nil {
		return nil, nil, err
	}
	return run, schema, nil
}

// keyedColumns finds the run's columns in its batch form.
func (s *Ingest) keyedColumns(run *keyedRun, schema *arrow.Schema, snap *delta.Snapshot) error {
	idx := func(name string) int {
		for i, f := range schema.Fields() {
			if strings.EqualFold(f.Name, name) {
				return i
			}
		}
		return -1
	}
	for _, k := range s.cfg.Keys {
		i := idx(k)
		if i < 0 {
			return fmt.Errorf("key column %s is not a column of %s", k, s.cfg.Target)
		}
		run.keyCols = append(run.keyCols, i)
	}
	if s.cfg.SequenceBy != "" {
		run.seqCol = idx(s.cfg.SequenceBy)
	}
	run.lineCol, run.delCol, run.fileCol, run.ordCol = idx(lineColumn), idx(deleteColumn), idx(runFileColumn), idx(ordColumn)
	for _, f := range snap.Schema().Fields {
		if !strings.EqualFold(f.Name, s.sourceFileColumn()) && !strings.EqualFold(f.Name, s.loadTimeColumn()) {
			run.dataCol = append(run.dataCol, idx(f.Name))
		}
	}
	return nil
}

// readKeyed decodes every file once into the batch, each row with its line, whether
// delete_when marks it, its file and its order in the run.
func (s *Ingest) readKeyed(ctx context.Context, env *Env, snap *delta.Snapshot, run *keyedRun, schema *arrow.Schema, files []*sourceFile, batch *keyed.Batch, loadTime time.Time, res *Result) error {
	var pred expr.Predicate
	if s.cfg.DeleteWhen != "" {
		p, err := expr.Parse(s.cfg.DeleteWhen)
		if err != nil {
			return fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		pred = p
	}
	var matcher *expr.Matcher
	var ord int64
	for i, f := range files {
		kf := &keyedFile{f: f, idx: i}
		run.files = append(run.files, kf)
		bad, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{columns: s.deleteColumns(), lines: true}, func(rec arrow.RecordBatch) error {
			if matcher == nil && pred != nil {
				var err error
				if matcher, err = expr.NewMatcher(pred, schemaOfRecord(rec)); err != nil {
					return fmt.Errorf("delete_when %q (a predicate over the source row): %w", s.cfg.DeleteWhen, err)
				}
			}
			marked, err := withDeleteMarks(rec, matcher)
			if err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
			defer marked.Release()
			form := withRunColumns(marked, schema, i, ord)
			defer form.Release()
			ord += form.NumRows()
			return batch.Add(ctx, form)
		})
		kf.bad = bad
		if err != nil {
			return err
		}
	}
	return nil
}

// withRunColumns is a marked record of file fi (of the run) in a batch form of schema:
// with its file and each row's order (from ord).
func withRunColumns(marked arrow.RecordBatch, schema *arrow.Schema, fi int, ord int64) arrow.RecordBatch {
	n := int(marked.NumRows())
	fis, ords := make([]int64, n), make([]int64, n)
	for i := range n {
		fis[i], ords[i] = int64(fi), ord+int64(i)
	}
	extra := []arrow.Array{keyed.Int64s(fis), keyed.Int64s(ords)}
	defer arrowx.ReleaseArrays(extra)
	return array.NewRecordBatch(schema, append(slices.Clone(marked.Columns()), extra...), int64(n))
}

// fileOf is the file (its index in the run) of a batch-form record's rows.
func fileOf(rec arrow.RecordBatch, run *keyedRun) int64 {
	return rec.Column(run.fileCol).(*array.Int64).Value(0)
}

// schemaOfRecord is the Delta schema of a decoded record (for binding delete_when).
func schemaOfRecord(rec arrow.RecordBatch) *delta.StructType {
	st, err := delta.SchemaFromArrow(rec.Schema())
	if err != nil {
		return &delta.StructType{}
	}
	return st
}

// withDeleteMarks returns rec with a deleteColumn: whether m (nil: none) matches each row.
func withDeleteMarks(rec arrow.RecordBatch, m *expr.Matcher) (arrow.RecordBatch, error) {
	var marks []bool
	if m != nil {
		var err error
		if marks, err = m.Match(rec); err != nil {
			return nil, fmt.Errorf("delete_when: %w", err)
		}
	}
	// The marks' bitmap is built as such: a builder's append per row cost a serial
	// millisecond per 100 000 rows of a snapshot's pass 2.
	n := int(rec.NumRows())
	bits := memory.NewResizableBuffer(memory.DefaultAllocator)
	bits.Resize(int(bitutil.BytesForBits(int64(n))))
	clear(bits.Bytes())
	for i, marked := range marks {
		if marked {
			bitutil.SetBit(bits.Bytes(), i)
		}
	}
	data := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, bits}, nil, 0, 0)
	bits.Release()
	col := array.NewBooleanData(data)
	data.Release()
	defer col.Release()
	fields := append(slices.Clone(rec.Schema().Fields()), arrow.Field{Name: deleteColumn, Type: arrow.FixedWidthTypes.Boolean})
	cols := append(slices.Clone(rec.Columns()), col)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

// keyedMerge starts the MERGE of files on the table's current version: it quarantines
// their bad records and returns the MERGE's options (on opts.Tx's snapshot, with the
// files' txns; without source) and the files' names; nil options when every file was
// loaded meanwhile (by a concurrent run).
func (s *Ingest) keyedMerge(ctx context.Context, env *Env, tbl *delta.Table, files []*keyedFile, loadTime time.Time, res *Result) (*delta.MergeOptions, []string, error) {
	// Each run is merged on the version read here: its files loaded meanwhile (by a
	// concurrent run) are skipped; loaded later, the commit conflicts (and Run runs again).
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	var todo []*keyedFile
	for _, kf := range files {
		if v, ok := snap.TxnVersion(kf.f.ID); ok && (!isURL(kf.f.Name) || v == kf.f.Version) {
			res.Notes = append(res.Notes, kf.f.Name+": already loaded")
			continue
		}
		todo = append(todo, kf)
	}
	if len(todo) == 0 {
		return nil, nil, nil
	}
	var names []string
	var bad []*badRecord
	var sources []*sourceFile
	for _, kf := range todo {
		names, sources = append(names, kf.f.Name), append(sources, kf.f)
		bad = append(bad, kf.bad...)
	}
	if err := s.quarantine(ctx, env, sources, bad, loadTime, res); err != nil {
		return nil, nil, err
	}
	lineage := env.lineage()
	lineage.SourceFiles = names
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	for _, kf := range todo {
		tx.SetTxn(kf.f.ID, kf.f.Version)
	}
	opts := &delta.MergeOptions{
		On:             s.cfg.Keys,
		NullSafe:       true,
		WhenMatched:    []delta.MergeClause{{Action: delta.MergeUpdate}},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
		Tx:             tx,
		Lineage:        lineage,
	}
	marks := s.cfg.DeleteWhen != ""
	isDelete := expr.Eq("source."+deleteColumn, true)
	notDelete := expr.Eq("source."+deleteColumn, false)
	if marks {
		opts.WhenMatched = []delta.MergeClause{{Cond: isDelete, Action: delta.MergeDelete}, {Action: delta.MergeUpdate}}
		opts.WhenNotMatched = []delta.MergeClause{{Cond: notDelete, Action: delta.MergeInsert}}
	}
	if s.cfg.SequenceBy != "" {
		// A row older than the table's row of its key changes nothing.
		notOlder := notOlderThanTarget(s.cfg.SequenceBy)
		opts.WhenMatched = []delta.MergeClause{{CondFunc: notOlder, Action: delta.MergeUpdate}}
		if marks {
			opts.WhenMatched = []delta.MergeClause{
				{Cond: isDelete, CondFunc: notOlder, Action: delta.MergeDelete},
				{Cond: notDelete, CondFunc: notOlder, Action: delta.MergeUpdate},
			}
		}
	}
	return opts, names, nil
}

// dataColumns are the table's columns other than the lineage columns.
func (s *Ingest) dataColumns(schema *delta.StructType) []string {
	var out []string
	for _, f := range schema.Fields {
		if !strings.EqualFold(f.Name, s.sourceFileColumn()) && !strings.EqualFold(f.Name, s.loadTimeColumn()) {
			out = append(out, f.Name)
		}
	}
	return out
}

// notOlderThanTarget is a MERGE condition: the source row's sequence is not before the
// target row's (a target row with a null sequence is older than any).
func notOlderThanTarget(seq string) func(arrow.RecordBatch) ([]bool, error) {
	return func(rows arrow.RecordBatch) ([]bool, error) {
		src, err := viewColumn(rows, "source."+seq)
		if err != nil {
			return nil, err
		}
		dst, err := viewColumn(rows, "target."+seq)
		if err != nil {
			return nil, err
		}
		out := make([]bool, rows.NumRows())
		for i := range out {
			s, _ := seqValue(src, i)
			t, ok := seqValue(dst, i)
			out[i] = !ok || s >= t
		}
		return out, nil
	}
}

// viewColumn finds a "source."/"target." column of a MERGE condition's rows.
func viewColumn(rows arrow.RecordBatch, name string) (arrow.Array, error) {
	for i, f := range rows.Schema().Fields() {
		if strings.EqualFold(f.Name, name) {
			return rows.Column(i), nil
		}
	}
	return nil, fmt.Errorf("merge condition: no column %s", name)
}
