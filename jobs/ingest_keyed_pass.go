package jobs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// The passes of an upsert (ingest_keyed.go): a group's rows folded by key, then matched
// with the table's rows of their keys by place.

// recordHolder is the live pass of a keyed ingest's batch: its records as they came.
type recordHolder struct {
	recs       []arrow.RecordBatch
	bytes      int64
	rows       int64
	perRow     int64 // what a row costs besides its values...
	byteFactor int64 // ... which the pass holds so many times
}

// keyedRowCost is what a row of an upsert costs in memory besides its values, which a
// pass holds three times (the records, the standing rows, the MERGE source): index,
// fold, places.
// Measured (BenchmarkHeldRowCost): about 350 bytes a row with its values.
const keyedRowCost = 100

func (h *recordHolder) Add(_ context.Context, rec arrow.RecordBatch) error {
	rec.Retain()
	h.recs = append(h.recs, rec)
	h.bytes += keyed.RecordBytes(rec)
	h.rows += rec.NumRows()
	return nil
}

func (h *recordHolder) Held() int64 { return h.byteFactor*h.bytes + h.rows*h.perRow }

func (h *recordHolder) HandOver(ctx context.Context, b *keyed.Batch) error {
	defer h.release()
	for _, rec := range h.recs {
		if err := b.Spill(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

func (h *recordHolder) release() {
	arrowx.ReleaseRecords(h.recs)
	h.recs = nil
}

// records are the records of a pass of group g (a live pass: those held of file g, or
// every one when the batch is not grouped).
func (h *recordHolder) records(g int, grouped bool, run *keyedRun) []arrow.RecordBatch {
	if !grouped {
		return h.recs
	}
	var out []arrow.RecordBatch
	for _, r := range h.recs {
		if fileOf(r, run) == int64(g) {
			out = append(out, r)
		}
	}
	return out
}

// passRecords are the batch's records of a pass (the caller releases them).
func passRecords(ctx context.Context, p *keyed.Pass, g int, grouped bool, run *keyedRun) ([]arrow.RecordBatch, error) {
	if h, ok := p.Live.(*recordHolder); ok {
		recs := h.records(g, grouped, run)
		for _, r := range recs {
			r.Retain()
		}
		return recs, nil
	}
	var recs []arrow.RecordBatch
	err := p.EachBatch(ctx, func(_ context.Context, rec arrow.RecordBatch) error {
		rec.Retain()
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		arrowx.ReleaseRecords(recs)
		return nil, err
	}
	return recs, nil
}

// upsertCost is what the rows of some key ranges cost an upsert's pass.
func upsertCost(bb, br, _, tr int64) int64 { return 3*bb + (br+tr)*keyedRowCost }

// checkKeyed checks group g (a file, without sequence_by): a key twice is its earliest
// row's problem.
func (s *Ingest) checkKeyed(ctx context.Context, batch *keyed.Batch, g int, run *keyedRun, live *recordHolder) error {
	var problem *rowProblem
	var mu sync.Mutex // (two passes at once)
	_, err := batch.Passes(ctx, g, nil, upsertCost, func(ctx context.Context, p *keyed.Pass) error {
		recs, err := passRecords(ctx, p, g, true, run)
		if err != nil {
			return err
		}
		defer arrowx.ReleaseRecords(recs)
		_, _, err = run.fold(recs, nil)
		if pr, ok := err.(*rowProblem); ok {
			mu.Lock()
			defer mu.Unlock()
			if pr.before(problem) {
				problem = pr
			}
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if problem != nil {
		return problem
	}
	return nil
}

// mergeKeyed merges group g (files) in one commit with the files' txns: each pass folds
// its rows (seqText nil: no sequence_by, the rows are checked already) and gives the
// standing rows to the sink, matched with the table's rows of their keys by place or
// inserted in the order they came.
func (s *Ingest) mergeKeyed(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, batch *keyed.Batch, g int, run *keyedRun, live *recordHolder,
	files []*keyedFile, seqText func(int64) string, loadTime time.Time, res *Result) error {
	opts, names, err := s.keyedMerge(ctx, env, tbl, files, loadTime, res)
	if err != nil || opts == nil {
		return err
	}
	snap := opts.Tx.Snapshot()
	mp, err := tbl.NewMergeInParts(*opts)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	source := arrow.NewSchema(run.schema.Fields()[:run.nsource], nil)
	sink, err := batch.Sink(keyed.SinkOptions{Merge: mp, Snap: snap, Source: source})
	if err != nil {
		return err
	}
	defer sink.Release()
	spec := keyed.TargetSpec{Columns: s.cfg.Keys, Select: func(rec arrow.RecordBatch) ([]int, func(int) bool, error) {
		return columnsByName(rec.Schema(), s.cfg.Keys), nil, nil
	}}
	if !batch.Spilled() {
		spec.Filter = run.keyFilter(live.records(g, s.cfg.SequenceBy == "", run), s.cfg.Keys)
	}
	var problem *rowProblem
	var mu sync.Mutex // (two passes at once)
	passes, err := batch.Passes(ctx, g, keyed.NewTarget(snap, spec), upsertCost, func(ctx context.Context, p *keyed.Pass) error {
		pr, err := run.pass(ctx, p, g, s.cfg.SequenceBy == "", s.cfg.Keys, seqText, sink)
		mu.Lock()
		defer mu.Unlock()
		if pr != nil && pr.before(problem) {
			problem = pr
		}
		return err
	})
	if err != nil {
		return err
	}
	if problem != nil {
		return problem
	}
	mr, err := sink.Commit(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	countMerge(res, decl, names, mr)
	if batch.Spilled() {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %d rows over the memory budget (%s): worked in %d passes over spill files",
			strings.Join(names, ", "), batch.Rows(), ByteSize(env.budget(s.cfg.MemoryBudget)), passes))
	}
	return nil
}

// keyFilter is a predicate on the keys of a small batch (at most 10,000 rows, one key
// column), so that the scan of the table reads only the files whose stats may hold
// them; nil for another.
func (r *keyedRun) keyFilter(recs []arrow.RecordBatch, keys []string) expr.Predicate {
	var n int64
	for _, rec := range recs {
		n += rec.NumRows()
	}
	if len(keys) != 1 || n == 0 || n > 10_000 {
		return nil
	}
	var vals []any
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			v, err := keyed.Value(rec.Column(r.keyCols[0]), i)
			if err != nil {
				return nil
			}
			vals = append(vals, v)
		}
	}
	return expr.In(keys[0], vals...)
}

// pass folds the rows of a pass and gives the standing rows to the sink: a row whose
// key the table has matches each of the key's rows there (by place), another inserts,
// in the order the rows came. It returns the earliest row's problem of the pass, if any
// (then nothing is given to the sink).
func (r *keyedRun) pass(ctx context.Context, p *keyed.Pass, g int, grouped bool, keys []string, seqText func(int64) string, sink *keyed.Sink) (*rowProblem, error) {
	recs, err := passRecords(ctx, p, g, grouped, r)
	if err != nil {
		return nil, err
	}
	defer arrowx.ReleaseRecords(recs)
	index, win, err := r.fold(recs, seqText)
	if pr, ok := err.(*rowProblem); ok {
		return pr, nil
	}
	if err != nil {
		return nil, err
	}
	if len(win) == 0 {
		return nil, nil
	}
	places := make([][]keyed.Place, len(win))
	var block keyindex.Block
	err = p.EachTarget(ctx, func(tr keyed.TargetRecord) error {
		block.Reset()
		if err := keyed.AppendKeys(&block, tr.Rec, columnsByName(tr.Rec.Schema(), keys), 0, int(tr.Rec.NumRows())); err != nil {
			return err
		}
		index.LookupBlock(&block)
		for i, id := range block.IDs {
			if id >= 0 {
				places[id] = append(places[id], tr.Place(i))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	src := make([]arrow.RecordBatch, len(recs))
	for i, rec := range recs {
		src[i] = array.NewRecordBatch(sink.Source(), rec.Columns()[:r.nsource], rec.NumRows())
	}
	defer arrowx.ReleaseRecords(src)
	// Matched rows once per place of their key; inserts in the order they came.
	var matched, inserts []keyed.Ref
	var at []keyed.Place
	var ords []int64
	for id, w := range win {
		if len(places[id]) == 0 {
			inserts = append(inserts, w)
			ords = append(ords, recs[w.Rec].Column(r.ordCol).(*array.Int64).Value(int(w.Row)))
			continue
		}
		for _, pl := range places[id] {
			matched, at = append(matched, w), append(at, pl)
		}
	}
	if len(matched) > 0 {
		m, err := keyed.GatherOne(ctx, src, matched)
		if err != nil {
			return nil, err
		}
		err = sink.Matched(ctx, m, keyed.Rows{}, at)
		m.Release()
		if err != nil {
			return nil, err
		}
	}
	if len(inserts) > 0 {
		ins, err := keyed.GatherOne(ctx, src, inserts)
		if err != nil {
			return nil, err
		}
		defer ins.Release()
		return nil, sink.Inserts(ctx, ins, ords, nil)
	}
	return nil, nil
}

// fold checks the rows of recs by key and returns their keys' index and, per key id,
// the row that stands: without seqText (no sequence_by) a key twice is an error; with
// it the last by sequence wins, a delete wins a tie, exact duplicates are dropped and
// two different rows at one sequence are an error. Records come file by file, each of
// one file, in the order the rows came.
func (r *keyedRun) fold(recs []arrow.RecordBatch, seqText func(int64) string) (*keyindex.Index, []keyed.Ref, error) {
	index := keyindex.New(1024)
	var win []keyed.Ref
	var block keyindex.Block
	for ri, rec := range recs {
		kf := r.files[fileOf(rec, r)]
		block.Reset()
		for i := range int(rec.NumRows()) {
			var err error
			if block.Buf, err = keyed.AppendKey(block.Buf, rec, r.keyCols, i); err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %w", kf.f.Name, r.line(rec, i), err)
			}
			block.End()
		}
		index.AddBlock(&block)
		for i, id := range block.IDs {
			at := keyed.Ref{Rec: int32(ri), Row: int32(i)}
			if int(id) == len(win) {
				win = append(win, at)
				if r.seqCol >= 0 {
					if _, ok := seqValue(rec.Column(r.seqCol), i); !ok {
						return nil, nil, &rowProblem{kf.idx, r.line(rec, i), fmt.Errorf("%s:%d: key %s: sequence_by column %s is null", kf.f.Name, r.line(rec, i), keyText(rec, r.keyCols, i), r.seqName)}
					}
				}
				continue
			}
			next, err := r.pick(recs, win[id], at, seqText)
			if err != nil {
				return nil, nil, &rowProblem{kf.idx, r.line(rec, i), err}
			}
			win[id] = next
		}
	}
	return index, win, nil
}

// pick decides between the standing row a of a key and its new row b.
func (r *keyedRun) pick(recs []arrow.RecordBatch, a, b keyed.Ref, seqText func(int64) string) (keyed.Ref, error) {
	ra, rb := recs[a.Rec], recs[b.Rec]
	ia, ib := int(a.Row), int(b.Row)
	fa, fb := r.files[fileOf(ra, r)].f.Name, r.files[fileOf(rb, r)].f.Name
	where := func(name string, rec arrow.RecordBatch, i int) string {
		return fmt.Sprintf("%s:%d", name, r.line(rec, i))
	}
	if seqText == nil { // (folded file by file)
		return a, fmt.Errorf("%s: key %s is on lines %d and %d; set sequence_by on the stage to keep the last of a key's rows, or remove the duplicate", fa, keyText(ra, r.keyCols, ia), r.line(ra, ia), r.line(rb, ib))
	}
	sa, _ := seqValue(ra.Column(r.seqCol), ia)
	sb, ok := seqValue(rb.Column(r.seqCol), ib)
	if !ok {
		return a, fmt.Errorf("%s: key %s: sequence_by column %s is null", where(fb, rb, ib), keyText(rb, r.keyCols, ib), r.seqName)
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
			return a, fmt.Errorf("key %s has two different rows at the same sequence value %s (%s and %s); make sequence_by unique per key", keyText(ra, r.keyCols, ia), seqText(sa), where(fa, ra, ia), where(fb, rb, ib))
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
