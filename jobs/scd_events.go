package jobs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// The event log of a merge from a change feed (scd2_merge and scd1_merge with
// source_changes): every event the stage has merged, one row per event, in a Delta table
// of its own under the warehouse's reserved prefix (eventLogRoot). A dimension keeps
// versions, not events: a repeat of the current values, a delete of an absent key and the
// content of each event are gone once folded, yet a late event that lands among them
// changes what they mean (a confirmation after it becomes a change back). The log keeps
// them, so a late event is placed exactly, the same whatever batches the events came in,
// even after the source's change feed has been vacuumed.
//
// A row holds what placing needs, not the event's values: the key (encoded as appendKey
// does, and its hash), the sequence, whether it is a delete (and a row deleted from the
// source, placed by its commit), a hash of the event's data columns, and the source
// version that carried it. An upsert's values are those of the stored version that
// covers its sequence (it started that version, or repeated its tracked values), so the
// dimension holds them.
//
// Each batch's events are appended in one commit, sorted by key hash in row groups of a
// few ten thousand rows, with the stage's txn (the last source version they come from),
// before the dimension commit: a rerun after a crash between the two finds them there
// and appends nothing again. Looking up the events of k keys reads, per log file, only
// the row groups whose key hash range holds one of them; the files of small batches are
// merged into one when the log has more than eventLogMaxFiles. Cost: one more write of
// the batch's events (about 40 bytes each) per run, and a lookup per key with a late
// event that grows with those keys, not with the log.

// eventLogRoot is where event logs live in the warehouse: <root>/<kind>/<target>/<source>.
const eventLogRoot = "_orchestrator/events"

// eventLogMaxFiles is the number of log files above which the small ones are merged, and
// eventLogMergeRows the most rows merged at once (memory holds them while they are sorted).
const (
	eventLogMaxFiles  = 12
	eventLogMergeRows = 1 << 20
)

// eventLogCompleteID is the txn appId whose version is 1 when the log holds every event
// the stage ever merged (it was created with the stage's first merge, or filled from the
// source's whole change feed), 0 when it starts later.
const eventLogCompleteID = "complete"

var eventLogSchema = &delta.StructType{Fields: []*delta.StructField{
	{Name: "key_hash", Type: &delta.PrimitiveType{Name: delta.TypeLong}},
	{Name: "key", Type: &delta.PrimitiveType{Name: delta.TypeBinary}},
	{Name: "seq", Type: &delta.PrimitiveType{Name: delta.TypeLong}},
	{Name: "deleted", Type: &delta.PrimitiveType{Name: delta.TypeBoolean}},
	{Name: "physical", Type: &delta.PrimitiveType{Name: delta.TypeBoolean}},
	{Name: "row_hash", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: true},
	{Name: "source_version", Type: &delta.PrimitiveType{Name: delta.TypeLong}},
	{Name: "row_seq", Type: &delta.PrimitiveType{Name: delta.TypeLong}, Nullable: true},
	{Name: "type1", Type: &delta.PrimitiveType{Name: delta.TypeBinary}, Nullable: true},
}}

// eventFact is one logged event of a key.
type eventFact struct {
	seq    int64
	del    bool
	phys   bool
	hash   uint64 // of the data columns; 0 for deletes
	commit int64  // source version
	rowSeq int64  // of a physical delete: the sequence_by value of the row deleted
	// type1 holds an upsert's type 1 values (encodeValues), which the dimension keeps
	// only for the newest upsert: an older one becomes the newest when a delete wins at
	// the newest's sequence.
	type1 string
}

// loggedEvent is a fact with its key (and the key's keyed.Hash), as written.
type loggedEvent struct {
	key     []byte
	keyHash int64
	eventFact
}

// eventLog is an open event log and the snapshot it was read at.
type eventLog struct {
	tbl   *delta.Table
	snap  *delta.Snapshot
	appID string
	path  string
	// filledMax is the highest sequence of the events the log was just filled with
	// from the source's change feed (a dimension merged before without a log: by an
	// earlier version, or on another engine); nil when it was not filled now.
	filledMax *int64
}

