package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// Upsert mode over the memory budget. The files are decoded once into spill files by
// key hash range (one set per file without sequence_by, whose files merge one by one;
// one for the run with it), each row with its file and its order in the run. Every
// file is checked range by range before anything is written, and the earliest problem
// (a key twice, a null sequence) is named, as in memory. Each MERGE then sets aside the
// table's rows of the keys the files may have (their places), folds the rows range by
// range (keyedRun.fold), matches the standing rows to the table's rows of their keys by
// place, and hands them to a partedMerge: ONE commit per file (or per run), with the
// files' txns, the same rows and change feed as in memory.

// keyedRowCost is what a row of an upsert costs in memory besides its values (index,
// fold, MERGE source).
const keyedRowCost = 64

// keyedSpill is the decoded rows of one MERGE set aside, and a filter of their keys.
type keyedSpill struct {
	out    *fanout
	filter keyFilter
}

// loadKeyedSpilled runs an upsert ingest of files in passes (limit: a pass's working
// set).
func (s *Ingest) loadKeyedSpilled(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, files []*sourceFile, loadTime time.Time, limit int64, res *Result) error {
	dir, err := newSpillDir(env, limit)
	if err != nil {
		return err
	}
	defer dir.remove()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	committed := res.RowsWritten
	fail := func(err error) error {
		res.RowsWritten = committed // rows count as written when a commit writes them
		return err
	}
	run, spills, err := s.spillKeyed(ctx, env, dir, snap, files, loadTime, limit, res)
	if err != nil {
		return fail(err)
	}
	var seqText func(int64) string
	if s.cfg.SequenceBy != "" {
		seqText = sequenceText(snap.Schema().Field(s.cfg.SequenceBy).Type)
	}
	// Every file is checked before anything is written (with sequence_by, by the fold
	// of the MERGE, which writes nothing before it has folded every range).
	if seqText == nil {
		for i := range run.files {
			var problem *rowProblem
			err := eachRange(ctx, spills[i].out, func(p int) error {
				winners, err := s.foldRange(ctx, run, run.files, spills[i].out, p, nil)
				releaseRecords(winners)
				if p, ok := err.(*rowProblem); ok {
					if p.before(problem) {
						problem = p
					}
					return nil
				}
				return err
			})
			if err != nil {
				return fail(err)
			}
			if problem != nil {
				return fail(problem)
			}
		}
		for i, kf := range run.files {
			if err := s.mergeKeyedSpilled(ctx, env, decl, tbl, dir, run, []*keyedFile{kf}, spills[i], nil, loadTime, limit, res); err != nil {
				return fail(err)
			}
		}
		return nil
	}
	if err := s.mergeKeyedSpilled(ctx, env, decl, tbl, dir, run, run.files, spills[0], seqText, loadTime, limit, res); err != nil {
		return fail(err)
	}
	return nil
}

