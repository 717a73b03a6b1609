package jobs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// FactLoad writes a fact table keyed as of the facts' time (STAGES.md, fact_load): each
// lookup adds the surrogate key of the dimension version with valid_from <= at <
// valid_to, or the unknown member's key (-1) when there is none (or fails, with
// missing: fail).
//
// Each run reads the source's new facts (its change feed since the last loaded version,
// or its snapshot when it moved: only what it gained, or its change feed, when that
// gives the same facts, fact_incremental.go) and, for each dimension that moved since
// the last run,
// the dimension's change feed over those versions: the (business key, time range) pairs
// where the valid version may have changed. The facts that fall there are looked up
// again, and those whose key changed are updated. New facts, updated facts and re-keyed
// facts go in ONE MERGE on the fact keys (into an empty fact table, an append written
// as the facts are keyed; in a run that only re-keys, a MERGE at the positions the
// re-keying scan found), which also commits a txn for the source
// (appId "fact_load:<target>:<source>", the source version) and one per dimension
// ("fact_load:<target>:dimension:<dimension>", its version): a rerun finds the work
// done, a crash before the commit leaves the table as it was. So after every run each
// fact carries the key its dimension's latest version gives it, whatever the order in
// which facts and dimension events arrived. A dimension without a change feed (or whose
// feed versions were cleaned up) makes the run look every fact up again.
//
// The fact table must hold the lookups' on and at columns (re-keying reads them there).
// The run holds the dimensions' keys and intervals (an incremental run, those of the
// keys it looks up) and the keys of the facts it writes in memory, and, but for an
// append, the facts it writes.
type FactLoad struct {
	name string
	cfg  *FactLoadConfig
}

// NewFactLoad returns the stage for a validated config.
func NewFactLoad(name string, cfg *FactLoadConfig) *FactLoad { return &FactLoad{name: name, cfg: cfg} }

// Name implements Stage.
func (s *FactLoad) Name() string { return s.name }

// Kind implements Stage.
func (s *FactLoad) Kind() Kind { return KindFactLoad }

// AppID is the txn appId of the last source version loaded.
func (s *FactLoad) AppID() string { return "fact_load:" + s.cfg.Target + ":" + s.cfg.Source }

// DimensionAppID is the txn appId of the last version of a dimension the facts are keyed by.
func (s *FactLoad) DimensionAppID(dimension string) string {
	return "fact_load:" + s.cfg.Target + ":dimension:" + dimension
}

// Run implements Stage.
func (s *FactLoad) Run(ctx context.Context, env *Env) (Result, error) {
	res, err := timed(ctx, env, s.Kind(), s.name, func() (Result, error) { return s.run(ctx, env) })
	res.Expectations = env.rowResults()
	return res, err
}

// factDeleteColumn marks the merge source rows that delete a fact.
const factDeleteColumn = "_fact_load_delete"

