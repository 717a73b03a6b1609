package jobs

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// SCD2Merge maintains a type 2 slowly changing dimension (STAGES.md, scd2_merge): each
// change of a key's tracked columns closes the key's current row at the change's sequence
// value and adds a new current row; late events split the interval they fall in; deletes
// close (or tombstone) the current row; type 1 columns are overwritten in place.
//
// The source is a table's change feed since the last merged version (source_changes) or
// its snapshot, compared with the dimension's current rows. The stage reads the
// dimension's rows for the keys in the batch, folds the batch into them (scd2_core.go),
// and applies the result as ONE Delta MERGE on (keys, valid_from): closed and changed
// rows are updated in place, new versions inserted with a generated surrogate key
// (identity column), removed versions deleted; the commit also carries the batch's txn
// (appId "scd2_merge:<target>:<source>", version = last source version), so a rerun
// writes nothing. The dimension's change feed then shows update_preimage/postimage for
// each closed row and an insert for each new version; unchanged rows never appear.
type SCD2Merge struct {
	name string
	cfg  *SCD2Config
}

// NewSCD2Merge returns the stage for a validated config.
func NewSCD2Merge(name string, cfg *SCD2Config) *SCD2Merge { return &SCD2Merge{name: name, cfg: cfg} }

// Name implements Stage.
func (s *SCD2Merge) Name() string { return s.name }

// Kind implements Stage.
func (s *SCD2Merge) Kind() Kind { return KindSCD2Merge }

// AppID is the txn appId under which the stage records the last merged source version.
func (s *SCD2Merge) AppID() string { return "scd2_merge:" + s.cfg.Target + ":" + s.cfg.Source }

// watermarkID is the txn appId under which the stage records, for a change feed source,
// the highest sequence value it has merged (microseconds): the txn "version" is that
// value. It is committed with the rows, so it is exact across crashes and reruns.
func (s *SCD2Merge) watermarkID() string { return s.AppID() + "#max_sequence" }

// Run implements Stage (run again after a conflict: runAgainOnConflict).
func (s *SCD2Merge) Run(ctx context.Context, env *Env) (Result, error) {
	res, err := timed(ctx, env, s.Kind(), s.name, func() (Result, error) { return s.run(ctx, env) })
	res.Expectations = env.rowResults()
	return res, err
}

// scdLayout locates the dimension's columns.
type scdLayout struct {
	data               []*delta.StructField // dimension columns other than the SCD columns
	spec               scdSpec
	sk, from, to, curr string
	// inferred is the column flagging a fact_load's placeholder versions ("": none).
	inferred string
}

