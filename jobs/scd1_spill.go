package jobs

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
)

// scd1_merge over its memory budget, as scd2_merge does it (scd2_spill.go): the batch is
// read again into spill files by key hash range, the target's rows of the batch's keys
// (all of them for a snapshot source that deletes) set aside the same way with their
// places, and each pass decides its keys as the in-memory path does (decide), logs their
// events and hands its upserts and deletes to a partedMerge: the rows of stored keys
// matched by place, the new keys inserted in the order they came. One commit, the same
// rows, change feed and event log.

// scd1RowCost is what a stored row in a pass costs besides its values.
const scd1RowCost = 200

// runSpilled runs a batch too large for memory (limit: the working set of a pass).
func (s *SCD1Merge) runSpilled(ctx context.Context, env *Env, f *flow, l *scdLayout, es *eventSource, log *eventLog, from, limit int64, res Result) (Result, error) {
	srcDecl, dstDecl, dst, dstSnap := f.srcDecl, f.dstDecl, f.dst, f.dstSnap
	latest := f.srcSnap.Version()
	sp, err := newSCDSpill(env, l, s.cfg.SequenceBy == "", limit)
	if err != nil {
		return res, err
	}
	defer sp.remove()
	b := newSCDBatch(l)
	defer b.Release()
	b.spill = sp
	res.RowsRead, es.skipped = 0, 0
	if s.cfg.SourceChanges {
		err = b.readChanges(ctx, f.src, from, latest, es, &res)
	} else {
		err = b.readSnapshot(ctx, f.srcSnap, es, &res)
	}
	if err != nil {
		return res, fmt.Errorf("source %s: %w", srcDecl.Name, err)
	}
	es.noteSkipped(&res)
	if sp.events == nil { // an empty batch
		sp.events = newFanout(sp.dir, nil, hashParts)
	}
	if err := sp.events.finish(); err != nil {
		return res, err
	}
	wantAll := !s.cfg.SourceChanges && l.spec.deletes != "ignore"
	target, err := sp.spillTarget(ctx, dstSnap, func(rec arrow.RecordBatch) ([]int, error) { return sourceColumns(rec.Schema(), l) },
		func(arrow.RecordBatch, int) bool { return wantAll })
	if err != nil {
		return res, fmt.Errorf("table %s: %w", dstDecl.Name, err)
	}
	srcSchema, err := scd1SourceSchema(l)
	if err != nil {
		return res, err
	}
	pm, err := newPartedMerge(sp.dir, dstSnap, srcSchema, true, limit/4)
	if err != nil {
		return res, err
	}
	var app *logAppender
	if log != nil {
		if app, err = log.startAppend(latest); err != nil {
			return res, err
		}
		if app != nil {
			app.stream, app.chunk = true, int(min(max(limit/2048, 4096), 1<<16))
			defer app.abort()
		}
	}
	runs := passes(func(p int) int64 {
		return 2*sp.events.partBytes(p) + sp.events.partRows(p)*scd1EventCost + 2*target.partBytes(p) + target.partRows(p)*scd1RowCost
	}, limit)
	for i, r := range runs {
		reportPass(env, i+1, len(runs))
		if err := s.pass(ctx, sp, target, r[0], r[1], l, log, dstSnap, app, pm, &res); err != nil {
			return res, err
		}
	}
	if app != nil {
		if err := app.commit(ctx, env, nil); err != nil {
			return res, err
		}
	}
	mp, err := dst.NewMergeInParts(s.mergeOptions(env, dst, dstSnap, l, latest, s.newWatermark(dstSnap, log, sp.top, sp.hasTop)))
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	if err := pm.run(ctx, mp); err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	mr, err := mp.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d events of %s over the memory budget (%s): worked in %d passes over spill files",
		sp.n, srcDecl.Name, ByteSize(limit*2), len(runs)))
	s.count(&res, dstDecl, mr)
	return res, nil
}

// storedPlace is where a pass found a stored row: its record among the pass's target
// records, its row there, and its place in the table.
type storedPlace struct {
	rec, row int
	file     string
	at       int64
}

// pass decides the keys of the hash ranges [lo, hi).
func (s *SCD1Merge) pass(ctx context.Context, sp *scdSpill, target *fanout, lo, hi int, l *scdLayout, log *eventLog, dstSnap *delta.Snapshot,
	app *logAppender, pm *partedMerge, res *Result) error {
	b, keyOrd, err := readPassEvents(ctx, sp, sp.events.files[lo:hi], l)
	if err != nil {
		return err
	}
	wantAll := !s.cfg.SourceChanges && l.spec.deletes != "ignore"
	stored, places, recs, err := readPassTarget(ctx, target.files[lo:hi], l, dstSnap, b, wantAll)
	defer func() { releaseRecords(recs) }()
	if err != nil {
		return err
	}
	ups, dels, err := s.decide(ctx, l, b, stored, log, dstSnap, res)
	if err != nil {
		return err
	}
	if app != nil {
		if err := app.add(ctx, scd1Logged(b.events), lo, hi); err != nil {
			return err
		}
	}
	return s.emit(ctx, pm, l, recs, places, keyOrd, ups, dels)
}