// factRun is one run's state: the target's layout and the rows to merge.
type factRun struct {
	s      *FactLoad
	dims   []*factDim
	out    *arrow.Schema // the target's columns plus factDeleteColumn
	keyOf  []int         // per target column: the lookup whose key it is, else -1
	keyIdx []int         // the fact key columns in the target
	b      *array.RecordBuilder
	recs   []arrow.RecordBatch
	rows   int
	seen   *keyindex.Index // fact keys already emitted
	// keySet, in an append of a snapshot's facts, holds their keys' hashes instead of seen.
	keySet *factKeySet
	counts [][4]int64 // per lookup: facts given a real key, the unknown key, quarantined, an inferred member's key
	// found is, per lookup, whether keysFor's last row found a version (tally counts it).
	found []bool
	// w, when set, writes the facts as an append (the fact table is empty): batches go
	// to it as they are keyed, instead of into recs for a MERGE; appended counts them.
	w        *parallelWriter
	appended int64
	batch    factBatch
	// pos, in a run that only re-keys, is where the re-keyed facts are in the fact
	// table: the MERGE updates them there instead of joining on the fact keys.
	pos    *delta.MergePositions
	lcache map[*arrow.Schema]*lookupCols
	colsOf map[*arrow.Schema][]int // columnsIn's answers
	// Buffers reused row after row: a business key (keysFor), a fact key and its
	// columns (factKey), the lookups' keys of a row (keysFor).
	buf, kbuf []byte
	kc        []int
	sks       []int64
	// quarantining: a miss of a missing: quarantine lookup is a *factMiss (new facts),
	// not the unknown key (re-keyed facts); quarantined holds those facts.
	quarantining bool
	quarantined  []quarantinedFact
	// checks are the stage's row checks (nil without): they judge the facts the merge
	// writes, inserted or updated (not its deletes), as each batch of them is made (put).
	checks *rowChecks
	// moves: a check drops or quarantines. origins then holds per row in b the source version
	// a new fact came from ("" for a re-keyed fact or a delete); lastSource is the one
	// newFactKeys last keyed. dropped counts the facts drop checks left out.
	moves      bool
	origins    []string
	lastSource string
	dropped    int64
	// incremental: a snapshot source's run reads only what changed since the last load
	// (fact_incremental.go): the files it gained (added; lo and hi bound their facts'
	// keys), or its change feed (feed, read before the dimensions).
	added       []*delta.Add
	feed        *factFeed
	incremental bool
	lo, hi      any
	noRange     bool
}

