package jobs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// newEventSource says how the rows of a source with the given schema become events for
// a merge with layout l: sequence_by ("" for commit times; a timestamp or date, or with
// intOK an integer too), delete_when ("" for none). It sets the layout's sequence
// display and physical delete placement.
func newEventSource(l *scdLayout, source *delta.StructType, sequenceBy, deleteWhen, where string, intOK bool) (*eventSource, error) {
	es := &eventSource{l: l, sequenceBy: sequenceBy, timeSeq: true}
	l.spec.seqText = timestampText
	if sequenceBy != "" {
		f := source.Field(sequenceBy)
		if f == nil {
			return nil, fmt.Errorf("source has no sequence_by column %s", sequenceBy)
		}
		es.timeSeq = isSequenceType(f.Type, false)
		if !isSequenceType(f.Type, intOK) {
			want := "a timestamp or a date (it becomes valid_from)"
			if intOK {
				want = "a timestamp, a date or an integer"
			}
			return nil, fmt.Errorf("sequence_by column %s is %s; expected %s", sequenceBy, f.Type, want)
		}
		l.spec.seqText = sequenceText(f.Type)
		l.spec.physByCommit = true
	}
	if deleteWhen != "" {
		p, err := expr.Parse(deleteWhen)
		if err != nil {
			return nil, fmt.Errorf("delete_when %q: %w", deleteWhen, err)
		}
		if es.deleteWhen, err = expr.NewMatcher(p, source); err != nil {
			return nil, fmt.Errorf("delete_when %q (a predicate over the source row): %w", deleteWhen, err)
		}
		es.deleteCols = expr.Columns(p)
	}
	if where != "" {
		p, err := expr.Parse(where)
		if err != nil {
			return nil, fmt.Errorf("where %q: %w", where, err)
		}
		if es.where, err = expr.NewMatcher(p, source); err != nil {
			return nil, fmt.Errorf("where %q (a predicate over the source row): %w", where, err)
		}
		es.deleteCols = append(es.deleteCols, expr.Columns(p)...)
	}
	return es, nil
}

// noteSkipped says in res how many source rows where left out.
func (es *eventSource) noteSkipped(res *Result) {
	if es.skipped > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d source rows not merged: where does not hold for them", es.skipped))
	}
}

// admit returns the rows of a source record that the stage merges: those where holds
// (the others counted in es.skipped), each with a key; a NULL in a key column is
// refused, naming the key column, the source version (version gives a row's) and the
// row's source_file when the source has one. The record returned is rec, retained, or a
// new one.
func (es *eventSource) admit(ctx context.Context, rec arrow.RecordBatch, cols []int, version func(i int) int64) (arrow.RecordBatch, error) {
	if es.where != nil {
		keep, err := es.where.Match(rec)
		if err != nil {
			return nil, fmt.Errorf("where: %w", err)
		}
		var rows []int32
		for i, ok := range keep {
			if ok {
				rows = append(rows, int32(i))
			}
		}
		if len(rows) < int(rec.NumRows()) {
			es.skipped += rec.NumRows() - int64(len(rows))
			if rec, err = arrowx.GatherRows(ctx, rec, rows); err != nil {
				return nil, err
			}
			defer rec.Release()
		}
	}
	// A row's version is read from the record as it is now (where and the checks may
	// have left rows out), when it carries one.
	versionAt := func(r arrow.RecordBatch, i int) int64 {
		if idx := r.Schema().FieldIndices(delta.CommitVersionColumn); len(idx) == 1 {
			if vs, ok := r.Column(idx[0]).(*array.Int64); ok {
				return vs.Value(i)
			}
		}
		return version(i)
	}
	if es.checks != nil {
		subject, err := es.upserts(rec)
		if err != nil {
			return nil, err
		}
		at := func(i int) string {
			where := fmt.Sprintf("%s version %d", es.name, versionAt(rec, i))
			if idx := rec.Schema().FieldIndices("source_file"); len(idx) == 1 && rec.Column(idx[0]).IsValid(i) {
				where += ", row from " + rec.Column(idx[0]).ValueStr(i)
			}
			return where
		}
		kept, bad, err := es.checks.keep(rec, at, subject)
		if err != nil {
			return nil, err
		}
		for _, b := range bad {
			es.quarantined = append(es.quarantined, quarantinedEvent{version: versionAt(rec, b.row), rec: b})
		}
		rec = kept
		defer rec.Release()
	}
	for _, k := range es.l.spec.keys {
		col := rec.Column(cols[k])
		if col.NullN() == 0 {
			continue
		}
		for i := range int(rec.NumRows()) {
			if !col.IsNull(i) {
				continue
			}
			where := fmt.Sprintf("version %d", versionAt(rec, i))
			if idx := rec.Schema().FieldIndices("source_file"); len(idx) == 1 && rec.Column(idx[0]).IsValid(i) {
				where += ", row from " + rec.Column(idx[0]).ValueStr(i)
			}
			name := es.l.data[k].Name
			return nil, fmt.Errorf("%s: key column %s is NULL; a merge key must have a value. Declare %s nullable: false on the source table (its ingest then fails on, skips or quarantines such rows), or pass such rows with where: \"%s IS NOT NULL\" on this stage",
				where, name, name, name)
		}
	}
	rec.Retain()
	return rec, nil
}