func (s *SCD2Merge) layout(dim *delta.StructType) (*scdLayout, error) {
	l := &scdLayout{
		sk:       s.cfg.Columns.SurrogateKey,
		from:     or(s.cfg.Columns.ValidFrom, "valid_from"),
		to:       or(s.cfg.Columns.ValidTo, "valid_to"),
		curr:     or(s.cfg.Columns.IsCurrent, "is_current"),
		inferred: s.cfg.Columns.Inferred,
		spec:     scdSpec{deletes: or(s.cfg.Deletes, "ignore"), end: SeqMax},
	}
	if err := s.cfg.applyOptions(&l.spec); err != nil {
		return nil, err
	}
	if l.spec.endNull {
		if f := dim.Field(l.to); f != nil && !f.Nullable {
			return nil, fmt.Errorf("column %s is declared nullable: false, but open_end: null writes NULL there for current versions", l.to)
		}
	}
	scd := map[string]bool{strings.ToLower(l.from): true, strings.ToLower(l.to): true, strings.ToLower(l.curr): true}
	if l.sk != "" {
		scd[strings.ToLower(l.sk)] = true
		f := dim.Field(l.sk)
		if f == nil {
			return nil, fmt.Errorf("dimension has no surrogate key column %s", l.sk)
		}
		if !delta.IsIdentity(f) {
			return nil, fmt.Errorf("surrogate key column %s must be an identity column (declare identity: {start: 1, step: 1})", l.sk)
		}
	}
	for _, name := range []string{l.from, l.to, l.curr} {
		if dim.Field(name) == nil {
			return nil, fmt.Errorf("dimension has no column %s", name)
		}
	}
	if l.inferred != "" {
		f := dim.Field(l.inferred)
		if f == nil {
			return nil, fmt.Errorf("dimension has no column %s (columns.inferred)", l.inferred)
		}
		if f.Type.String() != "boolean" {
			return nil, fmt.Errorf("column %s (columns.inferred) is %s; expected boolean", l.inferred, f.Type)
		}
		scd[strings.ToLower(l.inferred)] = true
	}
	for _, f := range dim.Fields {
		if !scd[strings.ToLower(f.Name)] {
			l.data = append(l.data, f)
		}
	}
	isKey := map[int]bool{}
	for _, k := range s.cfg.Keys {
		i := l.dataIndex(k)
		if i < 0 {
			return nil, fmt.Errorf("dimension has no key column %s", k)
		}
		l.spec.keys = append(l.spec.keys, i)
		isKey[i] = true
	}
	tracked := map[int]bool{}
	switch {
	case len(s.cfg.Track) > 0:
		for _, c := range s.cfg.Track {
			i := l.dataIndex(c)
			if i < 0 {
				return nil, fmt.Errorf("dimension has no tracked column %s", c)
			}
			tracked[i] = true
		}
	default:
		except := map[string]bool{}
		for _, c := range append(append([]string{}, s.cfg.TrackExcept...), s.cfg.Type1...) {
			except[strings.ToLower(c)] = true
		}
		for i, f := range l.data {
			if !isKey[i] && !except[strings.ToLower(f.Name)] {
				tracked[i] = true
			}
		}
	}
	for i := range l.data {
		switch {
		case isKey[i]:
		case tracked[i]:
			l.spec.tracked = append(l.spec.tracked, i)
		default:
			l.spec.type1 = append(l.spec.type1, i)
		}
	}
	return l, nil
}

