package web

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// The views operators expect besides a run's page: the runs of every pipeline, a
// rollback (its plan first, then a confirmation), a backfill (its slots first), and
// pausing and resuming a schedule. Each has its JSON route.

// runsPage is the page of runs across pipelines.
type runsPage struct {
	Runs                            []runEntry
	Next                            string
	First                           bool
	Pipelines                       []string // every loaded pipeline, for the filter
	Pipeline, Status, Trigger       string   // the filter as given
	From, To                        string
	States                          []scheduler.Status
	Triggers                        []scheduler.TriggerKind
	Limit                           int
	Query                           string // the filter's query string, for the pager
	Active                          int
	RollbackOf, RetryOf, BackfillOf bool
}

func (s *Server) pageRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := runsPage{Pipeline: q.Get("pipeline"), Status: q.Get("status"), Trigger: q.Get("trigger"), From: q.Get("from"), To: q.Get("to"),
		States: runStates, Triggers: triggerKinds, First: q.Get("cursor") == ""}
	for _, spec := range s.pipelines() {
		p.Pipelines = append(p.Pipelines, spec.Name)
	}
	rq, err := s.parseRunsQuery(q, 50)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	p.Limit = rq.limit
	entries, next, err := s.listRuns(r.Context(), rq)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	now := s.cfg.Now()
	for _, e := range entries {
		v := entryView(s.fresh(e), now)
		if v.Status.Active() {
			p.Active++
		}
		p.Runs = append(p.Runs, v)
	}
	p.Next = next
	keep := q
	keep.Del("cursor")
	keep.Del("partial")
	p.Query = keep.Encode()
	if q.Get("partial") == "1" {
		s.renderTemplate(w, r, http.StatusOK, "runs", "live", "", "", p)
		return
	}
	s.render(w, r, http.StatusOK, "runs", "Runs", "runs", p)
}

// rollbackPage shows a rollback's plan and asks for the confirmation.
type rollbackPage struct {
	Rec      *scheduler.Record
	Plan     *scheduler.RollbackPlan
	Problems []string
	Err      string
}

func (s *Server) pageRollback(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	p := rollbackPage{Rec: rec}
	code := http.StatusOK
	if p.Plan, _, err = s.sched.PlanRollback(r.Context(), rec.ID); err != nil {
		p.Err, code = err.Error(), http.StatusConflict
	} else {
		p.Problems = p.Plan.Problems()
	}
	s.render(w, r, code, "rollback", "Roll back "+rec.ID, "runs", p)
}

// rollbackBody is the body of POST /api/v1/runs/{id}/rollback.
type rollbackBody struct {
	Force bool `json:"force"`
}

func (s *Server) rollback(r *http.Request) (*scheduler.Record, error) {
	old, err := s.record(r)
	if err != nil {
		return nil, err
	}
	var b rollbackBody
	confirmed := true // a form confirms with its box; an API call by being made
	if err := readBody(r, &b, `{"force": false}`, func() {
		b.Force = r.PostForm.Get("force") == "1"
		confirmed = r.PostForm.Get("confirm") == "1"
	}); err != nil {
		return nil, err
	}
	if !confirmed {
		return nil, badRequestf("confirm the rollback: tick the box that says you read the plan")
	}
	rec, err := s.sched.Rollback(r.Context(), old.ID, b.Force, who(r))
	if err != nil {
		return nil, conflictf("%v", err)
	}
	s.forget(old.Pipeline)
	s.obs.changed(old.ID)
	return rec, nil
}

