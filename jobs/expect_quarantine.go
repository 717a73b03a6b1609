package jobs

import (
	"context"
	"time"
)

// quarantinedEvent is a source row a merge's row checks set aside, with the source
// version it came from.
type quarantinedEvent struct {
	version int64
	rec     *badRecord
}

// quarantineEvents writes the change events a merge's row checks set aside to its
// quarantine table (table), in one commit before the merge's own, whose txn (appID)
// records the source version (latest) they were read through. A rerun (after a crash
// between the two commits, or a conflict) reads those events again and writes only
// those of later versions: none is quarantined twice. Nothing is committed when no
// event was set aside.
func quarantineEvents(ctx context.Context, env *Env, table, appID string, events []quarantinedEvent, latest int64, res *Result) error {
	if len(events) == 0 {
		return nil
	}
	q, err := openQuarantine(ctx, env, table)
	if err != nil {
		return err
	}
	done, _ := q.done(appID)
	var bad []*badRecord
	for _, e := range events {
		if e.version > done {
			bad = append(bad, e.rec)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, b := range bad {
		want[b.file] = true
	}
	rec, rows := quarantineRows(q.schema, bad, want, env.Now().UTC().Truncate(time.Microsecond))
	defer rec.Release()
	return q.append(ctx, env, rec, rows, []quarantineTxn{{appID, latest}}, "source rows", res)
}