func (s *FactLoad) run(ctx context.Context, env *Env) (Result, error) {
	var res Result
	f, err := env.openFlow(ctx, s.cfg.Source, s.cfg.Target)
	if err != nil {
		return res, err
	}
	keys := slices.Clone(s.cfg.Keys)
	for _, l := range s.cfg.Lookups {
		keys = append(keys, slices.Sorted(maps.Keys(l.On))...)
	}
	if err := f.byteKeys(keys); err != nil {
		return res, err
	}
	if err := env.startRowChecks(s.name, f.dstDecl.Name); err != nil {
		return res, err
	}
	srcLatest := f.srcSnap.Version()
	res.VersionsRead = []TableVersion{{Table: f.srcDecl.Name, Version: srcLatest}}
	lastSrc, loaded := f.dstSnap.TxnVersion(s.AppID())
	srcNew := !loaded || lastSrc < srcLatest
	fr := &factRun{s: s, checks: env.rows, moves: env.rows.moves()}
	if err := fr.layout(f.dstSnap.Schema()); err != nil {
		return res, fmt.Errorf("fact table %s: %w", f.dstDecl.Name, err)
	}
	defer fr.release()
	switch {
	case srcNew && loaded && !s.cfg.SourceChanges:
		if err := fr.planIncremental(ctx, f, lastSrc, &res); err != nil {
			return res, err
		}
	case srcNew && loaded: // (read first: the inferred members come from it too)
		if fr.feed, err = fr.readFeed(ctx, f, lastSrc, false, 0); err != nil {
			return res, err
		}
	}
	// wholeSnapshot: the run reads every fact of a snapshot source, so the snapshot is
	// every fact there is.
	wholeSnapshot := srcNew && !s.cfg.SourceChanges && !fr.incremental
	moved := make([]bool, len(s.cfg.Lookups))
	lastDim := make([]int64, len(s.cfg.Lookups))
	anyMoved := false
	for i := range s.cfg.Lookups {
		d, err := openFactDim(ctx, env, &s.cfg.Lookups[i])
		if err != nil {
			return res, fmt.Errorf("lookups[%d]: %w", i, err)
		}
		if l := &s.cfg.Lookups[i]; l.Missing != MissingFail {
			created, err := d.ensureUnknownMember(ctx, env)
			if err != nil {
				return res, fmt.Errorf("lookups[%d]: %w", i, err)
			}
			if created {
				res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: d.decl.Name, Version: d.snap.Version()})
				res.Notes = append(res.Notes, fmt.Sprintf("created the unknown member row of %s (%s %d)", d.decl.Name, d.sk, l.unknownKey()))
			}
		}
		if l := &s.cfg.Lookups[i]; l.Missing == MissingInferred && srcNew {
			n, err := fr.inferMembers(ctx, env, f, d)
			if err != nil {
				return res, fmt.Errorf("lookups[%d]: %w", i, err)
			}
			if n > 0 {
				res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: d.decl.Name, Version: d.snap.Version()})
				res.Notes = append(res.Notes, fmt.Sprintf("added %d inferred members to %s (business keys it has no version of yet)", n, d.decl.Name))
			}
		}
		fr.dims = append(fr.dims, d)
		res.VersionsRead = append(res.VersionsRead, TableVersion{Table: d.decl.Name, Version: d.snap.Version()})
		last, ok := f.dstSnap.TxnVersion(s.DimensionAppID(d.decl.Name))
		lastDim[i], moved[i] = last, !ok || last < d.snap.Version()
		if !ok {
			lastDim[i] = -1
		}
		anyMoved = anyMoved || moved[i]
	}
	if !srcNew && !anyMoved {
		res.Notes = append(res.Notes, fmt.Sprintf("up to date: %s loaded through version %d, its dimensions unchanged since", f.srcDecl.Name, srcLatest))
		return res, nil
	}
	// A whole snapshot's facts are all keyed afresh: nothing else to look up again.
	rekey := anyMoved && len(f.dstSnap.Files()) > 0 && !wholeSnapshot
	var ranges []map[string][]dimInterval
	all := false
	if rekey {
		if ranges, all, err = fr.changes(ctx, moved, lastDim, &res); err != nil {
			return res, err
		}
	}
	rekeying := rekey && (all || slices.ContainsFunc(ranges, func(m map[string][]dimInterval) bool { return len(m) > 0 }))
	for i, d := range fr.dims {
		// A run that only re-keys by one dimension looks up changed times only: the
		// versions its feed showed moved (else, its changed keys' versions); a run
		// reading a change feed or what a snapshot gained, its new facts' keys (and
		// those), when no fact is re-keyed by another dimension's change.
		var only map[string][]dimInterval
		var need *keyindex.Index
		switch {
		case rekey && !srcNew && !all && len(fr.dims) == 1 && d.moved != nil:
			// (the versions valid at a changed time are those the feed showed moved)
			if err := d.loadMoved(); err != nil {
				return res, err
			}
			continue
		case rekey && !srcNew && !all && len(fr.dims) == 1:
			only = ranges[0]
		case (fr.incremental || fr.feed != nil) && !all && (len(fr.dims) == 1 || !rekeying) && d.loaded != d.snap:
			var changed map[string][]dimInterval
			if rekey {
				changed = ranges[i]
			}
			if need, err = fr.neededKeys(ctx, f, d, changed); err != nil {
				return res, err
			}
		}
		if err := d.load(ctx, only, need); err != nil {
			return res, err
		}
	}
	if err := fr.appendIfEmpty(ctx, f); err != nil {
		return res, err
	}
	if fr.w != nil {
		// An append holds, beyond the dimensions read already, its fact key set and its
		// writers' buffers: the collector keeps the heap near that, rather than letting
		// it grow to twice the live data.
		n, _ := f.srcSnap.NumRecords()
		defer keyed.HoldBudget(factKeySetBytes(n) + ingestWriterMemory + factBatchMemory)()
	}
	if srcNew {
		if err := fr.readSource(ctx, f, lastSrc, &res); err != nil {
			return res, err
		}
	}
	if rekey {
		if !srcNew {
			fr.pos = &delta.MergePositions{Files: map[string]*delta.FileMatches{}}
		}
		if err := fr.rekey(ctx, f, ranges, all, &res); err != nil {
			return res, err
		}
	}
	if err := fr.flush(); err != nil {
		return res, err
	}
	if err := fr.quarantine(ctx, env, srcLatest, &res); err != nil {
		return res, err
	}
	res.RowsSkipped += fr.dropped
	lin := env.lineage()
	for i, l := range s.cfg.Lookups {
		lin.Lookups = append(lin.Lookups, delta.LookupMetrics{Key: l.Key, Dimension: l.Dimension,
			NumRealKeys: fr.counts[i][0], NumUnknownKeys: fr.counts[i][1], NumQuarantinedFacts: fr.counts[i][2], NumInferredKeys: fr.counts[i][3]})
	}
	setTxns := func(tx *delta.Transaction) {
		tx.SetTxn(s.AppID(), srcLatest)
		tx.SetTxn(s.digestAppID(), s.digest(f.dstSnap))
		for _, d := range fr.dims {
			tx.SetTxn(s.DimensionAppID(d.decl.Name), d.snap.Version())
		}
	}
	if fr.w != nil {
		if err := fr.commitAppend(ctx, f, lin, setTxns, &res); err != nil {
			return res, err
		}
		fr.lookupNotes(&res)
		return res, nil
	}
	tx := f.dst.NewTransaction(f.dstSnap, delta.TxOptions{})
	setTxns(tx)
	opts := delta.MergeOptions{
		Source: fr.recs,
		On:     s.cfg.Keys,
		WhenMatched: []delta.MergeClause{
			{Cond: expr.Eq(factDeleteColumn, true), Action: delta.MergeDelete},
			{CondFunc: fr.differs, Action: delta.MergeUpdate},
		},
		WhenNotMatched: []delta.MergeClause{{Cond: expr.Eq(factDeleteColumn, false), Action: delta.MergeInsert}},
		Tx:             tx,
		Lineage:        lin,
		Operation:      "MERGE",
	}
	if fr.pos != nil && len(fr.pos.Files) > 0 {
		opts.Positions = fr.pos
	}
	if wholeSnapshot {
		opts.WhenNotMatchedBySource = []delta.MergeClause{{Action: delta.MergeDelete}}
	}
	mr, err := f.dst.Merge(ctx, opts)
	if err != nil {
		return res, fmt.Errorf("write fact table %s: %w", f.dstDecl.Name, err)
	}
	if mr.Committed {
		res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: f.dstDecl.Name, Version: mr.Version})
	}
	res.RowsWritten = mr.NumTargetRowsInserted + mr.NumTargetRowsUpdated + mr.NumTargetRowsDeleted
	res.FilesWritten = mr.NumTargetFilesAdded
	res.BytesWritten = mr.NumTargetBytesAdded
	res.Notes = append(res.Notes, fmt.Sprintf("facts: %d inserted, %d updated (re-keyed or changed), %d deleted", mr.NumTargetRowsInserted, mr.NumTargetRowsUpdated, mr.NumTargetRowsDeleted))
	fr.lookupNotes(&res)
	return res, nil
}

