package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	"github.com/orchestrator-io/orchestrator/internal/keyindex"
)

// A fact_load's source side: the facts a run reads, from the source's snapshot (or the
// files it gained, fact_incremental.go) or its change feed.

// factChange is the newest change of one fact in the source's change feed: at one
// version a row that exists after it wins over one that does not.
type factChange struct {
	rec     arrow.RecordBatch
	r       int
	version int64
	del     bool
}

// factFeed is the source's change feed over some versions: per fact key (in the order
// first met) its newest change, and the batches the changes are in. With tally (a
// snapshot source's feed), steps holds each key's changes as +1 (a row with it appears)
// and -1 (one goes), per version.
type factFeed struct {
	held   []arrow.RecordBatch
	newest map[string]*factChange
	order  []string
	rows   int64
	steps  map[string][]factStep
}

// factStep is one change of a fact key's row count at a source version.
type factStep struct {
	version int64
	d       int8
}

func (ff *factFeed) release() {
	if ff != nil {
		arrowx.ReleaseRecords(ff.held)
		ff.held = nil
	}
}

// errFeedLarge is readFeed's error when the feed holds more changes than its limit.
var errFeedLarge = errors.New("the change feed is too large")

// readFeed reads the source's change feed after version lastSrc (through the snapshot's),
// failing with errFeedLarge past limit changes (0: no limit).
func (fr *factRun) readFeed(ctx context.Context, f *flow, lastSrc int64, tally bool, limit int64) (*factFeed, error) {
	srcName := "source " + f.srcDecl.Name
	start, end := lastSrc+1, f.srcSnap.Version()
	ch, err := f.src.Changes(ctx, delta.ChangesOptions{StartVersion: &start, EndVersion: &end,
		Types: []string{delta.ChangeInsert, delta.ChangeUpdatePreimage, delta.ChangeUpdatePostimage, delta.ChangeDelete}})
	if err != nil {
		return nil, fmt.Errorf("read the change feed of %s: %w", srcName, err)
	}
	defer ch.Release()
	ff := &factFeed{newest: map[string]*factChange{}}
	if tally {
		ff.steps = map[string][]factStep{}
	}
	done := false
	defer func() {
		if !done {
			ff.release()
		}
	}()
	for ch.Next() {
		rec := ch.RecordBatch()
		rec.Retain()
		ff.held = append(ff.held, rec)
		cols, err := fr.columnsIn(rec.Schema(), srcName)
		if err != nil {
			return nil, err
		}
		names := nameIndex(rec.Schema())
		ct := rec.Column(names[delta.ChangeTypeColumn]).(*array.String)
		cv := rec.Column(names[delta.CommitVersionColumn]).(*array.Int64)
		for r := range int(rec.NumRows()) {
			k, _, err := fr.factKey(rec, cols, r)
			if err != nil {
				return nil, fmt.Errorf("%s version %d: %w", srcName, cv.Value(r), err)
			}
			key := string(k)
			// A pre-image deletes its fact unless the same version has it after (its
			// post-image, or a delete and insert of an overwrite): a changed key leaves
			// no fact behind.
			del := ct.Value(r) == delta.ChangeDelete || ct.Value(r) == delta.ChangeUpdatePreimage
			row := &factChange{rec: rec, r: r, version: cv.Value(r), del: del}
			if tally {
				d := int8(1)
				if del {
					d = -1
				}
				ff.steps[key] = append(ff.steps[key], factStep{version: row.version, d: d})
			}
			if old, ok := ff.newest[key]; !ok {
				ff.order = append(ff.order, key)
			} else if old.version > row.version || old.version == row.version && row.del && !old.del {
				continue
			}
			ff.newest[key] = row
		}
		if ff.rows += rec.NumRows(); limit > 0 && ff.rows > limit {
			return nil, errFeedLarge
		}
	}
	if err := ch.Err(); err != nil {
		return nil, fmt.Errorf("read the change feed of %s: %w", srcName, err)
	}
	done = true
	return ff, nil
}

