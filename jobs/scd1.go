package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
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
	res, err := timed(ctx, env, s.Kind(), s.name, func() (Result, error) { return s.run(ctx, env) })
	res.Expectations = env.rowResults()
	return res, err
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
	if err := f.byteKeys(s.cfg.Keys); err != nil {
		return res, err
	}
	if err := env.startRowChecks(s.name, f.dstDecl.Name); err != nil {
		return res, err
	}
	srcDecl, dstDecl, dst, dstSnap := f.srcDecl, f.dstDecl, f.dst, f.dstSnap
	latest := f.srcSnap.Version()
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
	es, err := newEventSource(l, f.srcSnap.Schema(), s.cfg.SequenceBy, s.cfg.DeleteWhen, s.cfg.Where, true)
	if err != nil {
		return res, fmt.Errorf("source %s: %w", srcDecl.Name, err)
	}
	es.withChecks(env.rows, srcDecl.Name)
	// The keyed run, as scd2_merge's: the batch read once, the target, the passes (one
	// in memory), ONE commit.
	kr, end := env.keyedRun(s.cfg.MemoryBudget)
	defer end()
	live := newSCDBatch(l, s.cfg.SourceChanges)
	live.cost, live.byteFactor = scd1EventCost, 3
	batch := kr.NewBatch(live, keyed.BatchOptions{Keys: l.spec.keys})
	rd := newEventReader(l, s.cfg.SequenceBy == "", batch.Add)
	log, err := readMergeBatch(ctx, env, mergeOf{s.Kind(), s.cfg.Target, s.cfg.Source, s.AppID(), s.cfg.SourceChanges, nil}, f, batch, live, rd, es, merged, last, &res)
	if err != nil {
		return res, err
	}
	// The events the row checks set aside go to the quarantine table first: a crash
	// before the merge's commit reruns the merge, which quarantines them no more.
	if err := quarantineEvents(ctx, env, s.cfg.QuarantineTable, s.AppID()+"#quarantine", es.quarantined, latest, &res); err != nil {
		return res, err
	}
	noteHeld("scd1_merge", batch)
	wantAll := !s.cfg.SourceChanges && l.spec.deletes != "ignore"
	spec := keyed.TargetSpec{ReadAhead: true, Select: func(rec arrow.RecordBatch) ([]int, func(int) bool, error) {
		cols, err := sourceColumns(rec.Schema(), l)
		if err != nil {
			return nil, nil, err
		}
		if wantAll {
			return l.keyColumns(cols), func(int) bool { return true }, nil
		}
		return l.keyColumns(cols), nil, nil
	}}
	if !batch.Spilled() && !wantAll {
		if spec.Filter, err = live.keyFilter(); err != nil {
			return res, err
		}
	}
	target := keyed.NewTarget(dstSnap, spec)
	app, err := log.startRun(latest, batch)
	if err != nil {
		return res, err
	}
	defer app.abort()
	mp, err := dst.NewMergeInParts(s.mergeOptions(env, dst, dstSnap, l, latest, s.newWatermark(dstSnap, log, rd.top, rd.hasTop)))
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	srcSchema, err := scd1SourceSchema(l)
	if err != nil {
		return res, err
	}
	tableSchema, err := delta.ArrowSchema(dstSnap.Schema())
	if err != nil {
		return res, err
	}
	sink, err := batch.Sink(keyed.SinkOptions{Merge: mp, Snap: dstSnap, Source: srcSchema, Table: tableSchema})
	if err != nil {
		return res, err
	}
	defer sink.Release()
	passes, err := batch.Passes(ctx, 0, target, func(bb, br, tb, tr int64) int64 { return 3*bb + br*scd1EventCost + 2*tb + tr*scd1RowCost },
		func(ctx context.Context, p *keyed.Pass) error {
			return s.pass(ctx, p, l, log, dstSnap, wantAll, app, sink, &res)
		})
	if err != nil {
		return res, err
	}
	if app != nil {
		if err := app.commit(ctx, env, nil); err != nil {
			return res, err
		}
	}
	mr, err := sink.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	if batch.Spilled() {
		res.Notes = append(res.Notes, fmt.Sprintf("%d events of %s over the memory budget (%s): worked in %d passes over spill files",
			batch.Rows(), srcDecl.Name, ByteSize(env.budget(s.cfg.MemoryBudget)), passes))
	}
	s.count(&res, dstDecl, mr)
	return res, nil
}

// scd1Batch is a pass's events by key (encoded), its keys in first-seen order (so that
// errors do not depend on map order) and each one's order in the batch.
type scd1Batch struct {
	events map[string][]scdEvent
	order  []string
	keyOrd map[string]int64
}

// scd1EventCost is what an event of an scd1_merge costs in memory at its peak besides
// its values (which a pass holds three times: its record, its Go row, its MERGE row):
// the event, its index and map entries, its stored row, its log row; measured
// (BenchmarkHeldRowCost): about 1,290 bytes an event with its values. scd1RowCost is
// what a stored row costs besides its values.
const (
	scd1EventCost = 1150
	scd1RowCost   = 200
)

// scd1Events are the events of a pass's batch by key.
func scd1Events(b *scdBatch) (*scd1Batch, error) {
	out := &scd1Batch{events: make(map[string][]scdEvent, len(b.head)), keyOrd: make(map[string]int64, len(b.head))}
	for id := range b.head {
		evs, err := b.events(int32(id))
		if err != nil {
			return nil, err
		}
		k := string(b.keys.Key(int32(id)))
		out.order = append(out.order, k)
		out.events[k], out.keyOrd[k] = evs, b.keyOrd[id]
	}
	return out, nil
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
			le := loggedEvent{key: []byte(k), keyHash: keyed.Hash([]byte(k)), eventFact: eventFact{seq: e.seq, del: e.delete, phys: e.phys, commit: e.commit, rowSeq: e.rowSeq}}
			if !e.delete {
				le.hash = rowHash(e.row)
			}
			out = append(out, le)
		}
	}
	return out
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
			{Cond: expr.Eq("source."+scdActionColumn, "delete"), Action: delta.MergeDelete},
			{Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{
			{Cond: expr.Ne("source."+scdActionColumn, "delete"), Action: delta.MergeInsert},
		},
		Txn:     &delta.Txn{AppID: s.AppID(), Version: sourceVersion},
		Tx:      tx,
		Lineage: env.lineage(),
	}
}
