package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Span returns the index numbers of a pipeline's runs: every kept run has one in
// (low, latest] (entries of removed runs are missing from it). It reads two small objects
// and lists the index keys after the hint, never the whole index.
func (s *Store) Span(ctx context.Context, pipeline string) (low, latest int64, err error) {
	latest, err = s.latestSeq(ctx, pipeline)
	if err != nil {
		return 0, 0, fmt.Errorf("runs of %s: %w", pipeline, err)
	}
	var lo struct{ Seq int64 }
	if err := s.getJSON(ctx, stateKey(pipeline, "retention"), &lo); err != nil && !errors.Is(err, objectstore.ErrNotExist) {
		return 0, 0, fmt.Errorf("runs of %s: %w", pipeline, err)
	}
	return lo.Seq, latest, nil
}

// Page lists, newest first, up to limit index entries of pipeline that filter takes
// (nil takes all) among those numbered below before (before ≤ 0: from the newest),
// examining at most scan entries (scan ≤ 0: max(10×limit, 1000)), so that a page of a
// rare status never reads a 100,000-run index at once. next is the number to pass as
// before for the following page (0: the oldest kept entry was examined).
func (s *Store) Page(ctx context.Context, pipeline string, before int64, limit, scan int, filter Filter) (out []Entry, next int64, err error) {
	return s.PageWith(ctx, pipeline, PageOptions{Before: before, Limit: limit, Scan: scan, Filter: filter})
}

// PageOptions select a page of a pipeline's runs for PageWith.
type PageOptions struct {
	Before      int64
	Limit, Scan int
	Filter      Filter
	// Since, when set, ends the listing once timeSlack entries in a row were created
	// before it: entries are numbered in about the order of their creation (a run is
	// numbered when it starts, runs are claimed concurrently), so a time range reads its
	// own entries and a few around them, not the older ones.
	Since time.Time
}

// timeSlack is how far, in index entries, the numbering may stray from the order of
// creation for a time range to be exact: a run claimed and then queued behind more
// than this many others may be missed by a listing by time.
const timeSlack = 256

// PageWith is Page with the options of o.
func (s *Store) PageWith(ctx context.Context, pipeline string, o PageOptions) (out []Entry, next int64, err error) {
	limit, scan := o.Limit, o.Scan
	if limit <= 0 {
		limit = 50
	}
	if scan <= 0 {
		scan = max(10*limit, 1000)
	}
	low, latest, err := s.Span(ctx, pipeline)
	if err != nil {
		return nil, 0, err
	}
	hi := latest
	if o.Before > 0 && o.Before-1 < hi {
		hi = o.Before - 1
	}
	examined, older := 0, 0
	batch := int64(min(limit, scan))
	for hi > low {
		lo := max(hi-batch+1, low+1)
		entries, err := s.readEntries(ctx, pipeline, lo, hi)
		if err != nil {
			return nil, 0, fmt.Errorf("list runs of %s: %w", pipeline, err)
		}
		for i := len(entries) - 1; i >= 0; i-- {
			seq := lo + int64(i)
			examined++
			e := entries[i]
			if e != nil && !o.Since.IsZero() {
				if !e.Created.Before(o.Since) {
					older = 0
				} else if older++; older >= timeSlack {
					return out, 0, nil // past the range: done
				}
			}
			if e != nil && (o.Filter == nil || o.Filter(*e)) {
				out = append(out, *e)
			}
			if len(out) == limit || examined >= scan {
				if seq-1 <= low {
					return out, 0, nil
				}
				return out, seq, nil
			}
		}
		hi = lo - 1
		batch = min(batch*2, 1000, int64(scan-examined))
	}
	return out, 0, nil
}

// SeqAfter returns an index number to list a pipeline's runs created at or before t
// from (PageOptions.Before): a binary search over the index, a few dozen reads whatever
// its length. Entries are numbered in about the order of their creation; the number
// leaves room for the few that are not, which a filter on the creation time drops.
// 0 means from the newest.
func (s *Store) SeqAfter(ctx context.Context, pipeline string, t time.Time) (int64, error) {
	low, latest, err := s.Span(ctx, pipeline)
	if err != nil {
		return 0, err
	}
	created := func(seq int64) (time.Time, bool, error) {
		for k := seq; k > low && k > seq-16; k-- { // a removed entry: its neighbour
			var e Entry
			err := s.getJSON(ctx, indexKey(pipeline, k), &e)
			if errors.Is(err, objectstore.ErrNotExist) {
				continue
			}
			if err != nil {
				return time.Time{}, false, err
			}
			return e.Created, true, nil
		}
		return time.Time{}, false, nil
	}
	lo, hi := low+1, latest // find the first entry created after t
	if c, ok, err := created(hi); err != nil || !ok || !c.After(t) {
		return 0, err
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		c, ok, err := created(mid)
		if err != nil {
			return 0, err
		}
		if ok && c.After(t) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo+timeSlack > latest {
		return 0, nil
	}
	return lo + timeSlack, nil
}

// Log opens the whole log of a stage of a run, stored when the record keeps only its
// last lines (StageRecord.LogObject).
func (s *Store) Log(ctx context.Context, r *Record, stage string) (io.ReadCloser, error) {
	return s.st.Get(ctx, logKey(r.ID, r.Pipeline, stage))
}