func (s *SCD2Merge) run(ctx context.Context, env *Env) (Result, error) {
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
	srcDecl, dstDecl, dstSnap := f.srcDecl, f.dstDecl, f.dstSnap
	latest := f.srcSnap.Version()
	l, err := s.layout(dstSnap.Schema())
	if err != nil {
		return res, fmt.Errorf("dimension %s: %w", dstDecl.Name, err)
	}
	res.VersionsRead = []TableVersion{{Table: srcDecl.Name, Version: latest}}
	if err := s.fillNewColumns(ctx, env, f, l, &res); err != nil {
		return res, fmt.Errorf("dimension %s: %w", dstDecl.Name, err)
	}
	dstSnap = f.dstSnap
	last, merged := dstSnap.TxnVersion(s.AppID())
	if merged && last >= latest {
		res.Notes = append(res.Notes, fmt.Sprintf("up to date: %s merged through version %d", srcDecl.Name, latest))
		return res, nil
	}
	es, err := newEventSource(l, f.srcSnap.Schema(), s.cfg.SequenceBy, s.cfg.DeleteWhen, s.cfg.Where, false)
	if err != nil {
		return res, fmt.Errorf("source %s: %w", srcDecl.Name, err)
	}
	es.withChecks(env.rows, srcDecl.Name)
	// The keyed run (jobs/internal/keyed): the batch is read once, into memory while it
	// fits the budget, else into spill files by key hash range; then the dimension and
	// the passes (one in memory), each folding its keys; then ONE commit.
	kr, end := env.keyedRun(s.cfg.MemoryBudget)
	defer end()
	live := newSCDBatch(l, s.cfg.SourceChanges)
	batch := kr.NewBatch(live, keyed.BatchOptions{Keys: l.spec.keys})
	rd := newEventReader(l, s.cfg.SequenceBy == "", batch.Add)
	// A large batch that will fit has the dimension decoded while it is read (on the
	// other core), within an eighth of the budget (dimensionAhead).
	var ahead *keyed.Ahead
	defer func() { ahead.Stop() }()
	m := mergeOf{s.Kind(), s.cfg.Target, s.cfg.Source, s.AppID(), s.cfg.SourceChanges, func(n int64) {
		if limit, ok := dimensionAhead(n, live.cost, batch); ok && ahead == nil {
			ahead = keyed.StartAhead(ctx, dstSnap, nil, limit)
			readingAhead()
		}
	}}
	log, err := readMergeBatch(ctx, env, m, f, batch, live, rd, es, merged, last, &res)
	if err != nil {
		return res, err
	}
	if batch.Spilled() {
		ahead.Stop()
	}
	// The events the row checks set aside go to the quarantine table first: a crash
	// before the merge's commit reruns the merge, which quarantines them no more.
	if err := quarantineEvents(ctx, env, s.cfg.QuarantineTable, s.AppID()+"#quarantine", es.quarantined, latest, &res); err != nil {
		return res, err
	}
	noteHeld("scd2_merge", batch)
	// A snapshot source deletes the current keys it no longer has as of the time its
	// rows are: the newest sequence_by value, else the time its last snapshot load
	// recorded, else its version's commit time (they carry no sequence of their own).
	var deleteAt *snapshotDeletes
	if !s.cfg.SourceChanges && l.spec.deletes != "ignore" {
		deleteAt = &snapshotDeletes{at: snapshotSourceTime(f.srcSnap), seen: f.srcSnap.Timestamp().UnixMicro()}
		if s.cfg.SequenceBy != "" && rd.hasTop {
			deleteAt.at = rd.top
		}
	}
	specOf := live
	if batch.Spilled() {
		specOf = newSCDBatch(l, false) // (no keys to prune by)
	}
	spec, err := specOf.dimensionSpec(deleteAt)
	if err != nil {
		return res, err
	}
	if !batch.Spilled() {
		spec.Ahead = ahead
	}
	target := keyed.NewTarget(dstSnap, spec)
	// The batch's events go to the log before the dimension commit (a rerun finds them),
	// in key hash order, pass after pass.
	app, err := log.startRun(latest, batch)
	if err != nil {
		return res, err
	}
	defer app.abort()
	mp, err := f.dst.NewMergeInParts(s.mergeOptions(env, f.dst, dstSnap, l, latest, s.newWatermark(dstSnap, log, rd.top, rd.hasTop)))
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dstDecl.Name, err)
	}
	srcSchema, err := mergeSourceSchema(dstSnap, l)
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
	passes, err := batch.Passes(ctx, 0, target, func(bb, br, tb, _ int64) int64 { return bb + br*live.cost + tb },
		func(ctx context.Context, p *keyed.Pass) error {
			return s.pass(ctx, p, l, log, dstSnap, deleteAt, app, sink, &res)
		})
	if err != nil {
		return res, fmt.Errorf("dimension %s: %w", dstDecl.Name, err)
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

// pass folds the keys of a pass (keyed.Pass: in memory, the whole batch as it was
// read): it indexes their events, sorts the dimension's rows against them, folds them
// (late keys with their logged events) and gives the changes to the sink; meanwhile it
// writes the events to the event log (app), which only reads the batch.
func (s *SCD2Merge) pass(ctx context.Context, p *keyed.Pass, l *scdLayout, log *eventLog, dstSnap *delta.Snapshot,
	deleteAt *snapshotDeletes, app *logAppender, sink *keyed.Sink, res *Result) error {
	b, _ := p.Live.(*scdBatch)
	if b == nil {
		b = newSCDBatch(l, s.cfg.SourceChanges)
		if err := p.EachBatch(ctx, b.Add); err != nil {
			b.Release()
			return err
		}
	}
	defer b.Release()
	w, hasW := dstSnap.TxnVersion(s.watermarkID())
	b.lateUpTo = lateUpTo(log, w, hasW)
	g, gctx := errgroup.WithContext(ctx)
	if app != nil {
		g.Go(func() error { return app.addBatch(gctx, b, p.Lo, p.Hi) })
	}
	g.Go(func() error {
		work := newSCDWork(len(b.head))
		placer := &dimPlacer{b: b, work: work, deleteAt: deleteAt, rows: &sortedRows{}}
		if err := p.EachTarget(gctx, func(tr keyed.TargetRecord) error { return placer.place(gctx, tr) }); err != nil {
			return err
		}
		changes, late, err := s.foldChanges(gctx, b, work, placer.missing, l, log, dstSnap, deleteAt, res)
		if err != nil {
			return fmt.Errorf("source %s: %w", s.cfg.Source, err)
		}
		if err := s.emit(gctx, sink, b, l, changes, late); err != nil {
			return err
		}
		// In memory (one pass, a direct sink) the dimension's files are written while
		// the log is: only the commits keep their order.
		return sink.Flush(gctx)
	})
	return g.Wait()
}

// lateUpTo is the highest sequence at which an event may be late, given the merge's
// event log and recorded watermark: none without a log (a snapshot source places late
// events by the stored versions), any without a watermark.
func lateUpTo(log *eventLog, watermark int64, has bool) int64 {
	if log == nil {
		return math.MinInt64
	}
	if w, ok, _ := log.derivedWatermark(watermark, has); ok {
		return w
	}
	return math.MaxInt64
}

// dimensionAhead says whether a batch of about n events (each costing cost besides its
// data) reads the dimension ahead, and within how many bytes: a batch too large for a
// filter of its keys (keyFilter) that leaves room in its budget for twice the read
// ahead's eighth of it.
func dimensionAhead(n, cost int64, batch *keyed.Batch) (int64, bool) {
	limit := batch.Limit() / 8
	return limit, batch.Live() != nil && !noDimensionAhead && n > int64(keyFilterMax) && n*cost+2*limit <= batch.Limit()
}

// noDimensionAhead turns reading ahead off (a test compares); readingAhead is told of
// each read ahead started.
var (
	noDimensionAhead bool
	readingAhead     = func() {}
)

// count records what the dimension's MERGE did in res.
func (s *SCD2Merge) count(res *Result, dstDecl *Table, mr *delta.MergeResult) {
	res.RowsWritten = mr.NumTargetRowsInserted + mr.NumTargetRowsUpdated + mr.NumTargetRowsDeleted
	res.FilesWritten = mr.NumTargetFilesAdded
	res.BytesWritten = mr.NumTargetBytesAdded
	if mr.Committed {
		res.VersionsWritten = []TableVersion{{Table: dstDecl.Name, Version: mr.Version}}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d new versions, %d rows closed or changed, %d removed", mr.NumTargetRowsInserted, mr.NumTargetRowsUpdated, mr.NumTargetRowsDeleted))
}

// newWatermark is the watermark a batch whose highest sequence is top (ok: it has one)
// moves to (nil: it stays), for a change feed source.
func (s *SCD2Merge) newWatermark(dstSnap *delta.Snapshot, log *eventLog, top int64, ok bool) *int64 {
	watermark, hasWatermark, derived := log.derivedWatermark(dstSnap.TxnVersion(s.watermarkID()))
	if ok && s.cfg.SourceChanges && (!hasWatermark || top > watermark) {
		return &top
	}
	if derived {
		return &watermark // record what was derived
	}
	return nil
}

// foldLate folds the keys marked late from their logged events and the batch's.
func (s *SCD2Merge) foldLate(ctx context.Context, batch *scdBatch, work *scdWork, l *scdLayout, log *eventLog, late []bool, res *Result) ([]scdChange, error) {
	var ids []int32
	var keys [][]byte
	for id, isLate := range late {
		if isLate {
			ids = append(ids, int32(id))
			keys = append(keys, batch.keys.Key(int32(id)))
		}
	}
	facts, err := log.lookup(ctx, keys)
	if err != nil {
		return nil, err
	}
	complete := log.complete()
	var changes []scdChange
	lost, logged := 0, 0
	for i, id := range ids {
		evs, err := batch.events(id)
		if err != nil {
			return nil, err
		}
		for k := range evs {
			if !evs[k].delete {
				evs[k].hash = rowHash(evs[k].row)
			}
		}
		versions := work.versions(id)
		if err := batch.versionRows(versions); err != nil {
			return nil, err
		}
		recorded, n := loggedEvents(&l.spec, facts[i], versions)
		lost += n
		logged += len(recorded)
		key := keyString(evs[0].row, l.spec.keys)
		all := withoutIgnoredDeletes(&l.spec, append(recorded, evs...))
		if l.spec.physByCommit {
			all = placePhysicalDeletes(all)
		}
		if all, err = normalizeBatch(key, all, l.spec.seqText); err != nil {
			return nil, err
		}
		if len(all) == 0 {
			continue // only ignored deletes
		}
		changes = append(changes, foldKey(&l.spec, versions, all, complete, func() int64 { return 0 })...)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d keys had late events: folded with their %d logged events", len(ids), logged))
	if !complete {
		res.Notes = append(res.Notes, "the event log starts after the first merge (the source's change feed before it was gone): late events were placed with the stored versions where it has no events")
	}
	if lost > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d logged events had no stored version (the dimension was changed by another writer); they were left out", lost))
	}
	return changes, nil
}

// quickPath lets foldBatch handle the commonest keys without the fold (a test turns it
// off to compare).
var quickPath = true

// foldBatch folds every key the dimension scan did not settle, on all cores: the keys
// are cut into consecutive ranges folded at once, and the changes come out in key
// order, so the result does not depend on the number of cores. A key whose only event
// is a new key's first version, or a tracked change after its only (current) version
// with the same type 1 values, gets the fold's changes directly (quickInsert,
// againstCurrent). Keys for which isLate holds (given their earliest event's
// sequence and their stored versions) are not folded but marked in late (and counted),
// for a fold with their logged events.
func foldBatch(b *scdBatch, work *scdWork, spec *scdSpec, isLate func(first int64, versions []scdVersion) bool, late []bool) ([]scdChange, int, error) {
	parts := make([]foldedRange, min(runtime.GOMAXPROCS(0), max(1, work.len()/4096)))
	var g errgroup.Group // a part per core; errors stay with their part (below)
	for p := range parts {
		lo, hi := p*work.len()/len(parts), (p+1)*work.len()/len(parts)
		g.Go(func() error {
			parts[p] = foldKeyRange(b, work, spec, isLate, late, lo, hi)
			return nil
		})
	}
	g.Wait()
	total := 0
	for _, p := range parts {
		total += len(p.changes)
	}
	changes := make([]scdChange, 0, total)
	lateKeys := 0
	for _, p := range parts {
		if p.err != nil {
			return nil, 0, p.err // the first range's error: the same whatever the timing
		}
		changes = append(changes, p.changes...)
		lateKeys += p.late
	}
	return changes, lateKeys, nil
}

// foldedRange is what foldKeyRange made of a range of keys: the changes, the number of
// keys marked late, and the error that stopped it.
type foldedRange struct {
	changes []scdChange
	late    int
	err     error
}

// foldKeyRange is foldBatch's work on the key ids [lo, hi): the quick keys get their
// changes directly, late keys are marked in late, the others are folded.
func foldKeyRange(b *scdBatch, work *scdWork, spec *scdSpec, isLate func(first int64, versions []scdVersion) bool, late []bool, lo, hi int) (out foldedRange) {
	// Room for two changes per unsettled key (what a quick key makes), their new
	// versions in one allocation.
	unsettled := 0
	for id := lo; id < hi; id++ {
		if !work.settled(int32(id)) {
			unsettled++
		}
	}
	out.changes = make([]scdChange, 0, 2*unsettled)
	slab := make([]scdVersion, 0, 2*unsettled)
	newVersion := func(v scdVersion) *scdVersion {
		if len(slab) == cap(slab) {
			return &v
		}
		slab = append(slab, v)
		return &slab[len(slab)-1]
	}
	for id := lo; id < hi; id++ {
		if work.settled(int32(id)) {
			continue
		}
		versions := work.versions(int32(id))
		if quickPath && ((work.isQuick(int32(id)) && len(versions) == 1) || b.quickInsert(int32(id), work)) {
			// What the fold would do, without Go rows: close the current version (if
			// any) at the event, which becomes the new current one.
			ev := b.head[id]
			seq := b.evSeq[ev]
			if !isLate(seq, versions) {
				if len(versions) == 1 {
					out.changes = append(out.changes, scdChange{Kind: "close", Old: &versions[0], New: newVersion(scdVersion{To: seq}), quick: true})
				}
				from := seq
				if len(versions) == 0 && spec.hasFirstFrom {
					from = spec.firstFrom // the key's first version (first_valid_from)
				}
				out.changes = append(out.changes, scdChange{Kind: "insert", New: newVersion(scdVersion{From: from, To: spec.end, Current: true}), quick: true, ev: ev})
				continue
			}
		}
		evs, err := b.events(int32(id))
		if err != nil {
			out.err = err
			return out
		}
		key := keyString(evs[0].row, spec.keys)
		if evs = withoutIgnoredDeletes(spec, evs); len(evs) == 0 {
			work.drop(int32(id))
			continue
		}
		if spec.physByCommit {
			evs = placePhysicalDeletes(evs)
		}
		if evs, err = normalizeBatch(key, evs, spec.seqText); err != nil {
			out.err = err
			return out
		}
		if len(evs) > 0 && isLate(evs[0].seq, versions) { // (normalized: in sequence order)
			late[id] = true
			out.late++
			continue
		}
		if err := b.versionRows(versions); err != nil {
			out.err = err
			return out
		}
		out.changes = append(out.changes, foldKey(spec, versions, evs, false, func() int64 { return 0 })...)
		work.drop(int32(id))
	}
	return out
}

// sourceRow reads the dimension's data columns of row i of a source batch.
func sourceRow(rec arrow.RecordBatch, l *scdLayout, i int, cols []int) ([]any, error) {
	row := make([]any, len(l.data))
	for j, c := range cols {
		v, err := keyed.Value(rec.Column(c), i)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", l.data[j].Name, err)
		}
		row[j] = v
	}
	return row, nil
}

// sourceColumns maps the dimension's data columns to a source batch's columns.
func sourceColumns(schema *arrow.Schema, l *scdLayout) ([]int, error) {
	cols := make([]int, len(l.data))
	for j, f := range l.data {
		idx := -1
		for i, sf := range schema.Fields() {
			if strings.EqualFold(sf.Name, f.Name) {
				idx = i
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("source has no column %s, which the dimension needs", f.Name)
		}
		cols[j] = idx
	}
	return cols, nil
}

// seqColumn finds the sequence_by column (or the fallback) in a batch: a timestamp, a
// date or an integer (scd2_merge, whose sequences become valid_from, checks for the
// first two: newEventSource).
func seqColumn(schema *arrow.Schema, name string) (int, error) {
	for i, f := range schema.Fields() {
		if strings.EqualFold(f.Name, name) {
			switch f.Type.ID() {
			case arrow.TIMESTAMP, arrow.DATE32, arrow.INT64, arrow.INT32, arrow.INT16, arrow.INT8:
				return i, nil
			}
			return 0, fmt.Errorf("sequence_by column %s is %s; expected a timestamp, a date or an integer", name, f.Type)
		}
	}
	return 0, fmt.Errorf("source has no sequence_by column %s", name)
}

func seqValue(arr arrow.Array, i int) (int64, bool) {
	if arr.IsNull(i) {
		return 0, false
	}
	switch a := arr.(type) {
	case *array.Date32:
		return int64(a.Value(i)) * 86_400_000_000, true
	case *array.Timestamp:
		return keyed.Micros(int64(a.Value(i)), a.DataType().(*arrow.TimestampType).Unit), true
	case *array.Int64:
		return a.Value(i), true
	case *array.Int32:
		return int64(a.Value(i)), true
	case *array.Int16:
		return int64(a.Value(i)), true
	case *array.Int8:
		return int64(a.Value(i)), true
	}
	return 0, false
}
