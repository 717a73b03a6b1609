package web

import (
	"net/http"
	"sync"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// Health is the body of /healthz.
type Health struct {
	Status     string                 `json:"status"`
	Addr       string                 `json:"addr,omitempty"`
	Pipelines  []string               `json:"pipelines,omitempty"`
	Invalid    []string               `json:"invalid_files,omitempty"`
	Leases     []scheduler.LeaseState `json:"leases,omitempty"`
	ActiveRuns int                    `json:"active_runs"`
}

// healthz answers 200 (503 while stopping) with the pipelines, the files that failed
// to load, each warehouse's lease and the active runs. With a token, a request without
// it gets the status alone (a liveness probe needs no more).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	h := Health{Status: "ok"}
	code := http.StatusOK
	if s.cfg.Stopping() {
		h.Status, code = "stopping", http.StatusServiceUnavailable
	}
	if ro, _, err := s.cfg.Auth.identify(r, s.cfg.Now()); err == nil && ro != roleNone {
		h.Addr, h.Leases, h.ActiveRuns = s.cfg.Addr, s.sched.Leases(), len(s.sched.Runner().Owned())
		h.Pipelines = []string{}
		for _, spec := range s.pipelines() {
			h.Pipelines = append(h.Pipelines, spec.Name)
		}
		for _, le := range s.cfg.LoadErrors() {
			h.Invalid = append(h.Invalid, le.File)
		}
	}
	writeJSON(w, code, h)
}

// closer ends the event streams when the server shuts down.
type closer struct {
	once sync.Once
	ch   chan struct{}
}

// Close ends the open event streams (an http.Server's Shutdown waits for them
// otherwise); register it with http.Server.RegisterOnShutdown.
func (s *Server) Close() { s.closing.once.Do(func() { close(s.closing.ch) }) }