// appendIfEmpty makes the run an append when the fact table is empty (and generates no
// identity values): its MERGE could then only insert, so the facts are written as they
// are keyed rather than held for it. The commit still reads the whole table, so a
// concurrent writer's commit conflicts with it as with the MERGE.
func (fr *factRun) appendIfEmpty(ctx context.Context, f *flow) error {
	if len(f.dstSnap.Files()) > 0 {
		return nil
	}
	if ids, err := f.dstSnap.IdentityColumns(); err != nil || len(ids) > 0 {
		return nil
	}
	var sourceBytes int64
	for _, a := range f.srcSnap.Files() {
		sourceBytes += a.Size
	}
	opts := delta.WriteOptions{MaxMemory: ingestWriterMemory, StreamFiles: len(f.dstSnap.PartitionColumns()) == 0, RowGroupSize: factRowGroupSize}
	w, err := newParallelWriter(ctx, f.dstSnap, ingestLanes(sourceBytes), opts)
	if err != nil {
		return fmt.Errorf("fact table %s: %w", f.dstDecl.Name, err)
	}
	fr.w = w
	return nil
}

// factFlushRows is how many facts a run emits as one record, and factRowGroupSize the
// row group size of an append's files (0: the default); tests make both small, so that
// a small fact table has row groups that re-keying can skip.
var (
	factFlushRows          = 32768
	factRowGroupSize int64 = 0
)