// sequenceText shows sequence values (microseconds for timestamps and dates, as
// seqValue reads them) as a column of type t shows them.
func sequenceText(t delta.DataType) func(int64) string {
	p, _ := t.(*delta.PrimitiveType)
	switch {
	case p == nil:
	case p.Name == delta.TypeDate:
		return func(v int64) string { return time.UnixMicro(v).UTC().Format(time.DateOnly) }
	case p.Name == delta.TypeTimestampNTZ:
		return func(v int64) string { return time.UnixMicro(v).UTC().Format("2006-01-02T15:04:05.999999") }
	case p.Name == delta.TypeTimestamp:
		return timestampText
	}
	return func(v int64) string { return fmt.Sprint(v) }
}

// isSequenceType reports whether a column of type t can order events.
func isSequenceType(t delta.DataType, intOK bool) bool {
	p, ok := t.(*delta.PrimitiveType)
	if !ok {
		return false
	}
	switch p.Name {
	case delta.TypeTimestamp, delta.TypeTimestampNTZ, delta.TypeDate:
		return true
	case delta.TypeLong, delta.TypeInteger, delta.TypeShort, delta.TypeByte:
		return intOK
	}
	return false
}

func timestampText(v int64) string {
	return time.UnixMicro(v).UTC().Format(time.RFC3339Nano)
}

// openMergeLog opens the event log of a merge from src's change feed. A log made now
// for a dimension merged before is first filled from the source's change feed through
// the last merged version, when that is still there; else it holds the events from
// now on, and says so (complete).
func openMergeLog(ctx context.Context, env *Env, kind Kind, target, source, appID string, src *delta.Table, es *eventSource, merged bool, last int64, res *Result) (*eventLog, error) {
	log, err := openEventLog(ctx, env, kind, target, source, appID)
	if err != nil {
		return nil, err
	}
	if _, ok := log.snap.TxnVersion(eventLogCompleteID); ok {
		return log, nil
	}
	complete := !merged
	var events []loggedEvent
	if merged {
		events, err = changeFeedEvents(ctx, src, es, last)
		switch {
		case err == nil:
			complete = true
			res.Notes = append(res.Notes, fmt.Sprintf("event log %s filled with the %d events merged before", log.path, len(events)))
		case isGone(err):
			events = nil
			res.Notes = append(res.Notes, fmt.Sprintf("event log %s starts now: the change feed of %s before version %d is gone (%v)", log.path, source, last+1, err))
		default:
			return nil, fmt.Errorf("fill event log %s from the change feed of %s: %w", log.path, source, err)
		}
	}
	through := last
	if !merged {
		through = -1
	}
	if err := log.append(ctx, env, events, through, &complete); err != nil {
		return nil, err
	}
	log, err = openEventLogAgain(ctx, log)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		if (!e.phys || es.sequenceBy == "") && (log.filledMax == nil || e.seq > *log.filledMax) {
			seq := e.seq
			log.filledMax = &seq
		}
	}
	return log, nil
}

// openEventLogAgain reads the log's snapshot after a commit of its own.
func openEventLogAgain(ctx context.Context, log *eventLog) (*eventLog, error) {
	snap, err := log.tbl.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("event log %s: %w", log.path, err)
	}
	log.snap = snap
	return log, nil
}

// changeFeedEvents reads the events of src's change feed from its start through
// version to, as log rows.
func changeFeedEvents(ctx context.Context, src *delta.Table, es *eventSource, to int64) ([]loggedEvent, error) {
	from, err := src.ChangeDataFeedStart(ctx)
	if err != nil {
		return nil, err
	}
	var out []loggedEvent
	var read Result
	defer func(n int64) { es.skipped = n }(es.skipped) // the batch's count, not the log's
	// The events merged before are not judged again: the dimension holds them, so the
	// log must too (a row check dropping one here would lose it from later refolds).
	defer func(c *rowChecks) { es.checks = c }(es.checks)
	es.checks = nil
	var buf []byte
	err = eachChange(ctx, src, from, to, es, nil, func(rec arrow.RecordBatch, cols []int, ev *changeEvents) error {
		keyCols := es.l.keyColumns(cols)
		for i := range ev.seqs {
			key, err := keyed.AppendKey(nil, rec, keyCols, i)
			if err != nil {
				return err
			}
			e := loggedEvent{key: key, keyHash: keyed.Hash(key), eventFact: eventFact{seq: ev.seqs[i], del: ev.dels[i], phys: ev.phys[i], commit: ev.commits[i], rowSeq: ev.rowSeqs[i]}}
			if !e.del {
				if buf, err = keyed.AppendKey(buf[:0], rec, cols, i); err != nil {
					return err
				}
				e.hash = xxhash.Sum64(buf)
				if e.type1, err = recordType1(es.l, rec, cols, i); err != nil {
					return err
				}
			}
			out = append(out, e)
		}
		return nil
	}, &read)
	return out, err
}

