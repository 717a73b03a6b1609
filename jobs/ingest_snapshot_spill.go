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

// Snapshot mode over the memory budget. The table's keys (with their data hashes and
// places) and the files' decoded rows are set aside by key hash range in spill files;
// each pass runs pass 1 and pass 2 (snapState) on as many ranges as fit, and hands its
// updates and deletes (matched by place) and its new keys' rows (inserted in the order
// the keys came) to a partedMerge, which merges them in ONE commit with the files' txns.
// A first snapshot into an empty table streams its rows as in memory, setting aside only
// the keys, which are checked for duplicates range by range before the commit
// (ingest_snapshot_first.go).

// loadSnapshotSpilled runs a snapshot ingest in passes (limit: a pass's working set).
func (s *Ingest) loadSnapshotSpilled(ctx context.Context, env *Env, decl *Table, tbl *delta.Table, snap *delta.Snapshot, files []*sourceFile, data []string, loadTime time.Time, limit int64, res *Result) error {
	dir, err := newSpillDir(env, limit)
	if err != nil {
		return err
	}
	defer dir.remove()
	keys, err := s.spillTableKeys(ctx, dir, snap, data, limit)
	if err != nil {
		return err
	}
	committed := res.RowsWritten
	rows, bad, err := s.spillSnapshotFiles(ctx, env, dir, snap, files, loadTime, res)
	res.RowsWritten = committed // rows count as written when the MERGE writes them
	if err != nil {
		return err
	}
	sch, err := s.sourceSchema(snap)
	if err != nil {
		return err
	}
	pm, err := newPartedMerge(dir, snap, sch, false, limit/4)
	if err != nil {
		return err
	}
	runs := passes(func(p int) int64 {
		return (keys.partRows(p)+rows.partRows(p))*snapKeyCost + 2*rows.partBytes(p) + keys.partBytes(p)
	}, limit)
	var problem error // the earliest row's problem of all passes
	var problemOrd int64
	var absent, tableKeys, top int64
	hasTop := false
	for _, r := range runs {
		st, err := s.snapshotPass(ctx, snap, files, data, keys, rows, r[0], r[1], sch, pm)
		if err != nil {
			return err
		}
		if st.firstErr != nil && (problem == nil || st.firstOrd < problemOrd) {
			problem, problemOrd = st.firstErr, st.firstOrd
		}
		absent, tableKeys = absent+st.absent, tableKeys+st.tableKeys
		if st.hasTop && (!hasTop || st.top > top) {
			top, hasTop = st.top, true
		}
	}
	if problem != nil {
		return problem
	}
	asOf, err := s.snapshotTime(snap, files, top, hasTop)
	if err != nil {
		return err
	}
	if err := s.checkDeleteShare(decl, files, absent, tableKeys); err != nil {
		return err
	}
	names := fileNames(files)
	if err := s.quarantine(ctx, env, files, bad, loadTime, res); err != nil {
		return err
	}
	lineage := env.lineage()
	lineage.SourceFiles = names
	tx := tbl.NewTransaction(snap, delta.TxOptions{})
	setSnapshotTxns(tx, files, asOf)
	mp, err := tbl.NewMergeInParts(delta.MergeOptions{
		On:       s.cfg.Keys,
		NullSafe: true,
		WhenMatched: []delta.MergeClause{
			{Cond: delta.Eq("source."+deleteColumn, true), Action: delta.MergeDelete},
			{Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{{Action: delta.MergeInsert}},
		Tx:             tx,
		Lineage:        lineage,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	if err := pm.run(ctx, mp); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	mr, err := mp.Commit(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	countMerge(res, decl, names, mr)
	res.Notes = append(res.Notes, fmt.Sprintf("%d rows of %d keys over the memory budget (%s): worked in %d passes over spill files",
		rows.rows(), keys.rows(), ByteSize(limit*2), len(runs)))
	return nil
}

// rows is the number of rows a fanout set aside.
func (f *fanout) rows() int64 {
	var n int64
	for p := range f.files {
		n += f.partRows(p)
	}
	return n
}

// spillTableKeys is pass 1 set aside: per table row its key columns, the hash of its
// data columns, and its place (file index, row).
func (s *Ingest) spillTableKeys(ctx context.Context, dir *spillDir, snap *delta.Snapshot, data []string, limit int64) (*fanout, error) {
	sc, err := snap.Scan(ctx, scanOptions(limit, delta.ScanOptions{Columns: data, FilesOnly: true}))
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	fileIdx := map[string]int64{}
	for i, a := range snap.Files() {
		fileIdx[a.Path] = int64(i)
	}
	var out *fanout
	var h rowHashes
	var parts []uint16
	for sc.Next() {
		rec := sc.RecordBatch()
		file, first, ok := sc.Position()
		if !ok {
			return nil, fmt.Errorf("the scan of the table lost the positions of its rows")
		}
		keyCols := columnsByName(rec.Schema(), s.cfg.Keys)
		n := int(rec.NumRows())
		if err := h.hash(rec, keyCols, s.hashedColumns(rec.Schema(), data), nil); err != nil {
			return nil, err
		}
		lo, hi := h.lo, h.hi
		parts = slices.Grow(parts[:0], n)[:n]
		var buf []byte
		for i := range n {
			if buf, err = keyed.AppendKey(buf[:0], rec, keyCols, i); err != nil {
				return nil, err
			}
			parts[i] = keyRange(buf)
		}
		fields := make([]arrow.Field, 0, len(keyCols)+4)
		cols := make([]arrow.Array, 0, cap(fields))
		for _, c := range keyCols {
			fields, cols = append(fields, rec.Schema().Field(c)), append(cols, rec.Column(c))
		}
		rows := make([]int64, n)
		place := make([]int64, n)
		los, his := make([]int64, n), make([]int64, n)
		for i := range n {
			rows[i], place[i], los[i], his[i] = first+int64(i), fileIdx[file.Path], int64(lo[i]), int64(hi[i])
		}
		extra := []arrow.Array{int64Array(los), int64Array(his), int64Array(place), int64Array(rows)}
		for _, name := range []string{"_orchestrator_lo", "_orchestrator_hi", "_orchestrator_file", "_orchestrator_row"} {
			fields = append(fields, arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64})
		}
		schema := arrow.NewSchema(fields, nil)
		if out == nil {
			out = newFanout(dir, schema, hashParts)
		}
		keys := array.NewRecordBatch(schema, append(cols, extra...), int64(n))
		releaseAll(extra)
		err := out.write(ctx, keys, parts)
		keys.Release()
		if err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if out == nil {
		out = newFanout(dir, nil, hashParts)
	}
	return out, out.finish()
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		a.Release()
	}
}

// spillSnapshotFiles decodes the files once and sets their rows aside with their delete
// marks, their file (index) and their order among all the files' rows.
func (s *Ingest) spillSnapshotFiles(ctx context.Context, env *Env, dir *spillDir, snap *delta.Snapshot, files []*sourceFile, loadTime time.Time, res *Result) (*fanout, []*badRecord, error) {
	st, err := s.newSnapState(snap, files, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	var out *fanout
	var bad []*badRecord
	var ord int64
	var parts []uint16
	var buf []byte
	for fi, f := range files {
		b, err := s.decodeFileWith(ctx, env, snap, f, loadTime, res, decodeExtras{columns: st.extra, lines: true}, func(rec arrow.RecordBatch) error {
			marked, err := st.mark(rec, f)
			if err != nil {
				return err
			}
			defer marked.Release()
			keyCols := columnsByName(marked.Schema(), s.cfg.Keys)
			n := int(marked.NumRows())
			parts = slices.Grow(parts[:0], n)[:n]
			fis, ords := make([]int64, n), make([]int64, n)
			for i := range n {
				if buf, err = keyed.AppendKey(buf[:0], marked, keyCols, i); err != nil {
					return fmt.Errorf("%s:%d: %w", f.Name, marked.Column(columnsByName(marked.Schema(), []string{lineColumn})[0]).(*array.Int64).Value(i), err)
				}
				parts[i], fis[i], ords[i] = keyRange(buf), int64(fi), ord+int64(i)
			}
			ord += int64(n)
			extra := []arrow.Array{int64Array(fis), int64Array(ords)}
			defer releaseAll(extra)
			fields := append(slices.Clone(marked.Schema().Fields()),
				arrow.Field{Name: "_orchestrator_file", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "_orchestrator_ord", Type: arrow.PrimitiveTypes.Int64})
			with := array.NewRecordBatch(arrow.NewSchema(fields, nil), append(slices.Clone(marked.Columns()), extra...), int64(n))
			defer with.Release()
			if out == nil {
				out = newFanout(dir, with.Schema(), hashParts)
			}
			return out.write(ctx, with, parts)
		})
		bad = append(bad, b...)
		if err != nil {
			return nil, nil, err
		}
	}
	if out == nil {
		out = newFanout(dir, nil, hashParts)
	}
	return out, bad, out.finish()
}

// snapshotPass runs passes 1 and 2 on the key hash ranges [lo, hi) and hands their
// changes to pm (sch: the MERGE source's schema); the state it returns has the pass's
// earliest problem, if any (then nothing is handed to pm).
func (s *Ingest) snapshotPass(ctx context.Context, snap *delta.Snapshot, files []*sourceFile, data []string, keys, rows *fanout, lo, hi int, sch *arrow.Schema, pm *partedMerge) (*snapState, error) {
	t, err := readTableKeys(ctx, snap, keys.files[lo:hi])
	if err != nil {
		return nil, err
	}
	t.side.withSeq = s.cfg.SequenceBy != ""
	t.side.grow(len(t.row))
	st, err := s.newSnapState(snap, files, data, t)
	if err != nil {
		return nil, err
	}
	defer func() { releaseRecords(st.kept) }()
	err = each(ctx, rows.files[lo:hi], func(rec arrow.RecordBatch) error {
		n := int(rec.NumCols())
		fi := rec.Column(n - 2).(*array.Int64)
		fields := rec.Schema().Fields()[:n-2]
		marked := array.NewRecordBatch(arrow.NewSchema(fields, nil), rec.Columns()[:n-2], rec.NumRows())
		defer marked.Release()
		return st.add(ctx, marked, int(fi.Value(0)), rec.Column(n-1).(*array.Int64))
	})
	if err != nil || st.firstErr != nil {
		return st, err
	}
	st.absent, st.tableKeys = t.absent(), int64(len(t.row))
	if err := handMatched(ctx, t, st, sch, pm); err != nil {
		return nil, err
	}
	if err := handInserts(ctx, st, pm); err != nil {
		return nil, err
	}
	return st, nil
}

// readTableKeys is pass 1 read back from the spill files of a pass's key ranges (as
// spillTableKeys set them aside): the table's keys with their hashes and places. A key
// held twice by the table has its later rows in extra.
func readTableKeys(ctx context.Context, snap *delta.Snapshot, spilled []*spillFile) (*snapTable, error) {
	t := &snapTable{index: keyindex.New(1 << 10)}
	for _, a := range snap.Files() {
		t.files = append(t.files, a.Path)
	}
	var block keyindex.Block
	err := each(ctx, spilled, func(rec arrow.RecordBatch) error {
		n, k := int(rec.NumRows()), int(rec.NumCols())-4
		block.Reset()
		for i := range n {
			var err error
			if block.Buf, err = appendKey(block.Buf, rec, allColumns(k), allColumns(k), i); err != nil {
				return err
			}
			block.End()
		}
		t.index.AddBlock(&block)
		los, his := rec.Column(k).(*array.Int64), rec.Column(k+1).(*array.Int64)
		file, row := rec.Column(k+2).(*array.Int64), rec.Column(k+3).(*array.Int64)
		for i, id := range block.IDs {
			if int(id) < len(t.row) {
				t.extra = append(t.extra, rowAt{file: t.files[file.Value(i)], row: row.Value(i)})
				continue
			}
			t.hash = append(t.hash, dataHash{uint64(los.Value(i)), uint64(his.Value(i))})
			t.file, t.row = append(t.file, int32(file.Value(i))), append(t.row, row.Value(i))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// handMatched hands a pass's updates (kept rows of table keys) and deletes (rows of
// schema sch that only mark them) to pm, matched by place, as loadSnapshot does.
func handMatched(ctx context.Context, t *snapTable, st *snapState, sch *arrow.Schema, pm *partedMerge) error {
	var keep []int32
	var at []rowAt
	var deletes []rowAt
	for id := range t.row {
		sd, place := &t.side, t.rowAt(id)
		switch k := &sd.keys[id]; {
		case !k.seen || k.del:
			deletes = append(deletes, place)
		case k.kept >= 0:
			keep, at = append(keep, k.kept), append(at, place)
		}
	}
	deletes = append(deletes, t.extra...)
	if len(keep)+len(deletes) == 0 {
		return nil
	}
	recs, err := gatherKept(ctx, st.kept, keep)
	if err != nil {
		return err
	}
	if len(deletes) > 0 {
		recs = append(recs, deleteRows(sch, len(deletes)))
	}
	src, err := concatRecords(recs)
	releaseRecords(recs)
	if err != nil {
		return err
	}
	defer src.Release()
	at = append(at, deletes...)
	files, places := make([]string, len(at)), make([]int64, len(at))
	for i, a := range at {
		files[i], places[i] = a.file, a.row
	}
	return pm.addMatched(ctx, src, nil, files, places)
}

// handInserts hands a pass's new keys' kept rows to pm, to insert in the order their
// keys came.
func handInserts(ctx context.Context, st *snapState, pm *partedMerge) error {
	var ins []int32
	var ords []int64
	for id, k := range st.fresh.keys {
		if !k.del && k.kept >= 0 {
			ins, ords = append(ins, k.kept), append(ords, st.freshOrd[id])
		}
	}
	if len(ins) == 0 {
		return nil
	}
	recs, err := gatherKept(ctx, st.kept, ins)
	if err != nil {
		return err
	}
	src, err := concatRecords(recs)
	releaseRecords(recs)
	if err != nil {
		return err
	}
	defer src.Release()
	return pm.addInserts(ctx, src, ords, make([]int64, len(ords)))
}