// readSource reads the source's new facts: the change feed after lastSrc the run read,
// or (first run, or a snapshot source) its snapshot (or what it gained:
// fact_incremental.go).
func (fr *factRun) readSource(ctx context.Context, f *flow, lastSrc int64, res *Result) error {
	srcName := "source " + f.srcDecl.Name
	fr.quarantining = true
	defer func() { fr.quarantining = false }()
	if fr.feed == nil {
		n, ok := f.srcSnap.NumRecords()
		switch {
		case fr.w != nil:
			fr.keySet = newFactKeySet(int(n))
		case ok && fr.seen.Len() == 0 && !fr.incremental:
			fr.seen = keyindex.New(int(n)) // every fact's key: sized once, not rehashed as it grows
		}
		sc, err := fr.scanSource(ctx, f, delta.ScanOptions{})
		if err != nil {
			return fmt.Errorf("read %s: %w", srcName, err)
		}
		defer sc.Release()
		for sc.Next() {
			if err := fr.addBatch(sc.RecordBatch(), srcName, fmt.Sprintf("%s@v%d", f.srcDecl.Name, f.srcSnap.Version()), res); err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read %s: %w", srcName, err)
		}
		if fr.incremental {
			res.Notes = append(res.Notes, fmt.Sprintf("%s only gained files since version %d: read the %d files added", f.srcDecl.Name, lastSrc, len(fr.added)))
			return fr.checkLoaded(ctx, f, srcName, lastSrc)
		}
		return fr.checkSuspects(ctx, f.srcSnap, srcName)
	}
	res.ChangesRead = []ChangeRange{{Table: f.srcDecl.Name, After: lastSrc, Through: f.srcSnap.Version()}}
	ff := fr.feed      // (read before the dimensions)
	defer ff.release() // (emit copies the rows)
	if fr.incremental {
		res.Notes = append(res.Notes, fmt.Sprintf("%s changed since version %d: read its change feed (%d changes of %d facts)", f.srcDecl.Name, lastSrc, ff.rows, len(ff.order)))
	}
	res.RowsRead += ff.rows
	for _, key := range ff.order {
		row := ff.newest[key]
		cols, err := fr.columnsIn(row.rec.Schema(), srcName)
		if err != nil {
			return err
		}
		var sks []int64
		del := row.del
		if !del {
			_, kc, _ := fr.factKey(row.rec, cols, row.r)
			if sks, del, err = fr.newFactKeys(row.rec, kc, row.r, fmt.Sprintf("%s@v%d", f.srcDecl.Name, row.version)); err != nil {
				return fmt.Errorf("%s: %w", srcName, err)
			}
		}
		fr.seen.Add([]byte(key))
		if err := fr.emit(row.rec, cols, row.r, sks, del); err != nil {
			return err
		}
	}
	return nil
}

// scanSource scans the source's snapshot, or in an incremental run the files added.
func (fr *factRun) scanSource(ctx context.Context, f *flow, opts delta.ScanOptions) (*delta.Scanner, error) {
	if fr.incremental {
		return f.srcSnap.ScanFiles(ctx, fr.added, opts)
	}
	return f.srcSnap.Scan(ctx, opts)
}

// eachNewFact calls fn with each of the run's new facts (row r of rec, whose columns
// names are rec's cols): the newest change of each fact in the change feed the run
// read that is not a delete, or the facts the snapshot (or the files it gained) holds.
func (fr *factRun) eachNewFact(ctx context.Context, f *flow, names []string, fn func(rec arrow.RecordBatch, cols []int, r int) error) error {
	what := "source " + f.srcDecl.Name
	if fr.feed != nil {
		colsOf := map[*arrow.Schema][]int{}
		for _, key := range fr.feed.order {
			row := fr.feed.newest[key]
			if row.del {
				continue
			}
			cols, ok := colsOf[row.rec.Schema()]
			if !ok {
				cols = columnsByName(row.rec.Schema(), names)
				if i := slices.Index(cols, -1); i >= 0 {
					return fmt.Errorf("%s has no column %s", what, names[i])
				}
				colsOf[row.rec.Schema()] = cols
			}
			if err := fn(row.rec, cols, row.r); err != nil {
				return err
			}
		}
		return nil
	}
	sc, err := fr.scanSource(ctx, f, delta.ScanOptions{Columns: names})
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	defer sc.Release()
	cols := make([]int, len(names))
	for i := range cols {
		cols[i] = i
	}
	for sc.Next() {
		rec := sc.RecordBatch()
		for r := range int(rec.NumRows()) {
			if err := fn(rec, cols, r); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}
