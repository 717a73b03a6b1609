package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
)

// SCD1Merge keeps a table equal to the latest state of each key (an upsert, no history),
// on the same machinery as scd2_merge: the source is a table's change feed since the last
// merged version (source_changes) or its snapshot; several events for a key in a batch
// reduce to the last in sequence_by order (a delete wins at equal sequence); rows equal
// to the stored row are skipped, so unchanged rows never appear in the target's change
// feed. With deletes: delete, deleted keys (change feed deletes, or keys missing from a
// snapshot source) are deleted. One MERGE on the keys, with the batch txn (appId
// "scd1_merge:<target>:<source>") in the same commit.
type SCD1Merge struct {
	name string
	cfg  *SCD1Config
}

// NewSCD1Merge returns the stage for a validated config.
func NewSCD1Merge(name string, cfg *SCD1Config) *SCD1Merge { return &SCD1Merge{name: name, cfg: cfg} }

// Name implements Stage.
func (s *SCD1Merge) Name() string { return s.name }

// Kind implements Stage.
func (s *SCD1Merge) Kind() Kind { return KindSCD1Merge }

// AppID is the txn appId under which the stage records the last merged source version.
func (s *SCD1Merge) AppID() string { return "scd1_merge:" + s.cfg.Target + ":" + s.cfg.Source }

// Run implements Stage.
func (s *SCD1Merge) Run(ctx context.Context, env *Env) (Result, error) {
	return timed(ctx, env, s.Kind(), s.name, func() (Result, error) { return s.run(ctx, env) })
}

