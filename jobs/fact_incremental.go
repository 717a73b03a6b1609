package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// A snapshot source that changed since the last load, read incrementally. Its facts
// are the snapshot's rows; those loaded before are in the fact table (and re-keyed
// where their dimensions changed), so a run needs only what changed:
//
//   - when the source only gained files, the rows of those files: none may repeat a
//     loaded fact's key;
//   - otherwise, when its change feed covers the versions since the last load, the
//     newest change of each fact (a delete deletes it), as a source_changes run reads
//     it. A fact key's rows in the snapshot never number two after any of those
//     versions: a key inserted without a row of it leaving first must be new to the
//     fact table. A feed where that does not hold (or that was cleaned up or not on)
//     leaves the run to read the whole snapshot, which judges it.
//
// Either way the run ends as one reading the whole snapshot would.

// planIncremental sets how a snapshot source's run reads the facts since version
// lastSrc: incrementally (fr.added, or fr.feed) when the source's columns are as they
// were, the stage keys facts as the last load did (the digest it recorded), and no drop
// or quarantine must judge every fact of the snapshot again (so that one loaded before
// the check leaves); otherwise it leaves the run to read the whole snapshot.
func (fr *factRun) planIncremental(ctx context.Context, f *flow, lastSrc int64, res *Result) error {
	s := fr.s
	if fr.moves || slices.ContainsFunc(s.cfg.Lookups, func(l FactLookup) bool { return l.Missing == MissingQuarantine }) {
		return nil
	}
	if digest, ok := f.dstSnap.TxnVersion(s.digestAppID()); !ok || digest != s.digest(f.dstSnap) {
		return nil
	}
	old, err := f.src.SnapshotAt(ctx, lastSrc)
	if err != nil || old.Metadata().SchemaString != f.srcSnap.Metadata().SchemaString {
		return nil // (a version cleaned up: the whole snapshot, as before)
	}
	if fr.added, fr.incremental = f.srcSnap.AddedSince(old); fr.incremental {
		return nil
	}
	// A feed of more changes than a quarter of the snapshot's facts (an overwrite, say)
	// would hold more than the snapshot read whole does (a small one, little either way).
	n, ok := f.srcSnap.NumRecords()
	if !ok {
		return nil
	}
	ff, err := fr.readFeed(ctx, f, lastSrc, true, max(n/4, feedMinLimit))
	switch {
	case errors.Is(err, delta.ErrChangeDataFeedDisabled) || errors.Is(err, delta.ErrVersionCleaned):
		return nil
	case errors.Is(err, errFeedLarge):
		res.Notes = append(res.Notes, fmt.Sprintf("%s's change feed since version %d holds more changes than a quarter of its rows: read its whole snapshot", f.srcDecl.Name, lastSrc))
		return nil
	case err != nil:
		return err
	}
	ok, err = fr.feedIsNet(ctx, f, ff)
	if err != nil || !ok {
		ff.release()
		if err == nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s's change feed since version %d holds a fact key twice at some version: read its whole snapshot", f.srcDecl.Name, lastSrc))
		}
		return err
	}
	fr.feed, fr.incremental = ff, true
	return nil
}

// feedMinLimit is the most changes of a snapshot source's feed read instead of its
// snapshot, for a snapshot of fewer than four times as many facts (a test lowers it).
var feedMinLimit int64 = 1 << 16

// feedIsNet reports whether the feed read whole gives the snapshot's facts: after each
// version, each key's rows number one or none, given one for a key the fact table holds
// and none otherwise (checked for the keys whose first change adds a row).
func (fr *factRun) feedIsNet(ctx context.Context, f *flow, ff *factFeed) (bool, error) {
	fresh := keyindex.New(16)
	fr.lo, fr.hi, fr.noRange = nil, nil, len(fr.keyIdx) != 1
	for key, steps := range ff.steps {
		slices.SortFunc(steps, func(a, b factStep) int { return cmp.Compare(a.version, b.version) })
		low, high, sum := 0, 0, 0
		for i, st := range steps {
			sum += int(st.d)
			if i+1 == len(steps) || steps[i+1].version != st.version {
				low, high = min(low, sum), max(high, sum)
			}
		}
		switch {
		case high > 1 || low < -1 || high == 1 && low == -1:
			return false, nil
		case high == 1: // the key is new to the source: it must be to the fact table too
			fresh.Add([]byte(key))
			if !fr.noRange {
				row := ff.newest[key]
				cols, err := fr.columnsIn(row.rec.Schema(), "source "+f.srcDecl.Name)
				if err != nil {
					return false, err
				}
				one := array.NewSlice(row.rec.Column(cols[fr.keyIdx[0]]), int64(row.r), int64(row.r+1))
				fr.noteKeyRange(one)
				one.Release()
			}
		}
	}
	_, found, err := fr.loadedKey(ctx, f, fresh)
	return !found, err
}

// digestAppID is the txn appId recording, as its version, the digest of how the last
// load keyed the facts (digest).
func (s *FactLoad) digestAppID() string { return s.AppID() + "#keying" }

