package jobs

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs/internal/keyed"
)

// A snapshot source that was only appended to since the last load: the new facts are
// the rows of the files it gained (the others are loaded, and re-keyed where their
// dimensions changed), so a run reads those files alone, checks that none repeats a
// loaded fact's key, and ends as a run reading the whole snapshot would.

// appendedFiles returns the files the source gained since version lastSrc and whether
// the run may read just those: the source only gained files, its columns are as they
// were, the stage keys facts as the last load did (the digest it recorded), and no
// drop or quarantine must judge every fact of the snapshot again (so that one loaded
// before the check leaves).
func (fr *factRun) appendedFiles(ctx context.Context, f *flow, lastSrc int64) ([]*delta.Add, bool) {
	s := fr.s
	if fr.moves || slices.ContainsFunc(s.cfg.Lookups, func(l FactLookup) bool { return l.Missing == MissingQuarantine }) {
		return nil, false
	}
	if digest, ok := f.dstSnap.TxnVersion(s.digestAppID()); !ok || digest != s.digest(f.dstSnap) {
		return nil, false
	}
	old, err := f.src.SnapshotAt(ctx, lastSrc)
	if err != nil || old.Metadata().SchemaString != f.srcSnap.Metadata().SchemaString {
		return nil, false // (a version cleaned up: the whole snapshot, as before)
	}
	return f.srcSnap.AddedSince(old)
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

// scanSource scans the source's snapshot, or in an incremental run the files added.
func (fr *factRun) scanSource(ctx context.Context, f *flow, opts delta.ScanOptions) (*delta.Scanner, error) {
	if fr.incremental {
		return f.srcSnap.ScanFiles(ctx, fr.added, opts)
	}
	return f.srcSnap.Scan(ctx, opts)
}

// checkLoaded fails an incremental run when a new fact's key is one the fact table
// holds: the source then holds two facts with that key (one in a file added after
// version lastSrc), as a snapshot read whole would find.
func (fr *factRun) checkLoaded(ctx context.Context, f *flow, srcName string, lastSrc int64) error {
	if fr.seen.Len() == 0 {
		return nil
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
		return fmt.Errorf("read fact table %s: %w", f.dstDecl.Name, err)
	}
	defer sc.Release()
	b := &fr.batch.block
	for sc.Next() {
		rec := sc.RecordBatch()
		b.Reset()
		if err := keyed.AppendKeys(b, rec, kc, 0, int(rec.NumRows())); err != nil {
			return fmt.Errorf("fact table %s: %w", f.dstDecl.Name, err)
		}
		fr.seen.LookupBlock(b)
		for r, id := range b.IDs {
			if id >= 0 {
				return fmt.Errorf("%s holds two facts with key %s: one in a file added after version %d, one loaded before", srcName, keyText(rec, kc, r), lastSrc)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read fact table %s: %w", f.dstDecl.Name, err)
	}
	return nil
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
