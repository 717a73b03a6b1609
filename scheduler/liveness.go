package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// maxSlotAttempts bounds how often an interrupted slot is run again.
const maxSlotAttempts = 3

// checkLiveness marks interrupted every active run of the store that no one keeps
// alive: its heartbeat is older than the timeout, or its process on this host is gone.
// An interrupted slot of a loaded pipeline becomes a candidate to run again under its
// catch-up policy (plan decides).
func (s *Scheduler) checkLiveness(ctx context.Context, st *Store, now time.Time) {
	ids, err := st.ActiveIDs(ctx)
	if err != nil {
		s.log.Warn("list active runs", "err", err)
		return
	}
	owned := map[string]bool{}
	for _, r := range s.runner.Owned() {
		owned[r.ID] = true
	}
	me := s.runner.Identity()
	for _, id := range ids {
		if owned[id] {
			continue
		}
		rec, err := st.Get(ctx, id)
		switch {
		case errors.Is(err, objectstore.ErrNotExist):
			_ = st.st.Delete(ctx, activeDir+id+".json") // a marker whose creator lost the id
			continue
		case err != nil:
			s.log.Warn("read an active run", "run", id, "err", err)
			continue
		case !rec.Status.Active():
			_ = st.st.Delete(ctx, activeDir+id+".json")
			continue
		}
		reason := staleReason(rec, now, s.cfg.HeartbeatTimeout, me, s.cfg.Alive)
		if reason == "" {
			continue
		}
		rec.Status, rec.Reason, rec.End = Interrupted, reason, now.UTC()
		for i := range rec.Stages {
			if rec.Stages[i].Status.Active() {
				rec.Stages[i].Status = Interrupted
			}
		}
		if rec.Seq == 0 { // claimed, and its run never started
			err = st.Index(ctx, rec)
		} else {
			err = st.Save(ctx, rec)
		}
		if err != nil {
			s.log.Warn("mark a run interrupted", "run", id, "err", err)
			continue
		}
		s.log.Info("run interrupted", "run", id, "reason", reason)
		if err := st.noteRetry(ctx, rec); err != nil {
			s.log.Warn("note a retry's state on the run it retries", "run", id, "err", err)
		}
		if (rec.Trigger.Kind == Scheduled || rec.Trigger.Kind == Catchup) && rec.Attempt < maxSlotAttempts {
			s.mu.Lock()
			if ps := s.pipes[rec.Pipeline]; ps != nil && !ps.removed && ps.store == st {
				ps.reruns = append(ps.reruns, rec)
			}
			s.mu.Unlock()
		}
	}
}

// staleReason says why an active record is dead, or "" while it may be alive. A record
// without a heartbeat (a request not yet taken) counts from its creation.
func staleReason(rec *Record, now time.Time, timeout time.Duration, me Identity, alive func(string, int) bool) string {
	hb := rec.Heartbeat
	if hb == nil {
		if now.Sub(rec.Created) > timeout {
			return fmt.Sprintf("no process took the run up within %s of its creation at %s", timeout, rec.Created.Format(time.RFC3339))
		}
		return ""
	}
	if hb.Host == me.Host && hb.PID != me.PID && !alive(hb.Host, hb.PID) {
		return fmt.Sprintf("its process is gone: host %s pid %d, last heartbeat %s", hb.Host, hb.PID, hb.Time.Format(time.RFC3339))
	}
	if now.Sub(hb.Time) > timeout {
		return fmt.Sprintf("no heartbeat for %s: host %s pid %d, last heartbeat %s", now.Sub(hb.Time).Round(time.Second), hb.Host, hb.PID, hb.Time.Format(time.RFC3339))
	}
	return ""
}