// digest is a digest of what makes a fact's row in the fact table of snap: the fact
// keys, each lookup's settings and the fact table's columns. A snapshot source's run
// reads only the files the source gained while it is the one the last load recorded.
func (s *FactLoad) digest(snap *delta.Snapshot) int64 {
	h := xxhash.New()
	put := func(v ...any) { fmt.Fprintln(h, v...) }
	put("keys", s.cfg.Keys)
	for _, l := range s.cfg.Lookups {
		fact, dim := l.factCols()
		put("lookup", l.Dimension, fact, dim, l.At, l.Key, l.Missing, l.unknownKey(), l.dim.WithDefaults(), l.openEnd, l.firstFrom)
	}
	for _, f := range snap.Schema().Fields { // (not its metadata: an identity's high-water mark moves)
		put("column", f.Name, f.Type.String(), f.Nullable)
	}
	return int64(h.Sum64() >> 1)
}

// checkLoaded fails an incremental run when a new fact's key is one the fact table
// holds: the source then holds two facts with that key (one in a file added after
// version lastSrc), as a snapshot read whole would find.
func (fr *factRun) checkLoaded(ctx context.Context, f *flow, srcName string, lastSrc int64) error {
	key, found, err := fr.loadedKey(ctx, f, fr.seen)
	if found {
		return fmt.Errorf("%s holds two facts with key %s: one in a file added after version %d, one loaded before", srcName, key, lastSrc)
	}
	return err
}

// loadedKey finds a fact key of keys that the fact table holds (reading only its facts
// within [fr.lo, fr.hi] when set), and returns it as text.
func (fr *factRun) loadedKey(ctx context.Context, f *flow, keys *keyindex.Index) (string, bool, error) {
	if keys.Len() == 0 {
		return "", false, nil
	}
	names := make([]string, len(fr.keyIdx))
	kc := make([]int, len(fr.keyIdx))
	for i, j := range fr.keyIdx {
		names[i], kc[i] = fr.out.Field(j).Name, i
	}
	opts := delta.ScanOptions{Columns: names, ParallelFiles: true}
	if fr.lo != nil {
		// Only facts within the new keys' range can repeat one (fact keys that grow, as
		// order numbers do, leave every file of the fact table unread).
		opts.Filter = expr.And(expr.Ge(names[0], fr.lo), expr.Le(names[0], fr.hi))
	}
	sc, err := f.dstSnap.Scan(ctx, opts)
	if err != nil {
		return "", false, fmt.Errorf("read fact table %s: %w", f.dstDecl.Name, err)
	}
	defer sc.Release()
	b := &fr.batch.block
	for sc.Next() {
		rec := sc.RecordBatch()
		b.Reset()
		if err := keyed.AppendKeys(b, rec, kc, 0, int(rec.NumRows())); err != nil {
			return "", false, fmt.Errorf("fact table %s: %w", f.dstDecl.Name, err)
		}
		keys.LookupBlock(b)
		for r, id := range b.IDs {
			if id >= 0 {
				return keyText(rec, kc, r), true, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", false, fmt.Errorf("read fact table %s: %w", f.dstDecl.Name, err)
	}
	return "", false, nil
}

// noteKeyRange widens [fr.lo, fr.hi] to the values of a one-column fact key (a string
// or 64-bit integer column without NULLs; any other batch unsets the range for good).
func (fr *factRun) noteKeyRange(arr arrow.Array) {
	if fr.noRange || arr.Len() == 0 {
		return
	}
	ok := false
	switch a := arr.(type) {
	case *array.String:
		if l, isStr := fr.lo.(string); a.NullN() == 0 && (fr.lo == nil || isStr) {
			lo, hi := a.Value(0), a.Value(0)
			for r := range a.Len() {
				lo, hi = min(lo, a.Value(r)), max(hi, a.Value(r))
			}
			if fr.lo != nil {
				lo, hi = min(l, lo), max(fr.hi.(string), hi)
			}
			fr.lo, fr.hi, ok = lo, hi, true
		}
	case *array.Int64:
		if l, isInt := fr.lo.(int64); a.NullN() == 0 && (fr.lo == nil || isInt) {
			lo, hi := slices.Min(a.Int64Values()), slices.Max(a.Int64Values())
			if fr.lo != nil {
				lo, hi = min(l, lo), max(fr.hi.(int64), hi)
			}
			fr.lo, fr.hi, ok = lo, hi, true
		}
	}
	if !ok {
		fr.noRange, fr.lo, fr.hi = true, nil, nil
	}
}

// neededKeys is the index of d's business keys that an incremental run looks up: its
// new facts' and, when it re-keys by d alone, changed's (the keys whose facts it
// re-keys). The dimension's other versions are then not held.
func (fr *factRun) neededKeys(ctx context.Context, f *flow, d *factDim, changed map[string][]dimInterval) (*keyindex.Index, error) {
	need := keyindex.New(1024)
	var buf []byte
	err := fr.eachNewFact(ctx, f, d.factCols, func(rec arrow.RecordBatch, cols []int, r int) error {
		var err error
		if buf, err = keyed.AppendKey(buf[:0], rec, cols, r); err == nil {
			need.Add(buf)
		}
		return err
	})
	for k := range changed {
		need.Add([]byte(k))
	}
	return need, err
}