// commitAppend commits the appended facts with the run's txns.
func (fr *factRun) commitAppend(ctx context.Context, f *flow, lin *delta.Lineage, setTxns func(*delta.Transaction), res *Result) error {
	adds, err := fr.w.close()
	fr.w = nil
	if err != nil {
		return fmt.Errorf("write fact table %s: %w", f.dstDecl.Name, err)
	}
	var bytesOut int64
	for _, a := range adds {
		bytesOut += a.Size
	}
	tx := f.dst.NewTransaction(f.dstSnap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": partitionByJSON(f.dstSnap.PartitionColumns())},
		OperationMetrics:    map[string]int64{"numFiles": int64(len(adds)), "numOutputRows": fr.appended, "numOutputBytes": bytesOut},
		Lineage:             lin,
	})
	tx.ReadWholeTable()
	tx.AddFiles(adds...)
	setTxns(tx)
	v, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("write fact table %s: %w", f.dstDecl.Name, err)
	}
	res.VersionsWritten = append(res.VersionsWritten, TableVersion{Table: f.dstDecl.Name, Version: v})
	res.RowsWritten = fr.appended
	res.FilesWritten = int64(len(adds))
	res.BytesWritten = bytesOut
	res.Notes = append(res.Notes, fmt.Sprintf("facts: %d inserted (an append: the fact table was empty)", fr.appended))
	return nil
}

// lookupNotes notes each lookup's counts.
func (fr *factRun) lookupNotes(res *Result) {
	for i, l := range fr.s.cfg.Lookups {
		note := fmt.Sprintf("lookup %s (%s): %d facts keyed to a version, %d to the unknown member", l.Key, l.Dimension, fr.counts[i][0], fr.counts[i][1])
		if l.Missing == MissingQuarantine {
			note += fmt.Sprintf(", %d quarantined", fr.counts[i][2])
		}
		if l.Missing == MissingInferred {
			note += fmt.Sprintf(", %d to an inferred member", fr.counts[i][3])
		}
		res.Notes = append(res.Notes, note)
	}
}

// layout finds the target's columns: each lookup's key column, the fact keys, and the
// columns re-keying reads.
func (fr *factRun) layout(target *delta.StructType) error {
	as, err := delta.ArrowSchema(target)
	if err != nil {
		return err
	}
	fields := append(slices.Clone(as.Fields()), arrow.Field{Name: factDeleteColumn, Type: arrow.FixedWidthTypes.Boolean})
	fr.out = arrow.NewSchema(fields, nil)
	fr.keyOf = make([]int, len(as.Fields()))
	for j, fld := range as.Fields() {
		fr.keyOf[j] = -1
		for i, l := range fr.s.cfg.Lookups {
			if strings.EqualFold(fld.Name, l.Key) {
				if fld.Type.ID() != arrow.INT64 {
					return fmt.Errorf("key column %s is %s; expected bigint", fld.Name, fld.Type)
				}
				fr.keyOf[j] = i
			}
		}
	}
	for i, l := range fr.s.cfg.Lookups {
		if target.Field(l.Key) == nil {
			return fmt.Errorf("no column %s for lookups[%d].key", l.Key, i)
		}
		cols, _ := l.factCols()
		for _, c := range append(cols, l.At) {
			if target.Field(c) == nil {
				return fmt.Errorf("no column %s: the fact table keeps each lookup's on and at columns, so facts can be keyed again when the dimension changes", c)
			}
		}
	}
	for _, k := range fr.s.cfg.Keys {
		i := target.FieldIndex(k)
		if i < 0 {
			return fmt.Errorf("no key column %s", k)
		}
		fr.keyIdx = append(fr.keyIdx, i)
	}
	fr.b = array.NewRecordBuilder(memory.DefaultAllocator, fr.out)
	fr.seen = keyindex.New(1024)
	fr.counts = make([][4]int64, len(fr.s.cfg.Lookups))
	fr.found = make([]bool, len(fr.s.cfg.Lookups))
	return nil
}

func (fr *factRun) release() {
	if fr.b != nil {
		fr.b.Release()
	}
	for _, r := range fr.recs {
		r.Release()
	}
	fr.feed.release()
	if fr.w != nil {
		fr.w.abort()
	}
	if fr.pos != nil {
		for _, fm := range fr.pos.Files {
			arrowx.ReleaseRecords(fm.Rows)
		}
	}
}