// readPassEvents reads a pass's events back from the spill files of its ranges into a
// batch, and per key the order of its first event in the run.
func readPassEvents(ctx context.Context, sp *scdSpill, spilled []*spillFile, l *scdLayout) (*scd1Batch, map[string]int64, error) {
	b := newSCD1Batch(l, 0, sp.withPhys)
	keyOrd := map[string]int64{}
	ncol := len(l.data)
	err := each(ctx, spilled, func(rec arrow.RecordBatch) error {
		cols, err := sourceColumns(rec.Schema(), l)
		if err != nil {
			return err
		}
		seqs, ords := rec.Column(ncol).(*array.Int64), rec.Column(ncol+5).(*array.Int64)
		dels, phys := rec.Column(ncol+1).(*array.Boolean), rec.Column(ncol+2).(*array.Boolean)
		rowSeqs, commits := rec.Column(ncol+3).(*array.Int64), rec.Column(ncol+4).(*array.Int64)
		for i := range int(rec.NumRows()) {
			row, err := sourceRow(rec, l, i, cols)
			if err != nil {
				return err
			}
			e := scdEvent{seq: seqs.Value(i), delete: dels.Value(i), row: row}
			if sp.changeFeed {
				e.phys, e.rowSeq, e.commit = phys.Value(i), rowSeqs.Value(i), commits.Value(i)
			}
			if err := b.add(e); err != nil {
				return err
			}
			if k := b.order[len(b.order)-1]; len(keyOrd) < len(b.order) {
				keyOrd[k] = ords.Value(i)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return b, keyOrd, nil
}

// readPassTarget reads back the target's rows of a pass's ranges (from their spill
// files): the stored rows of the batch's keys (and with wantAll of every key) and their
// places. recs holds the rows, which the places point into, until the caller releases
// them (also on an error).
func readPassTarget(ctx context.Context, spilled []*spillFile, l *scdLayout, dstSnap *delta.Snapshot, b *scd1Batch, wantAll bool) (stored *scd1Rows, places map[string][]storedPlace, recs []arrow.RecordBatch, err error) {
	stored = &scd1Rows{byKey: map[string][]any{}, all: map[string][]any{}}
	places = map[string][]storedPlace{}
	files := dstSnap.Files()
	table, err := delta.ArrowSchema(dstSnap.Schema())
	if err != nil {
		return nil, nil, nil, err
	}
	err = each(ctx, spilled, func(rec arrow.RecordBatch) error {
		tbl, at := targetPlace(rec, table, files)
		recs = append(recs, tbl)
		cols, err := sourceColumns(tbl.Schema(), l)
		if err != nil {
			return err
		}
		for i := range int(tbl.NumRows()) {
			row, err := sourceRow(tbl, l, i, cols)
			if err != nil {
				return err
			}
			k := string(appendRowKey(nil, row, l.spec.keys))
			_, inBatch := b.events[k]
			if inBatch {
				stored.byKey[k] = row
			}
			if wantAll {
				stored.all[k] = row
			}
			if inBatch || wantAll {
				file, pos := at(i)
				places[k] = append(places[k], storedPlace{rec: len(recs) - 1, row: i, file: file, at: pos})
			}
		}
		return nil
	})
	return stored, places, recs, err
}

// emit hands a pass's upserts and deletes to pm: each stored row of a key matched with
// the key's upsert or delete, the upserts of new keys inserted in the order they came.
func (s *SCD1Merge) emit(ctx context.Context, pm *partedMerge, l *scdLayout, recs []arrow.RecordBatch, places map[string][]storedPlace,
	keyOrd map[string]int64, ups, dels []scd1Change) error {
	var matchUps, matchDels, inserts [][]any
	var at []storedPlace
	var ords []int64
	for _, c := range ups {
		if ps := places[c.key]; len(ps) > 0 {
			for _, p := range ps {
				matchUps, at = append(matchUps, c.row), append(at, p)
			}
			continue
		}
		inserts, ords = append(inserts, c.row), append(ords, keyOrd[c.key])
	}
	for _, c := range dels {
		for _, p := range places[c.key] {
			matchDels, at = append(matchDels, c.row), append(at, p)
		}
	}
	if len(at) > 0 {
		src, err := scd1SourceRecord(pm.source, l, matchUps, matchDels)
		if err != nil {
			return err
		}
		defer src.Release()
		held, err := gatherPlaces(ctx, recs, at)
		if err != nil {
			return err
		}
		defer held.Release()
		files, rows := make([]string, len(at)), make([]int64, len(at))
		for i, p := range at {
			files[i], rows[i] = p.file, p.at
		}
		if err := pm.addMatched(ctx, src, held, files, rows); err != nil {
			return err
		}
	}
	if len(inserts) > 0 {
		src, err := scd1SourceRecord(pm.source, l, inserts, nil)
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

// gatherPlaces gathers the rows at the given places of recs, in that order, as one
// record.
func gatherPlaces(ctx context.Context, recs []arrow.RecordBatch, at []storedPlace) (arrow.RecordBatch, error) {
	var parts []arrow.RecordBatch
	defer func() { releaseRecords(parts) }()
	for lo := 0; lo < len(at); {
		hi := lo
		var rows []int32
		for hi < len(at) && at[hi].rec == at[lo].rec {
			rows = append(rows, int32(at[hi].row))
			hi++
		}
		g, err := delta.GatherRows(ctx, recs[at[lo].rec], rows)
		if err != nil {
			return nil, err
		}
		parts = append(parts, g)
		lo = hi
	}
	return concatRecords(parts)
}
