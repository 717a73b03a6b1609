package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Requests let a process that does not hold a warehouse's lease (the CLI) hand work to
// the serve that does: a queued record plus a request to run it, or a request to cancel
// a run. The holder takes them up at its next tick.

// Request kinds.
const (
	RequestRun    = "run"
	RequestCancel = "cancel"
)

// request is the body of a request object.
type request struct {
	ID   string    `json:"id"`
	Kind string    `json:"kind"`
	By   string    `json:"by,omitempty"`
	Time time.Time `json:"time"`
}

func requestKey(id, kind string) string { return requestsDir + id + "." + kind + ".json" }

// Request asks the lease holder to run a queued record (RequestRun) or to cancel a run
// (RequestCancel).
func (s *Store) Request(ctx context.Context, id, kind, by string, now time.Time) error {
	return s.putJSON(ctx, requestKey(id, kind), request{ID: id, Kind: kind, By: by, Time: now.UTC()}, false)
}

// takeRequests carries out the store's pending requests.
func (s *Scheduler) takeRequests(ctx context.Context, st *Store, now time.Time) {
	infos, err := st.st.List(ctx, requestsDir, "")
	if err != nil {
		s.log.Warn("list run requests", "err", err)
		return
	}
	for _, in := range infos {
		var req request
		if err := st.getJSON(ctx, in.Key, &req); err != nil {
			if !errors.Is(err, objectstore.ErrNotExist) {
				s.log.Warn("read a run request", "key", in.Key, "err", err)
			}
			continue
		}
		switch req.Kind {
		case RequestRun:
			s.takeRun(ctx, st, req.ID)
		case RequestCancel:
			if _, err := s.Cancel(ctx, req.ID, or(req.By, "a request")); err != nil {
				s.log.Warn("cancel a run", "run", req.ID, "err", err)
			}
		}
		_ = st.st.Delete(ctx, in.Key)
	}
}

// takeRun adopts a queued record and queues it in its pipeline.
func (s *Scheduler) takeRun(ctx context.Context, st *Store, id string) {
	rec, err := st.Get(ctx, id)
	if err != nil || rec.Status != Queued {
		return
	}
	s.mu.Lock()
	ps := s.pipes[rec.Pipeline]
	s.mu.Unlock()
	if ps == nil || ps.removed || ps.store != st {
		rec.Status, rec.End = Failed, s.cfg.Now().UTC()
		rec.Error = fmt.Sprintf("pipeline %s is not loaded by the serve that took the request", rec.Pipeline)
		_ = st.Save(ctx, rec)
		return
	}
	spec := ps.spec
	if rec.Trigger.Kind == Retry { // a retry runs the definition of the run it retries
		if spec, err = SpecOf(rec, ps.spec.Options()); err != nil {
			rec.Status, rec.Error, rec.End = Failed, err.Error(), s.cfg.Now().UTC()
			_ = st.Save(ctx, rec)
			return
		}
	} else {
		if rec.Params, err = spec.ResolveParams(rec.Trigger.Params); err != nil {
			rec.Status, rec.Error, rec.End = Failed, err.Error(), s.cfg.Now().UTC()
			_ = st.Save(ctx, rec)
			return
		}
		rec.File, rec.DefinitionHash, rec.Definition = absFile(spec), spec.Hash, string(spec.Source)
	}
	if err := s.runner.Adopt(ctx, spec, st, rec); err != nil {
		s.log.Warn("take a run request", "run", id, "err", err)
		return
	}
	s.enqueue(ps, id)
}

// SpecOf reads the pipeline definition a record keeps, as its run read it.
func SpecOf(rec *Record, opts pipelines.Options) (*pipelines.Spec, error) {
	spec, err := pipelines.Parse(rec.File, []byte(rec.Definition), opts)
	if err != nil {
		return nil, fmt.Errorf("the definition run %s kept: %w", rec.ID, err)
	}
	return spec, nil
}

func or(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}