// columnsIn maps the target's columns to rec's by name (-1: a lookup key, or absent).
func (fr *factRun) columnsIn(rec *arrow.Schema, what string) (cols []int, err error) {
	if cols, ok := fr.colsOf[rec]; ok {
		return cols, nil // (a change feed's rows are read one by one)
	}
	defer func() {
		if err == nil {
			if fr.colsOf == nil {
				fr.colsOf = map[*arrow.Schema][]int{}
			}
			fr.colsOf[rec] = cols
		}
	}()
	names := map[string]int{}
	for i, fld := range rec.Fields() {
		names[strings.ToLower(fld.Name)] = i
	}
	for j := range fr.keyOf {
		name := fr.out.Field(j).Name
		i, ok := names[strings.ToLower(name)]
		switch {
		case fr.keyOf[j] >= 0:
			cols = append(cols, -1)
		case !ok:
			return nil, fmt.Errorf("the fact table's column %s is not in %s", name, what)
		default:
			cols = append(cols, i)
		}
	}
	return cols, nil
}

// factKey is the encoded fact key of row r (rec's columns cols[keyIdx]).
func (fr *factRun) factKey(rec arrow.RecordBatch, cols []int, r int) ([]byte, []int, error) {
	// kc and the key's bytes are buffers of the run, valid until the next call.
	kc := fr.kc[:0]
	for _, j := range fr.keyIdx {
		kc = append(kc, cols[j])
	}
	fr.kc = kc
	for _, c := range kc {
		if rec.Column(c).IsNull(r) {
			return nil, kc, fmt.Errorf("a fact has a NULL key %s", keyText(rec, kc, r))
		}
	}
	var err error
	fr.kbuf, err = keyed.AppendKey(fr.kbuf[:0], rec, kc, r)
	return fr.kbuf, kc, err
}

// emitted reports whether this run emits the fact with encoded key key already.
func (fr *factRun) emitted(key []byte) bool {
	_, ok := fr.seen.Lookup(key)
	return ok
}

// tally counts the keys of keysFor's last row in the lookups' counts.
func (fr *factRun) tally() {
	for i, found := range fr.found {
		switch {
		case found && fr.dims[i].isPlaceholder(fr.sks[i]):
			fr.counts[i][3]++
		case found:
			fr.counts[i][0]++
		default:
			fr.counts[i][1]++
		}
	}
}

// lookupCols are the columns of a record's schema each lookup reads: its business key
// columns and its time.
type lookupCols struct {
	key [][]int
	at  []int
}

// lookupColsOf finds the lookups' columns in a schema (cached by schema).
func (fr *factRun) lookupColsOf(s *arrow.Schema) *lookupCols {
	if lc, ok := fr.lcache[s]; ok {
		return lc
	}
	names := nameIndex(s)
	lc := &lookupCols{}
	for _, d := range fr.dims {
		cols := make([]int, len(d.factCols))
		for j, c := range d.factCols {
			cols[j] = names[strings.ToLower(c)]
		}
		lc.key = append(lc.key, cols)
		lc.at = append(lc.at, names[strings.ToLower(d.lookup.At)])
	}
	if fr.lcache == nil {
		fr.lcache = map[*arrow.Schema]*lookupCols{}
	}
	fr.lcache[s] = lc
	return lc
}

