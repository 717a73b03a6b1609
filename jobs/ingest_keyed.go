package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
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

// keyedFile is one decoded source file of a keyed ingest: the idx-th of the run.
type keyedFile struct {
	f    *sourceFile
	idx  int
	recs []arrow.RecordBatch
	bad  []*badRecord
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

// keyedRun is the decoded files of a keyed run and where their columns are.
type keyedRun struct {
	seqName string
	files   []*keyedFile
	keyCols []int // in every record (same schema)
	seqCol  int   // -1: no sequence_by
	dataCol []int // table columns compared for equality (lineage aside)
	lineCol int
	delCol  int
}

func (r *keyedRun) release() {
	for _, kf := range r.files {
		releaseRecords(kf.recs)
	}
}

// loadKeyed runs an upsert ingest of files.
func (s *Ingest) loadKeyed(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, files []*sourceFile, loadTime time.Time, res *Result) error {
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	committed := res.RowsWritten
	limit := workingSet(env.budget(s.cfg.MemoryBudget))
	run, err := s.decodeKeyed(ctx, env, snap, files, loadTime, limit, res)
	// Rows count as written when a commit writes them (the MERGE's counts).
	res.RowsWritten = committed
	if errors.Is(err, errOverBudget) {
		// Too large for memory: decode again into spill files and work in passes.
		return s.loadKeyedSpilled(ctx, env, decl, tbl, files, loadTime, limit, res)
	}
	if err != nil {
		return err
	}
	defer run.release()
	fail := func(err error) error {
		res.RowsWritten = committed
		return err
	}
	if s.cfg.SequenceBy == "" {
		for _, kf := range run.files {
			if _, err := run.fold([]*keyedFile{kf}, nil); err != nil {
				return fail(err)
			}
		}
		for _, kf := range run.files {
			if err := s.mergeKeyed(ctx, env, decl, tbl, run, []*keyedFile{kf}, kf.recs, loadTime, res); err != nil {
				return fail(err)
			}
		}
		return nil
	}
	var seqText func(int64) string
	if s.cfg.SequenceBy != "" {
		seqText = sequenceText(snap.Schema().Field(s.cfg.SequenceBy).Type)
	}
	winners, err := run.fold(run.files, seqText)
	if err != nil {
		return fail(err)
	}
	defer releaseRecords(winners)
	if err := s.mergeKeyed(ctx, env, decl, tbl, run, run.files, winners, loadTime, res); err != nil {
		return fail(err)
	}
	return nil
}

// decodeKeyed decodes every file of the run with the lines of its rows and the
// delete_when marks; with limit set, it fails with errOverBudget once they would hold
// more.
func (s *Ingest) decodeKeyed(ctx context.Context, env *Env, snap *delta.Snapshot, files []*sourceFile, loadTime time.Time, limit int64, res *Result) (*keyedRun, error) {
	var pred delta.Predicate
	var extra []string
	if s.cfg.DeleteWhen != "" {
		p, err := delta.ParsePredicate(s.cfg.DeleteWhen)
		if err != nil {
			return nil, fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		pred, extra = p, delta.PredicateColumns(p)
	}
	run := &keyedRun{seqCol: -1, seqName: s.cfg.SequenceBy}
	var matcher *delta.Matcher
	var held int64
	for i, f := range files {
		kf := &keyedFile{f: f, idx: i}
		run.files = append(run.files, kf)
		bad, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{columns: extra, lines: true}, func(rec arrow.RecordBatch) error {
			if matcher == nil && pred != nil {
				var err error
				if matcher, err = delta.NewMatcher(pred, schemaOfRecord(rec)); err != nil {
					return fmt.Errorf("delete_when %q (a predicate over the source row): %w", s.cfg.DeleteWhen, err)
				}
			}
			marked, err := withDeleteMarks(rec, matcher)
			if err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
			kf.recs = append(kf.recs, marked)
			// The records, and the standing rows and MERGE source gathered from them.
			held += 3*recordBytes(marked) + marked.NumRows()*keyedRowCost
			if limit > 0 && held > limit {
				return errOverBudget
			}
			return nil
		})
		kf.bad = bad
		if err != nil {
			run.release()
			return nil, err
		}
	}
	var schema *arrow.Schema
	for _, kf := range run.files {
		if len(kf.recs) > 0 {
			schema = kf.recs[0].Schema()
			break
		}
	}
	if schema == nil {
		return run, nil
	}
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
			run.release()
			return nil, fmt.Errorf("key column %s is not a column of %s", k, s.cfg.Target)
		}
		run.keyCols = append(run.keyCols, i)
	}
	if s.cfg.SequenceBy != "" {
		run.seqCol = idx(s.cfg.SequenceBy)
	}
	run.lineCol, run.delCol = idx(lineColumn), idx(deleteColumn)
	for _, f := range snap.Schema().Fields {
		if !strings.EqualFold(f.Name, s.sourceFileColumn()) && !strings.EqualFold(f.Name, s.loadTimeColumn()) {
			run.dataCol = append(run.dataCol, idx(f.Name))
		}
	}
	return run, nil
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
func withDeleteMarks(rec arrow.RecordBatch, m *delta.Matcher) (arrow.RecordBatch, error) {
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

// keyedRow names a decoded row: file, record and row.
type keyedRow struct {
	file, rec, row int32
}

// fold checks the rows of files by key and returns the rows that stand, one per key
// (in first-seen key order): without seqText (no sequence_by) a key twice is an error;
// with it the last by sequence wins, a delete wins a tie, exact duplicates are dropped
// and two different rows at one sequence are an error.
func (r *keyedRun) fold(files []*keyedFile, seqText func(int64) string) ([]arrow.RecordBatch, error) {
	index := keyindex.New(1024)
	var win []keyedRow
	var block keyindex.Block
	for fi, kf := range files {
		for ri, rec := range kf.recs {
			block.Reset()
			for i := range int(rec.NumRows()) {
				var err error
				if block.Buf, err = keyed.AppendKey(block.Buf, rec, r.keyCols, i); err != nil {
					return nil, fmt.Errorf("%s:%d: %w", kf.f.Name, r.line(rec, i), err)
				}
				block.End()
			}
			index.AddBlock(&block)
			for i, id := range block.IDs {
				at := keyedRow{int32(fi), int32(ri), int32(i)}
				if int(id) == len(win) {
					win = append(win, at)
					if r.seqCol >= 0 {
						if _, ok := seqValue(rec.Column(r.seqCol), i); !ok {
							return nil, &rowProblem{kf.idx, r.line(rec, i), fmt.Errorf("%s:%d: key %s: sequence_by column %s is null", kf.f.Name, r.line(rec, i), keyText(rec, r.keyCols, i), r.seqName)}
						}
					}
					continue
				}
				next, err := r.pick(files, win[id], at, seqText)
				if err != nil {
					return nil, &rowProblem{kf.idx, r.line(rec, i), err}
				}
				win[id] = next
			}
		}
	}
	// Gather the standing rows, record by record, in the records' schema, in the order
	// of the files and their rows.
	byRec := map[[2]int32][]int32{}
	var order [][2]int32
	for _, w := range win {
		k := [2]int32{w.file, w.rec}
		if _, ok := byRec[k]; !ok {
			order = append(order, k)
		}
		byRec[k] = append(byRec[k], w.row)
	}
	slices.SortFunc(order, func(a, b [2]int32) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	var out []arrow.RecordBatch
	for _, k := range order {
		rows := byRec[k]
		slices.Sort(rows)
		g, err := delta.GatherRows(context.Background(), files[k[0]].recs[k[1]], rows)
		if err != nil {
			releaseRecords(out)
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// pick decides between the standing row a of a key and its new row b.
func (r *keyedRun) pick(files []*keyedFile, a, b keyedRow, seqText func(int64) string) (keyedRow, error) {
	ra, rb := files[a.file].recs[a.rec], files[b.file].recs[b.rec]
	ia, ib := int(a.row), int(b.row)
	where := func(kr keyedRow, rec arrow.RecordBatch, i int) string {
		return fmt.Sprintf("%s:%d", files[kr.file].f.Name, r.line(rec, i))
	}
	if seqText == nil { // (folded file by file)
		return a, fmt.Errorf("%s: key %s is on lines %d and %d; set sequence_by on the stage to keep the last of a key's rows, or remove the duplicate", files[a.file].f.Name, keyText(ra, r.keyCols, ia), r.line(ra, ia), r.line(rb, ib))
	}
	sa, _ := seqValue(ra.Column(r.seqCol), ia)
	sb, ok := seqValue(rb.Column(r.seqCol), ib)
	if !ok {
		return a, fmt.Errorf("%s: key %s: sequence_by column %s is null", where(b, rb, ib), keyText(rb, r.keyCols, ib), r.seqName)
	}
	da, db := r.deleted(ra, ia), r.deleted(rb, ib)
	switch {
	case sb > sa:
		return b, nil
	case sb < sa:
		return a, nil
	case da:
		return a, nil
	case db:
		return b, nil
	}
	for _, c := range r.dataCol {
		if c >= 0 && !sameValue(ra.Column(c), ia, rb.Column(c), ib) {
			return a, fmt.Errorf("key %s has two different rows at the same sequence value %s (%s and %s); make sequence_by unique per key", keyText(ra, r.keyCols, ia), seqText(sa), where(a, ra, ia), where(b, rb, ib))
		}
	}
	return a, nil // an exact duplicate
}

func (r *keyedRun) line(rec arrow.RecordBatch, i int) int64 {
	if r.lineCol < 0 {
		return 0
	}
	return rec.Column(r.lineCol).(*array.Int64).Value(i)
}

func (r *keyedRun) deleted(rec arrow.RecordBatch, i int) bool {
	return r.delCol >= 0 && rec.Column(r.delCol).(*array.Boolean).Value(i)
}

// mergeKeyed merges rows (of files, decoded) into the table in one commit with the
// files' txns: upsert or snapshot, as the stage's mode says.
func (s *Ingest) mergeKeyed(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, run *keyedRun, files []*keyedFile, rows []arrow.RecordBatch, loadTime time.Time, res *Result) error {
	opts, names, err := s.keyedMerge(ctx, env, tbl, files, loadTime, res)
	if err != nil || opts == nil {
		return err
	}
	opts.Source = rows
	mr, err := tbl.Merge(ctx, *opts)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	countMerge(res, decl, names, mr)
	return nil
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
	isDelete := delta.Eq("source."+deleteColumn, true)
	notDelete := delta.Eq("source."+deleteColumn, false)
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
