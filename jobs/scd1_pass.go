package jobs

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// pass decides the keys of a pass (keyed.Pass: in memory, the whole batch as it was
// read): it reads their events and the target's rows of them (with wantAll, a snapshot
// source that deletes, every row of its key ranges), decides each key as the batch's
// last event says (decide), logs the events (app) and gives the upserts and deletes to
// the sink: each stored row of a key matched with the key's upsert or delete, by its
// place; the upserts of new keys inserted in the order the keys came.
func (s *SCD1Merge) pass(ctx context.Context, p *keyed.Pass, l *scdLayout, log *eventLog, dstSnap *delta.Snapshot, wantAll bool,
	app *logAppender, sink *keyed.Sink, res *Result) error {
	b, _ := p.Live.(*scdBatch)
	if b == nil {
		b = newSCDBatch(l, s.cfg.SourceChanges)
		if err := p.EachBatch(ctx, b.Add); err != nil {
			b.Release()
			return err
		}
	}
	defer b.Release()
	evs, err := scd1Events(b)
	if err != nil {
		return err
	}
	b.Release() // (the events hold their rows)
	stored := &scd1Rows{byKey: map[string][]any{}, all: map[string][]any{}, places: map[string][]storedPlace{}}
	defer func() { arrowx.ReleaseRecords(stored.recs) }()
	if len(evs.order) > 0 || wantAll {
		if err := p.EachTarget(ctx, func(tr keyed.TargetRecord) error { return stored.add(tr, l, evs, wantAll) }); err != nil {
			return err
		}
	}
	ups, dels, err := s.decide(ctx, l, evs, stored, log, dstSnap, res)
	if err != nil {
		return err
	}
	if app != nil {
		if err := app.add(ctx, scd1Logged(evs.events), p.Lo, p.Hi); err != nil {
			return err
		}
	}
	return s.emit(ctx, sink, l, stored, evs.keyOrd, ups, dels)
}

// scd1Rows are the target's stored rows of a pass: of the keys with events (byKey), and
// with wantAll of every key (all), each key's places and the records they are in.
type scd1Rows struct {
	byKey  map[string][]any
	all    map[string][]any
	places map[string][]storedPlace
	recs   []arrow.RecordBatch
}

// storedPlace is where a pass found a stored row: row at of its records, and its place
// in the table.
type storedPlace struct {
	at    keyed.Ref
	place keyed.Place
}

// add takes the rows of a target record that the pass needs.
func (st *scd1Rows) add(tr keyed.TargetRecord, l *scdLayout, evs *scd1Batch, wantAll bool) error {
	rec := tr.Rec
	cols, err := sourceColumns(rec.Schema(), l)
	if err != nil {
		return err
	}
	keyCols := l.keyColumns(cols)
	r := int32(len(st.recs))
	rec.Retain()
	st.recs = append(st.recs, rec)
	var buf []byte
	for i := range int(rec.NumRows()) {
		if buf, err = keyed.AppendKey(buf[:0], rec, keyCols, i); err != nil {
			return err
		}
		_, inBatch := evs.events[string(buf)]
		if !inBatch && !wantAll {
			continue
		}
		row, err := sourceRow(rec, l, i, cols)
		if err != nil {
			return err
		}
		k := string(buf)
		if inBatch {
			st.byKey[k] = row
		}
		if wantAll {
			st.all[k] = row
		}
		st.places[k] = append(st.places[k], storedPlace{at: keyed.Ref{Rec: r, Row: int32(i)}, place: tr.Place(i)})
	}
	return nil
}

// emit gives a pass's upserts and deletes to the sink: each stored row of a key matched
// with the key's upsert or delete, the upserts of new keys inserted in the order the
// keys came (keyOrd).
func (s *SCD1Merge) emit(ctx context.Context, sink *keyed.Sink, l *scdLayout, stored *scd1Rows, keyOrd map[string]int64, ups, dels []scd1Change) error {
	var matchUps, matchDels, inserts [][]any
	var at []keyed.Ref
	var places []keyed.Place
	var ords []int64
	for _, c := range ups {
		if ps := stored.places[c.key]; len(ps) > 0 {
			for _, p := range ps {
				matchUps, at, places = append(matchUps, c.row), append(at, p.at), append(places, p.place)
			}
			continue
		}
		inserts, ords = append(inserts, c.row), append(ords, keyOrd[c.key])
	}
	for _, c := range dels {
		for _, p := range stored.places[c.key] {
			matchDels, at, places = append(matchDels, c.row), append(at, p.at), append(places, p.place)
		}
	}
	if len(places) > 0 {
		src, err := scd1SourceRecord(sink.Source(), l, matchUps, matchDels)
		if err != nil {
			return err
		}
		err = sink.Matched(ctx, src, keyed.Rows{Recs: stored.recs, At: at}, places)
		src.Release()
		if err != nil {
			return err
		}
	}
	if len(inserts) == 0 {
		return nil
	}
	src, err := scd1SourceRecord(sink.Source(), l, inserts, nil)
	if err != nil {
		return fmt.Errorf("internal error: %w", err)
	}
	defer src.Release()
	return sink.Inserts(ctx, src, ords, nil)
}
