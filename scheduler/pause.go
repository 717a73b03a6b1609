package scheduler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
)

// A pipeline's schedule can be paused: its slots are then recorded skipped (reason
// "paused by WHO at WHEN"), by whichever serve holds the lease, until it is resumed.
// People's runs (trigger, retry, backfill, rollback) still run: a pause stops the
// schedule, not the operators. The state is in the run store, so every serve of the
// warehouse honours it and it survives restarts:
//
//	paused/<pipeline>.json            while the pipeline is paused (its Pause)
//	pipelines/<pipeline>/pause.json   the last pause or resume: who and when

const pausedDir = Prefix + "paused/"

var pipelineRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Pause is a pause or resume of a pipeline's schedule: who did it, when and why.
type Pause struct {
	Pipeline string    `json:"pipeline"`
	Paused   bool      `json:"paused"`
	By       string    `json:"by"`
	Time     time.Time `json:"time"`
	Reason   string    `json:"reason,omitempty"`
}

// Text says it for people: "paused by ann@host at 2026-01-14T10:00:00Z (reason)".
func (p Pause) Text() string {
	verb := "resumed"
	if p.Paused {
		verb = "paused"
	}
	t := fmt.Sprintf("%s by %s at %s", verb, p.By, p.Time.UTC().Format(time.RFC3339))
	if p.Reason != "" {
		t += " (" + p.Reason + ")"
	}
	return t
}

// SetPaused pauses (paused true) or resumes a pipeline's schedule, recording who, when
// and why; pausing a paused pipeline (or resuming a running one) is an error that says
// who did it.
func (s *Store) SetPaused(ctx context.Context, pipeline string, paused bool, by, reason string, now time.Time) (Pause, error) {
	if !pipelineRE.MatchString(pipeline) {
		return Pause{}, fmt.Errorf("invalid pipeline name %q", pipeline)
	}
	cur, err := s.PauseOf(ctx, pipeline)
	if err != nil {
		return Pause{}, err
	}
	if cur.Paused == paused && cur.Paused {
		return cur, fmt.Errorf("pipeline %s is already %s", pipeline, cur.Text())
	}
	if cur.Paused == paused {
		return cur, fmt.Errorf("pipeline %s is not paused", pipeline)
	}
	p := Pause{Pipeline: pipeline, Paused: paused, By: by, Time: now.UTC(), Reason: strings.TrimSpace(reason)}
	if err := s.putJSON(ctx, stateKey(pipeline, "pause"), p, false); err != nil {
		return Pause{}, err
	}
	if paused {
		err = s.putJSON(ctx, pausedDir+pipeline+".json", p, false)
	} else {
		err = s.st.Delete(ctx, pausedDir+pipeline+".json")
	}
	return p, err
}

// PauseOf returns the pipeline's last pause or resume (Paused false, By "" when there
// was none).
func (s *Store) PauseOf(ctx context.Context, pipeline string) (Pause, error) {
	var p Pause
	err := s.getJSON(ctx, pausedDir+pipeline+".json", &p)
	switch {
	case err == nil:
		return p, nil
	case !errors.Is(err, objectstore.ErrNotExist):
		return p, err
	}
	p = Pause{}
	if err := s.getJSON(ctx, stateKey(pipeline, "pause"), &p); err != nil && !errors.Is(err, objectstore.ErrNotExist) {
		return p, err
	}
	p.Pipeline, p.Paused = pipeline, false
	return p, nil
}

// PausedPipelines returns the paused pipelines of the store, by name: one listing.
func (s *Store) PausedPipelines(ctx context.Context) (map[string]Pause, error) {
	infos, err := s.st.List(ctx, pausedDir, "")
	if err != nil {
		return nil, err
	}
	out := map[string]Pause{}
	for _, in := range infos {
		var p Pause
		if err := s.getJSON(ctx, in.Key, &p); err != nil {
			if errors.Is(err, objectstore.ErrNotExist) {
				continue // resumed meanwhile
			}
			return nil, err
		}
		out[p.Pipeline] = p
	}
	return out, nil
}

// Pause pauses or resumes a loaded pipeline's schedule (Store.SetPaused); the lease
// holder honours it from its next tick.
func (s *Scheduler) Pause(ctx context.Context, name string, paused bool, by, reason string) (Pause, error) {
	st := s.StoreOf(name)
	if st == nil {
		return Pause{}, fmt.Errorf("pipeline %s is not loaded", name)
	}
	p, err := st.SetPaused(ctx, name, paused, by, reason, s.cfg.Now())
	if err != nil {
		return p, err
	}
	s.mu.Lock()
	if m := s.pausedIn[st]; m != nil {
		if paused {
			m[name] = p
		} else {
			delete(m, name)
		}
	}
	s.mu.Unlock()
	s.log.Info("schedule "+map[bool]string{true: "paused", false: "resumed"}[paused], "pipeline", name, "by", by, "reason", reason)
	return p, nil
}

// Paused returns the pause of a loaded pipeline as the scheduler read it at its last
// tick (ok false: it is not paused).
func (s *Scheduler) Paused(name string) (Pause, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.pipes[name]
	if ps == nil {
		return Pause{}, false
	}
	p, ok := s.pausedIn[ps.store][name]
	return p, ok
}

// PauseOf returns a loaded pipeline's last pause or resume, from the store.
func (s *Scheduler) PauseOf(ctx context.Context, name string) (Pause, error) {
	st := s.StoreOf(name)
	if st == nil {
		return Pause{}, fmt.Errorf("pipeline %s is not loaded", name)
	}
	return st.PauseOf(ctx, name)
}