func (s *Server) formRollback(w http.ResponseWriter, r *http.Request) {
	rec, err := s.rollback(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	http.Redirect(w, r, "/runs/"+pathEscape(rec.ID), http.StatusSeeOther)
}

func (s *Server) apiRollbackPlan(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	plan, _, err := s.sched.PlanRollback(r.Context(), rec.ID)
	if err != nil {
		s.apiError(w, r, conflictf("%v", err))
		return
	}
	problems := plan.Problems()
	if problems == nil {
		problems = []string{}
	}
	writeJSON(w, http.StatusOK, struct {
		Run string `json:"run"`
		*scheduler.RollbackPlan
		Problems []string `json:"problems"`
	}{rec.ID, plan, problems})
}

func (s *Server) apiRollback(w http.ResponseWriter, r *http.Request) {
	rec, err := s.rollback(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	started(w, rec)
}

// backfillPage lists a backfill's slots before it is confirmed.
type backfillPage struct {
	pipelineView
	From, To string
	Rerun    bool
	Slots    []scheduler.BackfillSlot
	ToRun    int
	Err      string
}

// backfillQuery reads from, to and rerun (a query, a form or a JSON body).
type backfillQuery struct {
	From   string            `json:"from"`
	To     string            `json:"to"`
	Rerun  bool              `json:"rerun"`
	Params map[string]string `json:"params,omitempty"`
	from   time.Time
	to     time.Time
}

func (b *backfillQuery) parse() error {
	if b.From == "" || b.To == "" {
		return badRequestf("from and to are needed: the range of slots")
	}
	var err error
	if b.from, err = parseWhen(b.From, false); err != nil {
		return badRequestf("from %q: %v", b.From, err)
	}
	if b.to, err = parseWhen(b.To, true); err != nil {
		return badRequestf("to %q: %v", b.To, err)
	}
	return nil
}

func (s *Server) pageBackfill(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	spec := s.sched.Pipeline(name)
	if spec == nil {
		s.pageError(w, r, notFoundf("no loaded pipeline %q", name))
		return
	}
	q := r.URL.Query()
	p := backfillPage{pipelineView: s.pipelineView(r.Context(), spec), From: q.Get("from"), To: q.Get("to"), Rerun: q.Get("rerun") == "1"}
	code := http.StatusOK
	if p.From != "" || p.To != "" {
		bq := backfillQuery{From: p.From, To: p.To, Rerun: p.Rerun}
		err := bq.parse()
		if err == nil {
			p.Slots, err = s.sched.PlanBackfill(r.Context(), name, bq.from, bq.to, bq.Rerun)
		}
		if err != nil {
			p.Err, code = err.Error(), statusOf(err)
			if code == http.StatusInternalServerError {
				code = http.StatusBadRequest
			}
		}
		for _, sl := range p.Slots {
			if sl.Action != scheduler.BackfillSkip {
				p.ToRun++
			}
		}
	}
	s.render(w, r, code, "backfill", "Backfill "+name, "pipelines", p)
}

func (s *Server) backfill(r *http.Request, dry bool) ([]scheduler.BackfillSlot, []*scheduler.Record, error) {
	name := r.PathValue("name")
	if s.sched.Pipeline(name) == nil {
		return nil, nil, notFoundf("no loaded pipeline %q", name)
	}
	var b backfillQuery
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		b = backfillQuery{From: q.Get("from"), To: q.Get("to"), Rerun: q.Get("rerun") == "1" || q.Get("rerun") == "true"}
	} else if err := readBody(r, &b, `{"from": "2026-01-01", "to": "2026-01-07", "rerun": false}`, func() {
		b = backfillQuery{From: r.PostForm.Get("from"), To: r.PostForm.Get("to"), Rerun: r.PostForm.Get("rerun") == "1"}
	}); err != nil {
		return nil, nil, err
	}
	if err := b.parse(); err != nil {
		return nil, nil, err
	}
	if dry {
		slots, err := s.sched.PlanBackfill(r.Context(), name, b.from, b.to, b.Rerun)
		if err != nil {
			return nil, nil, badRequestf("%v", err)
		}
		return slots, nil, nil
	}
	slots, recs, err := s.sched.Backfill(r.Context(), name, b.from, b.to, b.Rerun, who(r), b.Params)
	if err != nil {
		return slots, recs, badRequestf("%v", err)
	}
	s.forget(name)
	return slots, recs, nil
}

func (s *Server) formBackfill(w http.ResponseWriter, r *http.Request) {
	_, recs, err := s.backfill(r, false)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	to := "/runs?pipeline=" + pathEscape(r.PathValue("name")) + "&trigger=backfill"
	if len(recs) == 1 {
		to = "/runs/" + pathEscape(recs[0].ID)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// slotView is a backfill slot in the API.
type slotView struct {
	Slot     time.Time        `json:"slot"`
	Run      string           `json:"run"`
	Action   string           `json:"action"`
	Existing scheduler.Status `json:"existing,omitempty"`
	Outcome  string           `json:"outcome,omitempty"`
	Attempt  int              `json:"attempt"`
}

func slotViews(slots []scheduler.BackfillSlot) []slotView {
	out := []slotView{}
	for _, b := range slots {
		out = append(out, slotView{b.Slot, b.ID, b.Action, b.Existing, b.Outcome, b.Attempt})
	}
	return out
}

func (s *Server) apiBackfillPlan(w http.ResponseWriter, r *http.Request) {
	slots, _, err := s.backfill(r, true)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"pipeline": r.PathValue("name"), "slots": slotViews(slots)})
}

func (s *Server) apiBackfill(w http.ResponseWriter, r *http.Request) {
	slots, recs, err := s.backfill(r, false)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	runs := []runAnswer{}
	for _, rec := range recs {
		runs = append(runs, answerOf(rec))
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"pipeline": r.PathValue("name"), "slots": slotViews(slots), "runs": runs})
}

// pauseBody is the body of POST /api/v1/pipelines/{name}/pause and /resume.
type pauseBody struct {
	Reason string `json:"reason"`
}

func (s *Server) pause(r *http.Request, paused bool) (scheduler.Pause, error) {
	name := r.PathValue("name")
	if s.sched.Pipeline(name) == nil {
		return scheduler.Pause{}, notFoundf("no loaded pipeline %q", name)
	}
	var b pauseBody
	if err := readBody(r, &b, `{"reason": "why"}`, func() { b.Reason = r.PostForm.Get("reason") }); err != nil {
		return scheduler.Pause{}, err
	}
	p, err := s.sched.Pause(r.Context(), name, paused, who(r), b.Reason)
	if err != nil {
		return p, conflictf("%v", err)
	}
	s.forget(name)
	return p, nil
}

func (s *Server) formPause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.pause(r, paused); err != nil {
			s.pageError(w, r, err)
			return
		}
		http.Redirect(w, r, "/pipelines/"+pathEscape(r.PathValue("name")), http.StatusSeeOther)
	}
}

func (s *Server) apiPause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.pause(r, paused)
		if err != nil {
			s.apiError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	}
}

// readBody reads a request's JSON body into v (an empty body leaves it as it is), or,
// for a form, parses it and calls form.
func readBody(r *http.Request, v any, want string, form func()) error {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
			return bodyError(err, want)
		}
		return nil
	case "application/x-www-form-urlencoded", "multipart/form-data":
		if err := r.ParseForm(); err != nil {
			return bodyError(err, "a form")
		}
		form()
		return nil
	case "":
		if r.ContentLength > 0 {
			return &httpError{http.StatusUnsupportedMediaType, "a body needs its content type: application/json"}
		}
		return nil
	}
	return &httpError{http.StatusUnsupportedMediaType, "content type " + strings.TrimSpace(ct) + ": want application/json or a form"}
}