// logged returns the batch's events as log rows (keys point into the batch's index),
// in the log's order (sortLogged): keys by hash, each key's events sorted. (The events
// are read in key id order, the order of the records, then moved in the keys' order.)
func (b *scdBatch) logged() []loggedEvent {
	byID := make([]loggedEvent, 0, len(b.evSeq))
	start := make([]int32, len(b.head)+1)
	type hashed struct {
		h  int64
		id int32
	}
	ids := make([]hashed, len(b.head))
	var buf []byte
	for id := range b.head {
		key := b.keys.Key(int32(id))
		kh := keyed.Hash(key)
		ids[id] = hashed{kh, int32(id)}
		first := len(byID)
		for ev := b.head[id]; ev >= 0; ev = b.evPrev[ev] {
			e := loggedEvent{key: key, keyHash: kh, eventFact: eventFact{seq: b.evSeq[ev], del: b.evDel[ev]}}
			if b.evCommit != nil {
				e.commit, e.phys, e.rowSeq = b.evCommit[ev], b.evPhys[ev], b.evRowSeq[ev]
			}
			if !e.del {
				r := b.evRec[ev]
				var err error
				if buf, err = keyed.AppendKey(buf[:0], b.recs[r], b.cols[r], int(b.evRow[ev])); err == nil {
					e.hash = xxhash.Sum64(buf)
				}
				e.type1, _ = recordType1(b.l, b.recs[r], b.cols[r], int(b.evRow[ev]))
			}
			byID = append(byID, e)
		}
		if len(byID)-first > 1 {
			sortLogged(byID[first:])
		}
		start[id+1] = int32(len(byID))
	}
	slices.SortFunc(ids, func(x, y hashed) int {
		if c := cmp.Compare(x.h, y.h); c != 0 {
			return c
		}
		return bytes.Compare(b.keys.Key(x.id), b.keys.Key(y.id))
	})
	out := make([]loggedEvent, 0, len(byID))
	for _, k := range ids {
		out = append(out, byID[start[k.id]:start[k.id+1]]...)
	}
	return out
}

// recordType1 encodes the type 1 values of row i of a source record (cols maps the
// layout's data columns to it) for the event log.
func recordType1(l *scdLayout, rec arrow.RecordBatch, cols []int, i int) (string, error) {
	b, err := appendType1(nil, make([]any, len(l.spec.type1)), l, rec, cols, i)
	return string(b), err
}

// appendType1 appends row i's type 1 values as recordType1 encodes them to dst (vals:
// room for them); on an error dst is returned as it was.
func appendType1(dst []byte, vals []any, l *scdLayout, rec arrow.RecordBatch, cols []int, i int) ([]byte, error) {
	if l.spec.ignoreNulls {
		return appendType1Mask(dst, vals, l, rec, cols, i)
	}
	if len(l.spec.type1) == 0 {
		return dst, nil
	}
	start := len(dst)
	for _, c := range l.spec.type1 {
		// (strings and longs straight from their arrays, as appendValues encodes them)
		switch a := rec.Column(cols[c]).(type) {
		case *array.String:
			if a.IsValid(i) {
				v := a.Value(i)
				dst = append(binary.AppendUvarint(append(dst, 1), uint64(len(v))), v...)
				continue
			}
		case *array.Int64:
			if a.IsValid(i) {
				dst = binary.AppendVarint(append(dst, 2), a.Value(i))
				continue
			}
		}
		v, err := keyed.Value(rec.Column(cols[c]), i)
		if err != nil {
			return dst[:start], err
		}
		vals[0] = v
		dst = appendValues(dst, vals[:1])
	}
	return dst, nil
}

func allColumns(n int) []int {
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	return cols
}

// isGone reports whether err says a change feed range is no longer there (vacuumed
// files or cleaned-up log).
func isGone(err error) bool {
	return errors.Is(err, objectstore.ErrNotExist) || errors.Is(err, delta.ErrVersionCleaned)
}