// layout: every target column but identity columns is data; keys index into it.
func (s *SCD1Merge) layout(target *delta.StructType) (*scdLayout, error) {
	l := &scdLayout{spec: scdSpec{deletes: "ignore", end: SeqMax}}
	if s.cfg.Deletes == "delete" {
		l.spec.deletes = "close"
	}
	for _, f := range target.Fields {
		if !delta.IsIdentity(f) {
			l.data = append(l.data, f)
		}
	}
	for _, k := range s.cfg.Keys {
		idx := -1
		for i, f := range l.data {
			if strings.EqualFold(f.Name, k) {
				idx = i
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("target has no key column %s", k)
		}
		l.spec.keys = append(l.spec.keys, idx)
	}
	return l, nil
}

// watermarkID is the txn appId under which the stage records, for a change feed source,
// the highest sequence value it has merged (see SCD2Merge.watermarkID).
func (s *SCD1Merge) watermarkID() string { return s.AppID() + "#max_sequence" }

func (s *SCD1Merge) run(ctx context.Context, env *Env) (Result, error) {
	var res Result
	f, err := env.openFlow(ctx, s.cfg.Source, s.cfg.Target)
	if err != nil {
		return res, err
	}
	srcDecl, dstDecl, src, dst, srcSnap, dstSnap := f.srcDecl, f.dstDecl, f.src, f.dst, f.srcSnap, f.dstSnap
	latest := srcSnap.Version()
	l, err := s.layout(dstSnap.Schema())
	if err != nil {
		return res, fmt.Errorf("table %s: %w", dstDecl.Name, err)
	}
	res.VersionsRead = []TableVersion{{Table: srcDecl.Name, Version: latest}}
	last, merged := dstSnap.TxnVersion(s.AppID())
	if merged && last >= latest {
		res.Notes = append(res.Notes, fmt.Sprintf("up to date: %s merged through version %d", srcDecl.Name, latest))
		return res, nil
	}
	es, err := newEventSource(l, srcSnap.Schema(), s.cfg.SequenceBy, s.cfg.DeleteWhen, s.cfg.Where, true)
	if err != nil {
		return res, fmt.Errorf("source %s: %w", srcDecl.Name, err)
	}
	budget := env.budget(s.cfg.MemoryBudget)
	defer holdBudget(budget)()
	b := newSCD1Batch(l, workingSet(budget), s.cfg.SequenceBy == "")
	var log *eventLog
	from := int64(0)
	if s.cfg.SourceChanges {
		from = last + 1
		if !merged {
			if from, err = src.ChangeDataFeedStart(ctx); err != nil {
				return res, fmt.Errorf("source %s: %w", srcDecl.Name, err)
			}
		}
		res.ChangesRead = []ChangeRange{{Table: srcDecl.Name, After: from - 1, Through: latest}}
		if log, err = openMergeLog(ctx, env, s.Kind(), s.cfg.Target, s.cfg.Source, s.AppID(), src, es, merged, last, &res); err != nil {
			return res, err
		}
		err = readChangeEvents(ctx, src, from, latest, es, b.add, &res)
	} else {
		err = readSnapshotEvents(ctx, srcSnap, es, b.add, &res)
	}
	if errors.Is(err, errOverBudget) {
		// Too large for memory: read again into spill files and work in passes.
		return s.runSpilled(ctx, env, f, l, es, log, from, workingSet(budget), res)
	}
	if err != nil {
		return res, fmt.Errorf("source %s: %w", srcDecl.Name, err)
	}
	es.noteSkipped(&res)
	stored, err := s.storedRows(ctx, dstSnap, l, b.events)
	if err != nil {
		return res, fmt.Errorf("table %s: %w", dstDecl.Name, err)
	}
	ups, dels, err := s.decide(ctx, l, b, stored, log, dstSnap, &res)
	if err != nil {
		return res, err
	}
	if log != nil {
		if err := log.append(ctx, env, scd1Logged(b.events), latest, nil); err != nil {
			return res, err
		}
	}
	upserts, deletes := make([][]any, len(ups)), make([][]any, len(dels))
	for i, c := range ups {
		upserts[i] = c.row
	}
	for i, c := range dels {
		deletes[i] = c.row
	}
	mr, err := s.apply(ctx, env, dst, dstSnap, l, upserts, deletes, latest, s.newWatermark(dstSnap, log, b.top, b.hasTop))
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	s.count(&res, dstDecl, mr)
	return res, nil
}

// errOverBudget stops reading a batch that would hold more than its memory allows.
var errOverBudget = errors.New("over the memory budget")

// scd1Batch is a batch's events by key (encoded), and its keys in first-seen order (so
// that errors do not depend on map order).
type scd1Batch struct {
	l      *scdLayout
	events map[string][]scdEvent
	order  []string
	// limit, when positive, is what the batch may hold (held, about scd1EventCost an
	// event and its values): over it, add fails with errOverBudget.
	limit, held int64
	// top is the highest sequence (the deletes of source rows count when withPhys).
	top      int64
	hasTop   bool
	withPhys bool
}

// scd1EventCost is what an event of an scd1_merge in memory costs besides its values:
// the event, its map entry and key, its stored row, its log row and its MERGE row.
const scd1EventCost = 600

func newSCD1Batch(l *scdLayout, limit int64, withPhys bool) *scd1Batch {
	return &scd1Batch{l: l, events: map[string][]scdEvent{}, limit: limit, withPhys: withPhys}
}

// add adds an event.
func (b *scd1Batch) add(e scdEvent) error {
	k := string(appendRowKey(nil, e.row, b.l.spec.keys))
	if _, ok := b.events[k]; !ok {
		b.order = append(b.order, k)
	}
	b.events[k] = append(b.events[k], e)
	if (b.withPhys || !e.phys) && (!b.hasTop || e.seq > b.top) {
		b.top, b.hasTop = e.seq, true
	}
	if b.limit > 0 {
		b.held += scd1EventCost + 2*rowBytes(e.row)
		if b.held > b.limit {
			return errOverBudget
		}
	}
	return nil
}

// rowBytes is about what a Go row's values take.
func rowBytes(row []any) int64 {
	n := int64(16 * len(row))
	for _, v := range row {
		if s, ok := v.(string); ok {
			n += int64(len(s)) + 16
		}
	}
	return n
}

// newWatermark is the watermark a batch whose highest sequence is top (ok: it has one)
// moves to (nil: it stays), for a change feed source.
func (s *SCD1Merge) newWatermark(dstSnap *delta.Snapshot, log *eventLog, top int64, ok bool) *int64 {
	watermark, hasWatermark, derived := log.derivedWatermark(dstSnap.TxnVersion(s.watermarkID()))
	if ok && s.cfg.SourceChanges && (!hasWatermark || top > watermark) {
		return &top
	}
	if derived {
		return &watermark // record what was derived
	}
	return nil
}

// count records what the MERGE did in res.
func (s *SCD1Merge) count(res *Result, dstDecl *Table, mr *delta.MergeResult) {
	res.RowsWritten = mr.NumTargetRowsInserted + mr.NumTargetRowsUpdated + mr.NumTargetRowsDeleted
	res.FilesWritten = mr.NumTargetFilesAdded
	res.BytesWritten = mr.NumTargetBytesAdded
	if mr.Committed {
		res.VersionsWritten = []TableVersion{{Table: dstDecl.Name, Version: mr.Version}}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d inserted, %d updated, %d deleted", mr.NumTargetRowsInserted, mr.NumTargetRowsUpdated, mr.NumTargetRowsDeleted))
}

// scd1Change is what a batch does to a key (encoded): an upsert of row, or a delete of
// the stored row (row).
type scd1Change struct {
	key string
	row []any
}

// decide decides each key of the batch, with its stored row and, for keys with late
// events, its logged events: the upserts (in the order the keys came) and the deletes.
// The keys of stored.all that the batch lacks (a snapshot source that deletes) are
// deletes.
func (s *SCD1Merge) decide(ctx context.Context, l *scdLayout, b *scd1Batch, stored *scd1Rows, log *eventLog, dstSnap *delta.Snapshot, res *Result) (ups, dels []scd1Change, err error) {
	events, order := b.events, b.order
	if !s.cfg.SourceChanges && l.spec.deletes != "ignore" {
		for k, row := range stored.all {
			if _, ok := events[k]; !ok {
				order = append(order, k)
				events[k] = []scdEvent{{delete: true, row: row}}
				stored.byKey[k] = row
			}
		}
	}
	// Keys with an event at or before the highest sequence merged before are decided
	// with their logged events too.
	watermark, hasWatermark, _ := log.derivedWatermark(dstSnap.TxnVersion(s.watermarkID()))
	var facts map[int][]eventFact
	lateAt := map[string]int{}
	if log != nil && hasWatermark {
		var keys [][]byte
		for _, k := range order {
			if slices.ContainsFunc(events[k], func(e scdEvent) bool { return e.seq <= watermark }) {
				lateAt[k] = len(keys)
				keys = append(keys, []byte(k))
			}
		}
		if facts, err = log.lookup(ctx, keys); err != nil {
			return nil, nil, err
		}
		if len(keys) > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d keys had late events: decided with their logged events", len(keys)))
		}
	}
	// The last event per key decides; equal rows and deletes of absent keys are no-ops;
	// a logged event that decides means the stored row stands.
	for _, k := range order {
		// A copy: the folds below reorder and overwrite what they are given, and the
		// batch's events are logged as they came once every key is decided.
		evs := slices.Clone(events[k])
		name := keyString(evs[0].row, l.spec.keys)
		if i, ok := lateAt[k]; ok {
			for j := range evs {
				if !evs[j].delete {
					evs[j].hash = rowHash(evs[j].row)
				}
			}
			for _, f := range facts[i] {
				evs = append(evs, scdEvent{seq: f.seq, delete: f.del, phys: f.phys, rowSeq: f.rowSeq, commit: f.commit, hash: f.hash, recorded: true})
			}
		}
		evs = withoutIgnoredDeletes(&l.spec, evs)
		if l.spec.physByCommit {
			evs = placePhysicalDeletes(evs)
		}
		evs, err := normalizeBatch(name, evs, l.spec.seqText)
		if err != nil {
			return nil, nil, err
		}
		if len(evs) == 0 {
			continue
		}
		e := evs[len(evs)-1]
		if e.recorded {
			continue
		}
		old, exists := stored.byKey[k]
		switch {
		case e.delete && exists:
			dels = append(dels, scd1Change{key: k, row: old})
		case !e.delete && (!exists || !rowsEqual(old, e.row)):
			ups = append(ups, scd1Change{key: k, row: e.row})
		}
	}
	return ups, dels, nil
}

// scd1Logged returns the batch's events (by encoded key) as log rows.
func scd1Logged(events map[string][]scdEvent) []loggedEvent {
	var out []loggedEvent
	for k, evs := range events {
		for _, e := range evs {
			le := loggedEvent{key: []byte(k), eventFact: eventFact{seq: e.seq, del: e.delete, phys: e.phys, commit: e.commit, rowSeq: e.rowSeq}}
			if !e.delete {
				le.hash = rowHash(e.row)
			}
			out = append(out, le)
		}
	}
	return out
}

// scd1Rows are the target's stored rows: for the keys with events, and (snapshot source
// with deletes) all of them.
type scd1Rows struct {
	byKey map[string][]any
	all   map[string][]any
}

func (s *SCD1Merge) storedRows(ctx context.Context, snap *delta.Snapshot, l *scdLayout, events map[string][]scdEvent) (*scd1Rows, error) {
	out := &scd1Rows{byKey: map[string][]any{}, all: map[string][]any{}}
	opts := delta.ScanOptions{}
	wantAll := !s.cfg.SourceChanges && l.spec.deletes != "ignore"
	if !wantAll && len(l.spec.keys) == 1 {
		if len(events) == 0 {
			return out, nil
		}
		keys := make([]any, 0, len(events))
		for _, evs := range events {
			keys = append(keys, evs[0].row[l.spec.keys[0]])
		}
		opts.Filter = delta.In(l.data[l.spec.keys[0]].Name, keys...)
	}
	sc, err := snap.Scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	for sc.Next() {
		rec := sc.RecordBatch()
		cols, err := sourceColumns(rec.Schema(), l)
		if err != nil {
			return nil, err
		}
		for i := range int(rec.NumRows()) {
			row, err := sourceRow(rec, l, i, cols)
			if err != nil {
				return nil, err
			}
			k := string(appendRowKey(nil, row, l.spec.keys))
			if _, ok := events[k]; ok {
				out.byKey[k] = row
			}
			if wantAll {
				out.all[k] = row
			}
		}
	}
	return out, sc.Err()
}

// apply writes the upserts and deletes as one MERGE on the keys with the batch txn.
// The MERGE reads snap, the version the upserts and deletes were decided on (a commit
// in between makes it conflict; Run merges again).
func (s *SCD1Merge) apply(ctx context.Context, env *Env, dst *delta.Table, snap *delta.Snapshot, l *scdLayout, upserts, deletes [][]any, sourceVersion int64, watermark *int64) (*delta.MergeResult, error) {
	schema, err := scd1SourceSchema(l)
	if err != nil {
		return nil, err
	}
	rec, err := scd1SourceRecord(schema, l, upserts, deletes)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	opts := s.mergeOptions(env, dst, snap, l, sourceVersion, watermark)
	opts.Source = []arrow.RecordBatch{rec}
	return dst.Merge(ctx, opts)
}

// scd1SourceSchema is the schema of the MERGE source rows: the data columns and the
// action.
func scd1SourceSchema(l *scdLayout) (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(l.data)+1)
	for _, f := range l.data {
		at, err := delta.ArrowType(f.Type)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: at, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: scdActionColumn, Type: arrow.BinaryTypes.String})
	return arrow.NewSchema(fields, nil), nil
}

