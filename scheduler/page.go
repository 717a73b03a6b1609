package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	if before > 0 && before-1 < hi {
		hi = before - 1
	}
	examined := 0
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
			if e := entries[i]; e != nil && (filter == nil || filter(*e)) {
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

// Log opens the whole log of a stage of a run, stored when the record keeps only its
// last lines (StageRecord.LogObject).
func (s *Store) Log(ctx context.Context, r *Record, stage string) (io.ReadCloser, error) {
	return s.st.Get(ctx, logKey(r.ID, r.Pipeline, stage))
}
