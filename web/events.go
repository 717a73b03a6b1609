package web

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// Event streams (GET /api/v1/runs/{id}/events): Server-Sent Events, one "run" event
// each time the run's record changes (its heartbeat aside), carrying its state and
// stages' states; the page then fetches its live part again. An event's id is a
// fingerprint of the record, so a client that reconnects with Last-Event-ID gets an
// event only if the run changed meanwhile (a stream of states, not of deltas, misses
// nothing by resuming from the newest). A run of this process wakes its streams at
// once; a run of another process is read from the run store every second. The stream
// ends after the event of a final state.

// streamPoll is how often a stream reads the record of a run another process runs.
const streamPoll = time.Second

// keepAlive is how often an idle stream sends a comment, so proxies keep it open.
const keepAlive = 15 * time.Second

// runEvent is the data of a "run" event.
type runEvent struct {
	ID     string        `json:"id"`
	Status string        `json:"status"`
	Stages []stageStatus `json:"stages"`
}

type stageStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// fingerprint identifies a record's content, its heartbeat aside.
func fingerprint(rec *scheduler.Record) string {
	c := *rec
	c.Heartbeat = nil
	b, _ := json.Marshal(&c)
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	wake, cancel := s.obs.subscribe(rec.ID)
	defer cancel()
	poll := time.NewTicker(streamPoll)
	defer poll.Stop()
	idle := time.Now()
	write := func(format string, a ...any) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(w, format, a...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: 2000\n\n") {
		return
	}
	for {
		if id := fingerprint(rec); id != last {
			ev := runEvent{ID: rec.ID, Status: string(rec.Status), Stages: []stageStatus{}}
			for _, sr := range rec.Stages {
				ev.Stages = append(ev.Stages, stageStatus{sr.Name, string(sr.Status)})
			}
			b, _ := json.Marshal(ev)
			if !write("event: run\nid: %s\ndata: %s\n\n", id, b) {
				return
			}
			last, idle = id, time.Now()
		}
		if !rec.Status.Active() {
			write("event: end\ndata: {}\n\n")
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		case <-wake:
		case <-poll.C:
			if time.Since(idle) >= keepAlive {
				if !write(": keep-alive\n\n") {
					return
				}
				idle = time.Now()
			}
			if _, ok := s.sched.Runner().Record(rec.ID); ok {
				continue // a live run wakes its stream itself
			}
		}
		next, err := s.sched.Record(r.Context(), rec.ID)
		if err != nil {
			return
		}
		rec = next
	}
}