// eachRange calls fn for each key hash range of f that has rows.
func eachRange(ctx context.Context, f *fanout, fn func(p int) error) error {
	for p := range hashParts {
		if f.partRows(p) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// spillKeyed decodes the files once into spill files: per file without sequence_by, one
// set with it. The run it returns has the files (without records) and the columns.
func (s *Ingest) spillKeyed(ctx context.Context, env *Env, dir *spillDir, snap *delta.Snapshot, files []*sourceFile, loadTime time.Time, limit int64, res *Result) (*keyedRun, []*keyedSpill, error) {
	sp := &keyedSpiller{s: s, snap: snap, dir: dir, run: &keyedRun{seqCol: -1, seqName: s.cfg.SequenceBy}}
	var extra []string
	if s.cfg.DeleteWhen != "" {
		p, err := delta.ParsePredicate(s.cfg.DeleteWhen)
		if err != nil {
			return nil, nil, fmt.Errorf("delete_when %q: %w", s.cfg.DeleteWhen, err)
		}
		sp.pred, extra = p, delta.PredicateColumns(p)
	}
	var spills []*keyedSpill
	for fi, f := range files {
		kf := &keyedFile{f: f, idx: fi}
		sp.run.files = append(sp.run.files, kf)
		if fi == 0 || s.cfg.SequenceBy == "" {
			share := limit // (the files' filters share it: each file merges on its own)
			if s.cfg.SequenceBy == "" {
				share /= int64(len(files))
			}
			spills = append(spills, &keyedSpill{filter: newKeyFilter(share)})
		}
		ks := spills[len(spills)-1]
		bad, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{columns: extra, lines: true}, func(rec arrow.RecordBatch) error {
			return sp.record(ctx, ks, fi, f, rec)
		})
		kf.bad = bad
		if err != nil {
			return nil, nil, err
		}
		if s.cfg.SequenceBy == "" || fi == len(files)-1 {
			if ks.out == nil {
				ks.out = newFanout(dir, nil, hashParts)
			}
			if err := ks.out.finish(); err != nil {
				return nil, nil, err
			}
		}
	}
	return sp.run, spills, nil
}

// keyedSpiller sets aside the decoded records of an upsert over its memory budget.
type keyedSpiller struct {
	s       *Ingest
	snap    *delta.Snapshot
	dir     *spillDir
	run     *keyedRun
	pred    delta.Predicate // delete_when, nil without it
	matcher *delta.Matcher  // pred over the decoded records, made from the first
	ord     int64           // the order in the run of the next row
	buf     []byte
	parts   []uint16
}

// record sets aside a decoded record of file f (files[fi]) into ks by key hash range,
// each row with its delete mark, its file and its order in the run, and adds its keys
// to ks's filter.
func (sp *keyedSpiller) record(ctx context.Context, ks *keyedSpill, fi int, f *sourceFile, rec arrow.RecordBatch) error {
	if sp.matcher == nil && sp.pred != nil {
		var err error
		if sp.matcher, err = delta.NewMatcher(sp.pred, schemaOfRecord(rec)); err != nil {
			return fmt.Errorf("delete_when %q (a predicate over the source row): %w", sp.s.cfg.DeleteWhen, err)
		}
	}
	marked, err := withDeleteMarks(rec, sp.matcher)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	defer marked.Release()
	run := sp.run
	if run.keyCols == nil {
		if err := sp.s.keyedColumns(run, marked.Schema(), sp.snap); err != nil {
			return err
		}
	}
	n := int(marked.NumRows())
	sp.parts = slices.Grow(sp.parts[:0], n)[:n]
	fis, ords := make([]int64, n), make([]int64, n)
	for i := range n {
		if sp.buf, err = keyed.AppendKey(sp.buf[:0], marked, run.keyCols, i); err != nil {
			return fmt.Errorf("%s:%d: %w", f.Name, run.line(marked, i), err)
		}
		sp.parts[i], fis[i], ords[i] = keyRange(sp.buf), int64(fi), sp.ord+int64(i)
		ks.filter.add(sp.buf)
	}
	sp.ord += int64(n)
	extra := []arrow.Array{int64Array(fis), int64Array(ords)}
	defer releaseAll(extra)
	fields := append(slices.Clone(marked.Schema().Fields()),
		arrow.Field{Name: "_orchestrator_file", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "_orchestrator_ord", Type: arrow.PrimitiveTypes.Int64})
	with := array.NewRecordBatch(arrow.NewSchema(fields, nil), append(slices.Clone(marked.Columns()), extra...), int64(n))
	defer with.Release()
	if ks.out == nil {
		ks.out = newFanout(sp.dir, with.Schema(), hashParts)
	}
	return ks.out.write(ctx, with, sp.parts)
}

// keyedColumns finds the run's columns in the schema of its decoded rows (as
// decodeKeyed does).
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
	run.lineCol, run.delCol = idx(lineColumn), idx(deleteColumn)
	for _, f := range snap.Schema().Fields {
		if !strings.EqualFold(f.Name, s.sourceFileColumn()) && !strings.EqualFold(f.Name, s.loadTimeColumn()) {
			run.dataCol = append(run.dataCol, idx(f.Name))
		}
	}
	return nil
}