// derivedWatermark is the watermark a dimension merged without recording one (another
// engine) gets from the events its log was filled with: late events are then found
// as if it had been recorded.
func (l *eventLog) derivedWatermark(watermark int64, has bool) (int64, bool, bool) {
	if has || l == nil || l.filledMax == nil {
		return watermark, has, false
	}
	return *l.filledMax, true, true
}

// openEventLog opens the event log of a stage (appID names it: kind, target and source),
// creating it when absent.
func openEventLog(ctx context.Context, env *Env, kind Kind, target, source, appID string) (*eventLog, error) {
	p := EventLogPath(kind, target, source)
	exists, err := delta.Exists(ctx, env.Warehouse, p)
	if err != nil {
		return nil, fmt.Errorf("event log %s: %w", p, err)
	}
	if !exists {
		lineage := env.Lineage
		_, err := delta.Create(ctx, env.Warehouse, p, delta.CreateOptions{
			Schema:      eventLogSchema,
			Name:        "events of " + appID,
			Description: "Every event " + string(kind) + " merged from " + source + " into " + target + " (kept so late events are placed exactly).",
			Lineage:     &lineage,
		}, env.Delta)
		if err != nil && !errors.Is(err, delta.ErrTableExists) {
			return nil, fmt.Errorf("create event log %s: %w", p, err)
		}
	}
	tbl, err := delta.Open(ctx, env.Warehouse, p, env.Delta)
	if err != nil {
		return nil, fmt.Errorf("event log %s: %w", p, err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("event log %s: %w", p, err)
	}
	return &eventLog{tbl: tbl, snap: snap, appID: appID, path: p}, nil
}

// recorded is the last source version whose events the log holds (ok false: none).
func (l *eventLog) recorded() (int64, bool) { return l.snap.TxnVersion(l.appID) }

// complete reports whether the log holds every event the stage has merged.
func (l *eventLog) complete() bool {
	v, ok := l.snap.TxnVersion(eventLogCompleteID)
	return ok && v == 1
}

// lookup returns the logged events of the given keys (encoded), by the index of the key
// in keys.
func (l *eventLog) lookup(ctx context.Context, keys [][]byte) (map[int][]eventFact, error) {
	out := map[int][]eventFact{}
	if len(keys) == 0 || len(l.snap.Files()) == 0 {
		return out, nil
	}
	byHash := make(map[int64][]int, len(keys))
	hashes := make([]any, 0, len(keys))
	for i, k := range keys {
		h := keyed.Hash(k)
		if _, ok := byHash[h]; !ok {
			hashes = append(hashes, h)
		}
		byHash[h] = append(byHash[h], i)
	}
	sc, err := l.snap.Scan(ctx, delta.ScanOptions{Filter: expr.In("key_hash", hashes...)})
	if err != nil {
		return nil, fmt.Errorf("event log %s: %w", l.path, err)
	}
	defer sc.Release()
	for sc.Next() {
		rec := sc.RecordBatch()
		c := logColumns(rec)
		for i := range int(rec.NumRows()) {
			for _, ki := range byHash[c.hash.Value(i)] {
				if string(c.key.Value(i)) != string(keys[ki]) {
					continue
				}
				out[ki] = append(out[ki], c.fact(i))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("event log %s: %w", l.path, err)
	}
	return out, nil
}

// logCols are the columns of a log record.
type logCols struct {
	hash, seq, rowHash, commit, rowSeq *array.Int64
	key, type1                         *array.Binary
	del, phys                          *array.Boolean
}

func logColumns(rec arrow.RecordBatch) logCols {
	col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	return logCols{
		hash: col("key_hash").(*array.Int64), key: col("key").(*array.Binary),
		seq: col("seq").(*array.Int64), del: col("deleted").(*array.Boolean),
		phys: col("physical").(*array.Boolean), rowHash: col("row_hash").(*array.Int64),
		commit: col("source_version").(*array.Int64), rowSeq: col("row_seq").(*array.Int64),
		type1: col("type1").(*array.Binary),
	}
}

func (c logCols) fact(i int) eventFact {
	f := eventFact{seq: c.seq.Value(i), del: c.del.Value(i), phys: c.phys.Value(i), commit: c.commit.Value(i)}
	if c.rowHash.IsValid(i) {
		f.hash = uint64(c.rowHash.Value(i))
	}
	if c.rowSeq.IsValid(i) {
		f.rowSeq = c.rowSeq.Value(i)
	}
	if c.type1.IsValid(i) {
		f.type1 = string(c.type1.Value(i))
	}
	return f
}

// append commits events (those from source versions after the last one recorded) as one
// log commit with the txn through sourceVersion (none when it is negative), merging
// small files as it goes. complete, when set, is recorded too (the log's first commit).
// A log that already holds sourceVersion gets nothing.
func (l *eventLog) append(ctx context.Context, env *Env, events []loggedEvent, sourceVersion int64, complete *bool) error {
	a, err := l.startAppend(sourceVersion)
	if err != nil || a == nil {
		return err
	}
	defer a.abort()
	if err := a.add(ctx, events, 0, keyed.Ranges); err != nil {
		return err
	}
	return a.commit(ctx, env, complete)
}

// logAppender writes one log commit in key hash order: the events of consecutive key
// hash ranges, range after range (add), with the rows of the small files being merged
// in those ranges, then commit. A batch too large for memory is logged range by range.
type logAppender struct {
	l             *eventLog
	last          int64 // the last source version recorded before
	recorded      bool
	merge         []*delta.Add
	w             *delta.DataWriter
	sourceVersion int64
	// stream uploads the log file while it is written (a large batch), rather than
	// from memory when finished; chunk is the most events written at once (0: 65536).
	stream bool
	chunk  int
}

// startRun starts the log commit of a merge's run (nil: nothing to log, a nil log or
// one holding sourceVersion already): a batch over spill files is logged as it is
// written, range after range.
func (l *eventLog) startRun(sourceVersion int64, batch *keyed.Batch) (*logAppender, error) {
	if l == nil {
		return nil, nil
	}
	a, err := l.startAppend(sourceVersion)
	if a != nil && batch.Spilled() {
		a.stream, a.chunk = true, int(min(max(batch.Limit()/2048, 4096), 1<<16))
	}
	return a, err
}

// startAppend starts the log commit with the txn through sourceVersion (none when
// negative); nil when the log already holds sourceVersion.
func (l *eventLog) startAppend(sourceVersion int64) (*logAppender, error) {
	last, ok := l.recorded()
	if ok && last >= sourceVersion {
		return nil, nil
	}
	return &logAppender{l: l, last: last, recorded: ok, merge: l.filesToMerge(), sourceVersion: sourceVersion}, nil
}

// add writes events (those of the key hash ranges [lo, hi), after the ranges added
// before), with the merged files' events in those ranges.
func (a *logAppender) add(ctx context.Context, events []loggedEvent, lo, hi int) error {
	l := a.l
	if a.recorded {
		events = slices.DeleteFunc(events, func(e loggedEvent) bool { return e.commit <= a.last })
	}
	if len(a.merge) > 0 {
		old, err := l.read(ctx, a.merge, lo, hi)
		if err != nil {
			return err
		}
		events = append(old, events...)
	}
	sortLogged(events)
	events = slices.CompactFunc(events, func(a, b loggedEvent) bool {
		return string(a.key) == string(b.key) && a.eventFact == b.eventFact
	})
	if len(events) == 0 {
		return nil
	}
	if a.w == nil {
		w, err := l.snap.NewDataWriter(delta.WriteOptions{RowGroupSize: 1 << 20, StreamFiles: a.stream})
		if err != nil {
			return err
		}
		a.w = w
	}
	chunk := a.chunk
	if chunk <= 0 {
		chunk = 1 << 16
	}
	for lo := 0; lo < len(events); lo += chunk {
		rec := loggedRecord(events[lo:min(lo+chunk, len(events))])
		err := a.w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("event log %s: %w", l.path, err)
		}
	}
	return nil
}

// abort drops what was written (after a failure; after commit or on nil, nothing).
func (a *logAppender) abort() {
	if a != nil && a.w != nil {
		a.w.Abort()
		a.w = nil
	}
}

// commit commits the events added, the merged files' removal and the txn. complete,
// when set, is recorded too.
func (a *logAppender) commit(ctx context.Context, env *Env, complete *bool) error {
	l := a.l
	tx := l.tbl.NewTransaction(l.snap, delta.TxOptions{
		Operation:           "WRITE",
		OperationParameters: map[string]any{"mode": "Append"},
		Lineage:             env.lineage(),
	})
	if a.w != nil {
		adds, err := a.w.Close(ctx)
		a.w = nil
		if err != nil {
			return fmt.Errorf("event log %s: %w", l.path, err)
		}
		tx.AddFiles(adds...)
		tx.RemoveAdds(a.merge...)
	}
	if a.sourceVersion >= 0 {
		tx.SetTxn(l.appID, a.sourceVersion)
	}
	if complete != nil {
		tx.SetTxn(eventLogCompleteID, int64(boolInt(*complete)))
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("event log %s: %w", l.path, err)
	}
	if len(a.merge) > 0 {
		// The merged files' predecessors go once the table's retention has passed.
		if _, err := l.tbl.Vacuum(ctx, delta.VacuumOptions{Lite: true}); err != nil {
			env.Log().Warn("event log vacuum failed", "log", l.path, "err", err)
		}
	}
	return nil
}

// filesToMerge picks the log files to merge into the next commit's file: when there are
// more than eventLogMaxFiles, the smallest ones, as many as fit in eventLogMergeRows.
func (l *eventLog) filesToMerge() []*delta.Add {
	files := slices.Clone(l.snap.Files())
	if len(files) <= eventLogMaxFiles {
		return nil
	}
	rows := func(a *delta.Add) int64 { n, _ := a.NumRecords(); return n }
	slices.SortFunc(files, func(a, b *delta.Add) int { return cmp.Compare(rows(a), rows(b)) })
	var pick []*delta.Add
	var total int64
	for _, a := range files {
		if len(pick) >= 2 && total+rows(a) > eventLogMergeRows {
			break
		}
		pick = append(pick, a)
		total += rows(a)
	}
	if len(pick) < 2 {
		return nil
	}
	return pick
}

// read returns the events in the given log files whose keys are in the key hash ranges
// [lo, hi).
func (l *eventLog) read(ctx context.Context, files []*delta.Add, lo, hi int) ([]loggedEvent, error) {
	t := l.snap.Table()
	var opts delta.ScanOptions
	if lo > 0 || hi < keyed.Ranges {
		first, last := keyed.HashBounds(lo, hi)
		opts.Filter = expr.And(expr.Ge("key_hash", first), expr.Le("key_hash", last))
	}
	sc, err := delta.Scan(ctx, t.Store(), t.Root(), l.snap.Schema(), nil, files, opts)
	if err != nil {
		return nil, fmt.Errorf("event log %s: %w", l.path, err)
	}
	defer sc.Release()
	var out []loggedEvent
	for sc.Next() {
		rec := sc.RecordBatch()
		c := logColumns(rec)
		for i := range int(rec.NumRows()) {
			out = append(out, loggedEvent{key: slices.Clone(c.key.Value(i)), keyHash: c.hash.Value(i), eventFact: c.fact(i)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("event log %s: %w", l.path, err)
	}
	return out, nil
}

// sortLogged orders events by key hash, key, sequence and the rest, so that a file's row
// groups cover narrow key hash ranges and equal events are adjacent.
func sortLogged(evs []loggedEvent) {
	if !slices.IsSortedFunc(evs, compareLogged) {
		slices.SortFunc(evs, compareLogged)
	}
}

// compareLogged is the log's order of events.
func compareLogged(a, b loggedEvent) int {
	// (Compared field by field: cmp.Or would compare every field of every pair.)
	if c := cmp.Compare(a.keyHash, b.keyHash); c != 0 {
		return c
	}
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	if c := cmp.Compare(a.seq, b.seq); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(boolInt(a.del), boolInt(b.del)),
		cmp.Compare(boolInt(a.phys), boolInt(b.phys)), cmp.Compare(a.hash, b.hash),
		cmp.Compare(a.commit, b.commit), cmp.Compare(a.rowSeq, b.rowSeq), cmp.Compare(a.type1, b.type1))
}

// loggedRecord builds a log record of events.
func loggedRecord(evs []loggedEvent) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	hash, seq, rowHash, commit, rowSeq := array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	key, type1 := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	del, phys := array.NewBooleanBuilder(mem), array.NewBooleanBuilder(mem)
	keyBytes, type1Bytes := 0, 0
	for _, e := range evs {
		keyBytes += len(e.key)
		type1Bytes += len(e.type1)
	}
	key.Reserve(len(evs))
	key.ReserveData(keyBytes)
	type1.Reserve(len(evs))
	type1.ReserveData(type1Bytes)
	for _, b := range []array.Builder{hash, seq, rowHash, commit, rowSeq, del, phys} {
		b.Reserve(len(evs))
	}
	for _, e := range evs {
		hash.Append(e.keyHash)
		key.Append(e.key)
		seq.Append(e.seq)
		del.Append(e.del)
		phys.Append(e.phys)
		if e.del {
			rowHash.AppendNull()
		} else {
			rowHash.Append(int64(e.hash))
		}
		commit.Append(e.commit)
		if e.phys {
			rowSeq.Append(e.rowSeq)
		} else {
			rowSeq.AppendNull()
		}
		if e.del || e.type1 == "" {
			type1.AppendNull()
		} else {
			type1.Append([]byte(e.type1))
		}
	}
	cols := []arrow.Array{hash.NewArray(), key.NewArray(), seq.NewArray(), del.NewArray(), phys.NewArray(), rowHash.NewArray(), commit.NewArray(), rowSeq.NewArray(), type1.NewArray()}
	for _, b := range []array.Builder{hash, key, seq, del, phys, rowHash, commit, rowSeq, type1} {
		b.Release()
	}
	schema, _ := delta.ArrowSchema(eventLogSchema)
	rec := array.NewRecordBatch(schema, cols, int64(len(evs)))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// encodeValues encodes Go row values (as colValue returns them) losslessly, for the
// log's type1 column; decodeValues reads them back.
func encodeValues(vals []any) []byte { return appendValues(nil, vals) }

// appendValues appends the encoding of vals (encodeValues) to b.
func appendValues(b []byte, vals []any) []byte {
	for _, v := range vals {
		switch v := v.(type) {
		case nil:
			b = append(b, 0)
		case string:
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		case int64:
			b = binary.AppendVarint(append(b, 2), v)
		case float64:
			b = binary.LittleEndian.AppendUint64(append(b, 3), math.Float64bits(v))
		case bool:
			b = append(b, 4, byte(boolInt(v)))
		case decimal128.Num:
			b = binary.LittleEndian.AppendUint64(append(b, 6), uint64(v.HighBits()))
			b = binary.LittleEndian.AppendUint64(b, v.LowBits())
		default:
			s := fmt.Sprint(v)
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

func decodeValues(b []byte) ([]any, error) {
	var out []any
	bad := errors.New("event log: malformed type1 values")
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		switch tag {
		case 0:
			out = append(out, nil)
		case 1:
			n, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < n {
				return nil, bad
			}
			out = append(out, string(b[k:k+int(n)]))
			b = b[k+int(n):]
		case 2:
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, bad
			}
			out = append(out, v)
			b = b[k:]
		case 3:
			if len(b) < 8 {
				return nil, bad
			}
			out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(b)))
			b = b[8:]
		case 4:
			if len(b) < 1 {
				return nil, bad
			}
			out = append(out, b[0] == 1)
			b = b[1:]
		case 6:
			if len(b) < 16 {
				return nil, bad
			}
			out = append(out, decimal128.New(int64(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint64(b[8:])))
			b = b[16:]
		default:
			return nil, bad
		}
	}
	return out, nil
}
