package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Prune applies a pipeline's history retention: a run beyond the newest h.KeepRuns, or
// created more than h.KeepDays days before now, loses its record, logs and index entry;
// an active run (queued or running) is never removed. It returns how many runs went.
// The index is walked from its oldest kept entry up, so a prune reads only what it
// deletes (and the first entry it keeps), never the whole history.
func (s *Store) Prune(ctx context.Context, pipeline string, h pipelines.History, now time.Time) (int, error) {
	if h.KeepRuns <= 0 && h.KeepDays <= 0 {
		return 0, nil
	}
	latest, err := s.latestSeq(ctx, pipeline)
	if err != nil {
		return 0, err
	}
	var low struct {
		Seq int64 `json:"seq"`
	}
	if err := s.getJSON(ctx, stateKey(pipeline, "retention"), &low); err != nil && !errors.Is(err, objectstore.ErrNotExist) {
		return 0, err
	}
	byCount := int64(0) // entries up to this one are beyond keep_runs
	if h.KeepRuns > 0 {
		byCount = latest - int64(h.KeepRuns)
	}
	var before time.Time
	if h.KeepDays > 0 {
		before = now.Add(-time.Duration(h.KeepDays) * 24 * time.Hour)
	}
	removed, newLow, blocked := 0, low.Seq, false
	for lo := low.Seq + 1; lo <= latest; lo += 100 {
		hi := min(lo+99, latest)
		entries, err := s.readEntries(ctx, pipeline, lo, hi)
		if err != nil {
			return removed, err
		}
		for i, e := range entries {
			seq := lo + int64(i)
			if e == nil { // already removed
				if !blocked {
					newLow = seq
				}
				continue
			}
			old := seq <= byCount || (!before.IsZero() && e.Created.Before(before))
			if !old {
				return removed, s.setLow(ctx, pipeline, low.Seq, newLow)
			}
			gone, err := s.remove(ctx, e)
			if err != nil {
				return removed, err
			}
			if gone {
				removed++
				if !blocked {
					newLow = seq
				}
			} else {
				blocked = true // an active run: the low-water mark stays below it
			}
		}
	}
	return removed, s.setLow(ctx, pipeline, low.Seq, newLow)
}

func (s *Store) setLow(ctx context.Context, pipeline string, old, seq int64) error {
	if seq == old {
		return nil
	}
	return s.putJSON(ctx, stateKey(pipeline, "retention"), map[string]int64{"seq": seq}, false)
}

// remove deletes a run's record, logs and index entry, unless its record says it is
// active.
func (s *Store) remove(ctx context.Context, e *Entry) (bool, error) {
	rec, err := s.Get(ctx, e.ID)
	switch {
	case err == nil && rec.Status.Active():
		return false, nil
	case err == nil && rec.Seq != e.Seq:
		// The entry of a creator that lost the id: only the entry goes.
		return true, s.st.Delete(ctx, indexKey(e.Pipeline, e.Seq))
	case err != nil && !errors.Is(err, objectstore.ErrNotExist):
		return false, err
	}
	logs, err := s.st.List(ctx, logsDir+e.Pipeline+"/"+e.ID+"/", "")
	if err != nil {
		return false, err
	}
	for _, l := range logs {
		if err := s.st.Delete(ctx, l.Key); err != nil {
			return false, err
		}
	}
	key, err := recordKey(e.ID)
	if err != nil {
		return false, fmt.Errorf("index entry %d of %s: %w", e.Seq, e.Pipeline, err)
	}
	if err := s.st.Delete(ctx, key); err != nil {
		return false, err
	}
	return true, s.st.Delete(ctx, indexKey(e.Pipeline, e.Seq))
}