// scd1SourceRecord builds the MERGE source rows: the upserts, then the deletes.
func scd1SourceRecord(schema *arrow.Schema, l *scdLayout, upserts, deletes [][]any) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, batch := range []struct {
		action string
		rows   [][]any
	}{{"upsert", upserts}, {"delete", deletes}} {
		for _, row := range batch.rows {
			for j, v := range row {
				if err := appendValue(b.Field(j), v); err != nil {
					return nil, fmt.Errorf("column %s: %w", l.data[j].Name, err)
				}
			}
			b.Field(len(l.data)).(*array.StringBuilder).Append(batch.action)
		}
	}
	return b.NewRecordBatch(), nil
}

// mergeOptions is the MERGE on the keys that applies a batch's upserts and deletes on
// snap (without its source), with the batch txn and the new watermark (nil: unchanged).
func (s *SCD1Merge) mergeOptions(env *Env, dst *delta.Table, snap *delta.Snapshot, l *scdLayout, sourceVersion int64, watermark *int64) delta.MergeOptions {
	on := make([]string, len(l.spec.keys))
	for i, k := range l.spec.keys {
		on[i] = l.data[k].Name
	}
	tx := dst.NewTransaction(snap, delta.TxOptions{})
	if watermark != nil {
		tx.SetTxn(s.watermarkID(), *watermark)
	}
	return delta.MergeOptions{
		On:       on,
		NullSafe: true,
		WhenMatched: []delta.MergeClause{
			{Cond: delta.Eq("source."+scdActionColumn, "delete"), Action: delta.MergeDelete},
			{Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{
			{Cond: delta.Ne("source."+scdActionColumn, "delete"), Action: delta.MergeInsert},
		},
		Txn:     &delta.Txn{AppID: s.AppID(), Version: sourceVersion},
		Tx:      tx,
		Lineage: env.lineage(),
	}
}