// keysFor looks up every lookup's key for row r of rec (kc: its fact key columns); tally
// counts them.
func (fr *factRun) keysFor(rec arrow.RecordBatch, kc []int, r int) ([]int64, error) {
	lc := fr.lookupColsOf(rec.Schema())
	// A buffer of the run: every caller uses the keys before it looks up the next row's.
	if len(fr.sks) != len(fr.dims) {
		fr.sks = make([]int64, len(fr.dims))
	}
	out := fr.sks
	for i, d := range fr.dims {
		cols := lc.key[i]
		null := false
		for _, c := range cols {
			null = null || rec.Column(c).IsNull(r)
		}
		t, ok, err := timeMicros(rec.Column(lc.at[i]), r)
		if err != nil {
			return nil, fmt.Errorf("lookups[%d].at %s: %w", i, d.lookup.At, err)
		}
		sk, found := int64(0), false
		if ok && !null {
			if fr.buf, err = keyed.AppendKey(fr.buf[:0], rec, cols, r); err != nil {
				return nil, err
			}
			sk, found = d.keyOf(fr.buf, t)
		}
		switch {
		case found:
		case d.lookup.Missing == MissingFail || d.lookup.Missing == MissingQuarantine && fr.quarantining:
			at := "NULL"
			if ok {
				at = rec.Column(lc.at[i]).ValueStr(r)
			}
			miss := &factMiss{lookup: i, column: strings.Join(d.factCols, ","), value: keyText(rec, cols, r),
				msg: fmt.Sprintf("dimension %s has no version of %s %s at %s %s", d.decl.Name, strings.Join(d.factCols, ","), keyText(rec, cols, r), d.lookup.At, at)}
			if d.lookup.Missing == MissingQuarantine {
				return nil, miss
			}
			return nil, fmt.Errorf("fact %s: %s (lookups[%d] has missing: fail)", keyText(rec, kc, r), miss.msg, i)
		default:
			sk = d.lookup.unknownKey()
		}
		fr.found[i] = found
		out[i] = sk
	}
	return out, nil
}

// emit appends a row to the merge source: row r of rec (the target's columns at cols),
// with the lookup keys sks, or a delete of its fact.
func (fr *factRun) emit(rec arrow.RecordBatch, cols []int, r int, sks []int64, del bool) error {
	if del && fr.w != nil {
		return nil // an append: the fact table holds no fact to delete
	}
	for j := range fr.keyOf {
		fb := fr.b.Field(j)
		switch {
		case fr.keyOf[j] >= 0 && del:
			fb.AppendNull()
		case fr.keyOf[j] >= 0:
			fb.(*array.Int64Builder).Append(sks[fr.keyOf[j]])
		default:
			if err := appendFrom(fb, rec.Column(cols[j]), r); err != nil {
				return fmt.Errorf("column %s: %w", fr.out.Field(j).Name, err)
			}
		}
	}
	fr.b.Field(len(fr.keyOf)).(*array.BooleanBuilder).Append(del)
	if fr.moves {
		origin := ""
		if fr.quarantining && !del {
			origin = fr.lastSource
		}
		fr.origins = append(fr.origins, origin)
	}
	if fr.rows++; fr.b.Field(0).Len() >= factFlushRows {
		return fr.flush()
	}
	return nil
}

func (fr *factRun) flush() error {
	if fr.b.Field(0).Len() == 0 && (len(fr.recs) > 0 || fr.w != nil) {
		return nil
	}
	rec := fr.b.NewRecordBatch()
	defer rec.Release()
	origins := fr.origins
	fr.origins = fr.origins[:0]
	return fr.put(rec, func(i int) string {
		if i < len(origins) {
			return origins[i]
		}
		return ""
	})
}

// put hands a batch of facts (fr.out's columns) to the append writer, or keeps it for
// the MERGE, after the row checks judged it (origin names the source version of row i,
// a new fact; "" for a re-keyed fact).
func (fr *factRun) put(rec arrow.RecordBatch, origin func(i int) string) error {
	if fr.checks != nil {
		kept, err := fr.judge(rec, origin)
		if err != nil {
			return err
		}
		defer kept.Release()
		rec = kept
		if rec.NumRows() == 0 {
			return nil
		}
	}
	if fr.w == nil {
		rec.Retain()
		fr.recs = append(fr.recs, rec)
		return nil
	}
	n := len(fr.keyOf) // without factDeleteColumn: no fact of an append is a delete
	facts := array.NewRecordBatch(arrow.NewSchema(fr.out.Fields()[:n], nil), rec.Columns()[:n], rec.NumRows())
	defer facts.Release()
	fr.appended += facts.NumRows()
	return fr.w.write(facts, "")
}