// foldRange folds the rows of key hash range p (fold: one standing row per key, or the
// earliest row's problem, a *rowProblem).
func (s *Ingest) foldRange(ctx context.Context, run *keyedRun, files []*keyedFile, out *fanout, p int, seqText func(int64) string) ([]arrow.RecordBatch, error) {
	// The range's records, by file, in the order they came.
	byFile := map[int]*keyedFile{}
	var order []*keyedFile
	defer func() {
		for _, kf := range order {
			releaseRecords(kf.recs)
		}
	}()
	err := each(ctx, out.files[p:p+1], func(rec arrow.RecordBatch) error {
		fi := int(rec.Column(int(rec.NumCols()) - 2).(*array.Int64).Value(0))
		kf := byFile[fi]
		if kf == nil {
			kf = &keyedFile{f: run.files[fi].f, idx: fi}
			byFile[fi] = kf
			order = append(order, kf)
		}
		rec.Retain()
		kf.recs = append(kf.recs, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(order, func(a, b *keyedFile) int { return a.idx - b.idx })
	return run.fold(order, seqText)
}

// mergeKeyedSpilled merges the rows of files set aside in ks in one commit (seqText nil:
// no sequence_by, the rows are checked already).
func (s *Ingest) mergeKeyedSpilled(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, dir *spillDir, run *keyedRun, files []*keyedFile,
	ks *keyedSpill, seqText func(int64) string, loadTime time.Time, limit int64, res *Result) error {
	opts, names, err := s.keyedMerge(ctx, env, tbl, files, loadTime, res)
	if err != nil || opts == nil {
		return err
	}
	snap := opts.Tx.Snapshot()
	targets, err := s.spillTargetKeys(ctx, dir, snap, ks.filter, limit)
	if err != nil {
		return err
	}
	var sch *arrow.Schema
	if ks.out.schema != nil {
		n := len(ks.out.schema.Fields())
		sch = arrow.NewSchema(ks.out.schema.Fields()[:n-2], nil)
	}
	pm, err := newPartedMerge(dir, snap, sch, false, limit/4)
	if err != nil {
		return err
	}
	runs := passes(func(p int) int64 {
		return 3*ks.out.partBytes(p) + (ks.out.partRows(p)+targets.partRows(p))*keyedRowCost + targets.partBytes(p)
	}, limit)
	var problem *rowProblem
	for _, r := range runs {
		p, err := s.keyedPass(ctx, run, files, ks.out, targets, r[0], r[1], seqText, pm)
		if err != nil {
			return err
		}
		if p != nil && p.before(problem) {
			problem = p
		}
	}
	if problem != nil {
		return problem
	}
	mp, err := tbl.NewMergeInParts(*opts)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	if sch != nil {
		if err := pm.run(ctx, mp); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
		}
	}
	mr, err := mp.Commit(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	countMerge(res, decl, names, mr)
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d rows over the memory budget (%s): worked in %d passes over spill files",
		strings.Join(names, ", "), ks.out.rows(), ByteSize(limit*2), len(runs)))
	return nil
}

// spillTargetKeys sets aside, by key hash range, the key columns and places (file index,
// row) of the table's rows whose keys filter may have.
func (s *Ingest) spillTargetKeys(ctx context.Context, dir *spillDir, snap *delta.Snapshot, filter keyFilter, limit int64) (*fanout, error) {
	sc, err := snap.Scan(ctx, scanOptions(limit, delta.ScanOptions{Columns: s.cfg.Keys, FilesOnly: true}))
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	fileIdx := map[string]int64{}
	for i, a := range snap.Files() {
		fileIdx[a.Path] = int64(i)
	}
	fields := append(slices.Clone(sc.Schema().Fields()),
		arrow.Field{Name: "_orchestrator_file", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "_orchestrator_row", Type: arrow.PrimitiveTypes.Int64})
	schema := arrow.NewSchema(fields, nil)
	out := newFanout(dir, schema, hashParts)
	all := allColumns(len(s.cfg.Keys))
	var buf []byte
	for sc.Next() {
		rec := sc.RecordBatch()
		file, first, ok := sc.Position()
		if !ok {
			return nil, fmt.Errorf("the scan of the table lost the positions of its rows")
		}
		var keep []int32
		var parts []uint16
		var fis, rows []int64
		for i := range int(rec.NumRows()) {
			if buf, err = appendKey(buf[:0], rec, all, all, i); err != nil {
				return nil, err
			}
			if !filter.mayHave(buf) {
				continue
			}
			keep, parts = append(keep, int32(i)), append(parts, keyRange(buf))
			fis, rows = append(fis, fileIdx[file.Path]), append(rows, first+int64(i))
		}
		if len(keep) == 0 {
			continue
		}
		kept, err := delta.GatherRows(ctx, rec, keep)
		if err != nil {
			return nil, err
		}
		extra := []arrow.Array{int64Array(fis), int64Array(rows)}
		with := array.NewRecordBatch(schema, append(slices.Clone(kept.Columns()), extra...), int64(len(keep)))
		kept.Release()
		releaseAll(extra)
		err = out.write(ctx, with, parts)
		with.Release()
		if err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, out.finish()
}

// keyedPass folds the ranges [lo, hi) and hands their standing rows to pm: matched, one
// per table row of their key, or inserted in the order they came. It returns the
// earliest row's problem of the ranges, if any (then nothing is handed over).
func (s *Ingest) keyedPass(ctx context.Context, run *keyedRun, files []*keyedFile, rows, targets *fanout, lo, hi int,
	seqText func(int64) string, pm *partedMerge) (*rowProblem, error) {
	var winners []arrow.RecordBatch
	defer func() { releaseRecords(winners) }()
	var problem *rowProblem
	for p := lo; p < hi; p++ {
		if rows.partRows(p) == 0 {
			continue
		}
		w, err := s.foldRange(ctx, run, files, rows, p, seqText)
		if pr, ok := err.(*rowProblem); ok {
			if pr.before(problem) {
				problem = pr
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		winners = append(winners, w...)
	}
	if problem != nil || len(winners) == 0 {
		return problem, nil
	}
	index, places, err := readTargetPlaces(ctx, targets.files[lo:hi], pm.files)
	if err != nil {
		return nil, err
	}
	return nil, handKeyed(ctx, run, winners, index, places, pm)
}

// readTargetPlaces reads back the table's rows of a pass's keys (from the spill files of
// its ranges): an index of the keys and per key id the places of its rows in the
// snapshot's files.
func readTargetPlaces(ctx context.Context, spilled []*spillFile, snapFiles []*delta.Add) (*keyindex.Index, [][]rowAt, error) {
	index := keyindex.New(1 << 10)
	var places [][]rowAt
	var block keyindex.Block
	err := each(ctx, spilled, func(rec arrow.RecordBatch) error {
		n := int(rec.NumCols())
		k := allColumns(n - 2)
		block.Reset()
		for i := range int(rec.NumRows()) {
			var err error
			if block.Buf, err = appendKey(block.Buf, rec, k, k, i); err != nil {
				return err
			}
			block.End()
		}
		index.AddBlock(&block)
		file, row := rec.Column(n-2).(*array.Int64), rec.Column(n-1).(*array.Int64)
		for i, id := range block.IDs {
			if int(id) == len(places) {
				places = append(places, nil)
			}
			places[id] = append(places[id], rowAt{file: snapFiles[file.Value(i)].Path, row: row.Value(i)})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return index, places, nil
}

// handKeyed hands a pass's standing rows (winners) to pm: a row whose key the table has
// (index, places) matches each of the key's rows there, by place; another inserts, in
// the order the rows came.
func handKeyed(ctx context.Context, run *keyedRun, winners []arrow.RecordBatch, index *keyindex.Index, places [][]rowAt, pm *partedMerge) error {
	var mRec, mRow, iRec, iRow []int32
	var targetFiles []string
	var at, ords []int64
	var buf []byte
	for r, rec := range winners {
		ord := rec.Column(int(rec.NumCols()) - 1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			var err error
			if buf, err = keyed.AppendKey(buf[:0], rec, run.keyCols, i); err != nil {
				return err
			}
			id, ok := index.Lookup(buf)
			if !ok {
				iRec, iRow, ords = append(iRec, int32(r)), append(iRow, int32(i)), append(ords, ord.Value(i))
				continue
			}
			for _, pl := range places[id] {
				mRec, mRow = append(mRec, int32(r)), append(mRow, int32(i))
				targetFiles, at = append(targetFiles, pl.file), append(at, pl.row)
			}
		}
	}
	if len(mRec) > 0 {
		src, err := gatherSource(ctx, winners, mRec, mRow, pm.source)
		if err != nil {
			return err
		}
		defer src.Release()
		if err := pm.addMatched(ctx, src, nil, targetFiles, at); err != nil {
			return err
		}
	}
	if len(iRec) > 0 {
		src, err := gatherSource(ctx, winners, iRec, iRow, pm.source)
		if err != nil {
			return err
		}
		defer src.Release()
		if err := pm.addInserts(ctx, src, ords, make([]int64, len(ords))); err != nil {
			return err
		}
	}
	return nil
}

// gatherSource gathers rows (record recIdx[k], row rowIdx[k]) of recs, in that order, as
// one record of schema (the leading columns of recs).
func gatherSource(ctx context.Context, recs []arrow.RecordBatch, recIdx, rowIdx []int32, schema *arrow.Schema) (arrow.RecordBatch, error) {
	n := len(schema.Fields())
	trimmed := make([]arrow.RecordBatch, len(recs))
	for i, r := range recs {
		trimmed[i] = array.NewRecordBatch(schema, r.Columns()[:n], r.NumRows())
	}
	defer releaseRecords(trimmed)
	all, err := concatRecords(trimmed)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	starts := make([]int32, len(recs)+1)
	for i, r := range recs {
		starts[i+1] = starts[i] + int32(r.NumRows())
	}
	idx := make([]int32, len(recIdx))
	for k := range recIdx {
		idx[k] = starts[recIdx[k]] + rowIdx[k]
	}
	return delta.GatherRows(ctx, all, idx)
}
