package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

func (s *Server) register() {
	// Pages (pages.go) and the forms behind their buttons.
	s.handle("GET", "/{$}", view, s.pageHome)
	s.handle("GET", "/pipelines", view, s.pagePipelines)
	s.handle("GET", "/pipelines/{name}", view, s.pagePipeline)
	s.handle("POST", "/pipelines/{name}/run", change, s.formTrigger)
	s.handle("GET", "/runs", view, s.pageRuns)
	s.handle("GET", "/runs/{id}", view, s.cached(s.pageRun))
	s.handle("GET", "/runs/{id}/rollback", view, s.pageRollback)
	s.handle("POST", "/runs/{id}/rollback", change, s.formRollback)
	s.handle("GET", "/pipelines/{name}/backfill", view, s.pageBackfill)
	s.handle("POST", "/pipelines/{name}/backfill", change, s.formBackfill)
	s.handle("POST", "/pipelines/{name}/pause", change, s.formPause(true))
	s.handle("POST", "/pipelines/{name}/resume", change, s.formPause(false))
	s.handle("POST", "/runs/{id}/cancel", change, s.formCancel)
	s.handle("POST", "/runs/{id}/retry", change, s.formRetry)
	s.handle("GET", "/tables", view, s.pageTables)
	s.handle("GET", "/tables/{name}", view, s.pageTable)
	s.handle("GET", "/tables/{name}/schema", view, s.pageSchema)
	s.handle("GET", "/tables/{name}/history", view, s.pageHistory)
	s.handle("GET", "/tables/{name}/rows", view, s.heavy(sorted, s.pageRows))
	s.handle("GET", "/tables/{name}/changes", view, s.heavy(nil, s.pageChanges))
	s.handle("GET", "/tables/{name}/diff", view, s.heavy(nil, s.pageDiff))
	s.handle("GET", "/login", public, s.pageLogin)
	s.handle("POST", "/login", public, s.postLogin)
	s.handle("POST", "/logout", public, s.postLogout)
	s.handle("GET", "/static/{file}", public, s.static)
	s.handle("GET", "/healthz", public, s.healthz)
	s.handle("GET", "/metrics", view, s.metricsHandler().ServeHTTP)

	// The JSON API: everything the pages show.
	s.handle("GET", "/api/v1/openapi.json", public, s.openAPI)
	s.handle("GET", "/api/v1/pipelines", view, s.apiPipelines)
	s.handle("GET", "/api/v1/pipelines/{name}", view, s.apiPipeline)
	s.handle("POST", "/api/v1/pipelines/{name}/runs", change, s.apiTrigger)
	s.handle("GET", "/api/v1/pipelines/{name}/grid", view, s.apiGrid)
	s.handle("GET", "/api/v1/runs", view, s.apiRuns)
	s.handle("GET", "/api/v1/runs/{id}", view, s.cached(s.apiRun))
	s.handle("POST", "/api/v1/runs/{id}/cancel", change, s.apiCancel)
	s.handle("POST", "/api/v1/runs/{id}/retry", change, s.apiRetry)
	s.handle("GET", "/api/v1/runs/{id}/events", view, s.apiEvents)
	s.handle("GET", "/api/v1/runs/{id}/rollback", view, s.apiRollbackPlan)
	s.handle("POST", "/api/v1/runs/{id}/rollback", change, s.apiRollback)
	s.handle("GET", "/api/v1/pipelines/{name}/backfill", view, s.apiBackfillPlan)
	s.handle("POST", "/api/v1/pipelines/{name}/backfill", change, s.apiBackfill)
	s.handle("POST", "/api/v1/pipelines/{name}/pause", change, s.apiPause(true))
	s.handle("POST", "/api/v1/pipelines/{name}/resume", change, s.apiPause(false))
	s.handle("GET", "/api/v1/runs/{id}/stages/{stage}/log", view, s.apiStageLog)
	s.handle("GET", "/api/v1/tables", view, s.apiTables)
	s.handle("GET", "/api/v1/tables/{name}", view, s.apiTable)
	s.handle("GET", "/api/v1/tables/{name}/schema", view, s.apiSchema)
	s.handle("GET", "/api/v1/tables/{name}/history", view, s.apiHistory)
	s.handle("GET", "/api/v1/tables/{name}/rows", view, s.heavy(sorted, s.apiRows))
	s.handle("GET", "/api/v1/tables/{name}/changes", view, s.heavy(nil, s.apiChanges))
	s.handle("GET", "/api/v1/tables/{name}/diff", view, s.heavy(nil, s.apiDiff))
	s.mux.Handle("/", s.guard(view, func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.fail(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: this path answers %s only", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		s.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	}))
}

// allowed lists the methods a registered route answers at the request's path (none: the
// path is no route's, a 404).
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
			if m == http.MethodGet {
				out = append(out, http.MethodHead)
			}
		}
	}
	return out
}

func (s *Server) apiPipelines(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Pipelines  []pipelineView `json:"pipelines"`
		LoadErrors []LoadError    `json:"load_errors"`
	}{Pipelines: []pipelineView{}, LoadErrors: s.loadErrors()}
	for _, spec := range s.pipelines() {
		out.Pipelines = append(out.Pipelines, s.pipelineView(r.Context(), spec))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) loadErrors() []LoadError {
	if errs := s.cfg.LoadErrors(); errs != nil {
		return errs
	}
	return []LoadError{}
}

func (s *Server) apiPipeline(w http.ResponseWriter, r *http.Request) {
	spec := s.sched.Pipeline(r.PathValue("name"))
	if spec == nil {
		s.apiError(w, r, notFoundf("no loaded pipeline %q", r.PathValue("name")))
		return
	}
	v := s.pipelineView(r.Context(), spec)
	writeJSON(w, http.StatusOK, struct {
		pipelineView
		Definition string `json:"definition"`
	}{v, string(spec.Source)})
}

// triggerBody is the body of POST /api/v1/pipelines/{name}/runs.
type triggerBody struct {
	Params map[string]string `json:"params"`
}

// params reads a trigger's parameters: a JSON body {"params": {...}}, or a form whose
// fields param.NAME carry them.
func readParams(r *http.Request) (map[string]string, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var b triggerBody
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil && !errors.Is(err, io.EOF) {
			return nil, bodyError(err, `{"params": {"NAME": "VALUE"}}`)
		}
		return b.Params, nil
	case "application/x-www-form-urlencoded", "multipart/form-data", "":
		if err := r.ParseForm(); err != nil {
			return nil, bodyError(err, "a form")
		}
		params := map[string]string{}
		for k, vs := range r.PostForm {
			if name, ok := strings.CutPrefix(k, "param."); ok && len(vs) > 0 && vs[0] != "" {
				params[name] = vs[0]
			}
		}
		return params, nil
	}
	return nil, &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q: want application/json or a form", ct)}
}

// who names the person behind a request in the records it creates.
func who(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return "web@" + strings.Trim(host, "[]")
}

func (s *Server) trigger(r *http.Request) (*scheduler.Record, error) {
	name := r.PathValue("name")
	spec := s.sched.Pipeline(name)
	if spec == nil {
		return nil, notFoundf("no loaded pipeline %q", name)
	}
	params, err := readParams(r)
	if err != nil {
		return nil, err
	}
	if _, err := spec.ResolveParams(params); err != nil {
		return nil, badRequestf("%v", err)
	}
	rec, err := s.sched.Submit(r.Context(), name, scheduler.Trigger{Kind: scheduler.Manual, By: who(r), Params: params})
	if err == nil {
		s.forget(name)
	}
	return rec, err
}

// runAnswer is the answer to a request that starts a run (trigger, retry, rollback): the
// run's id and state and where to follow it, not its whole record.
type runAnswer struct {
	ID       string                `json:"id"`
	Pipeline string                `json:"pipeline"`
	Status   scheduler.Status      `json:"status"`
	Trigger  scheduler.TriggerKind `json:"trigger"`
	Of       string                `json:"of,omitempty"`
	Stages   []string              `json:"stages,omitempty"`
	Links    map[string]string     `json:"links"`
}

func answerOf(rec *scheduler.Record) runAnswer {
	id := pathEscape(rec.ID)
	return runAnswer{ID: rec.ID, Pipeline: rec.Pipeline, Status: rec.Status, Trigger: rec.Trigger.Kind, Of: rec.Trigger.Of, Stages: rec.Trigger.Stages,
		Links: map[string]string{"self": "/api/v1/runs/" + id, "page": "/runs/" + id, "events": "/api/v1/runs/" + id + "/events"}}
}

// started answers 202 with a run just started.
func started(w http.ResponseWriter, rec *scheduler.Record) {
	w.Header().Set("Location", "/api/v1/runs/"+pathEscape(rec.ID))
	writeJSON(w, http.StatusAccepted, answerOf(rec))
}

func (s *Server) apiTrigger(w http.ResponseWriter, r *http.Request) {
	rec, err := s.trigger(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	started(w, rec)
}

func (s *Server) apiGrid(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q := r.URL.Query()
	q.Set("pipeline", name)
	rq, err := s.parseRunsQuery(q, 25)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	cols, rows, next, err := s.grid(r.Context(), name, rq)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"stages": cols, "runs": rows, "next_cursor": next})
}

func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request) {
	rq, err := s.parseRunsQuery(r.URL.Query(), 50)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	entries, next, err := s.listRuns(r.Context(), rq)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	now := s.cfg.Now()
	out := make([]runEntry, len(entries))
	for i, e := range entries {
		out[i] = entryView(s.fresh(e), now)
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out, "next_cursor": next})
}

// record reads the run a request names; an id that is no run id, or whose pipeline is
// not loaded, is not found.
func (s *Server) record(r *http.Request) (*scheduler.Record, error) {
	id := r.PathValue("id")
	pipeline, _, err := scheduler.ParseID(id)
	if err != nil {
		return nil, notFoundf("%v", err)
	}
	if s.sched.Pipeline(pipeline) == nil {
		return nil, notFoundf("run %s: pipeline %s is not loaded", id, pipeline)
	}
	rec, err := s.sched.Record(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return rec, nil
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		*scheduler.Record
		Outcome string `json:"outcome"`
	}{rec, rec.Entry().Outcome()})
}

func (s *Server) cancel(r *http.Request) (*scheduler.Record, string, error) {
	rec, err := s.record(r)
	if err != nil {
		return nil, "", err
	}
	if !rec.Status.Active() {
		return nil, "", conflictf("run %s is %s already: only a queued or running run can be cancelled", rec.ID, rec.Status)
	}
	msg, err := s.sched.CancelRun(r.Context(), rec.ID, who(r))
	if err != nil {
		return nil, "", conflictf("%v", err)
	}
	return rec, msg, nil
}

func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request) {
	rec, msg, err := s.cancel(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run": rec.ID, "result": msg})
}

func (s *Server) retry(r *http.Request) (*scheduler.Record, error) {
	old, err := s.record(r)
	if err != nil {
		return nil, err
	}
	rec, err := s.sched.Retry(r.Context(), old.ID, who(r))
	if err != nil {
		return nil, conflictf("%v", err) // one retry at a time: the error names the active one
	}
	s.forget(old.Pipeline)
	s.obs.changed(old.ID)
	return rec, nil
}

func (s *Server) apiRetry(w http.ResponseWriter, r *http.Request) {
	rec, err := s.retry(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	started(w, rec)
}

// apiStageLog answers a stage's whole log (the record keeps its last lines).
func (s *Server) apiStageLog(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	sr := rec.Stage(r.PathValue("stage"))
	if sr == nil {
		s.apiError(w, r, notFoundf("run %s has no stage %q", rec.ID, r.PathValue("stage")))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if sr.LogObject != "" {
		if st := s.sched.StoreOf(rec.Pipeline); st != nil {
			if rc, err := st.Log(r.Context(), rec, sr.Name); err == nil {
				defer rc.Close()
				io.Copy(w, rc)
				return
			}
		}
	}
	for _, l := range sr.Log {
		fmt.Fprintln(w, l)
	}
}

func (s *Server) apiTables(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		Name        string   `json:"name"`
		Description string   `json:"description,omitempty"`
		Pipelines   []string `json:"pipelines"`
	}
	out := []entry{}
	for _, ref := range s.catalog() {
		out = append(out, entry{ref.Name, ref.decl.Description, ref.Pipelines})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tables": out})
}

// tableOf finds the declared table a request names.
func (s *Server) tableOf(r *http.Request) (*tableRef, error) {
	return s.lookup(r.PathValue("name"), r.URL.Query().Get("pipeline"))
}

func (s *Server) apiTable(w http.ResponseWriter, r *http.Request) {
	ref, err := s.tableOf(r)
	if err == nil {
		var ti *tableInfo
		if ti, err = s.tableInfo(r.Context(), ref); err == nil {
			writeJSON(w, http.StatusOK, ti)
			return
		}
	}
	s.apiError(w, r, err)
}

func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	ref, err := s.tableOf(r)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	limit, err := s.parseLimit(r.URL.Query(), 50)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	h, err := s.history(r.Context(), ref, limit)
	if err != nil {
		s.apiError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"table": ref.Name, "history": h})
}

func (s *Server) apiRows(w http.ResponseWriter, r *http.Request) {
	ref, err := s.tableOf(r)
	if err == nil {
		var rq *rowsQuery
		if rq, err = s.parseRowsQuery(r.URL.Query()); err == nil {
			var res *rowsResult
			if res, err = s.rows(r.Context(), ref, rq); err == nil {
				writeJSON(w, http.StatusOK, res)
				return
			}
		}
	}
	s.apiError(w, r, err)
}

func (s *Server) apiChanges(w http.ResponseWriter, r *http.Request) {
	ref, err := s.tableOf(r)
	if err == nil {
		var cq *changesQuery
		if cq, err = s.parseChangesQuery(r.URL.Query()); err == nil {
			var res *changesResult
			if res, err = s.changes(r.Context(), ref, cq); err == nil {
				writeJSON(w, http.StatusOK, res)
				return
			}
		}
	}
	s.apiError(w, r, err)
}

func (s *Server) apiDiff(w http.ResponseWriter, r *http.Request) {
	ref, err := s.tableOf(r)
	if err == nil {
		var dq *diffQuery
		if dq, err = s.parseDiffQuery(r.URL.Query()); err == nil {
			var res *diffResult
			if res, err = s.diff(r.Context(), ref, dq); err == nil {
				writeJSON(w, http.StatusOK, res)
				return
			}
		}
	}
	s.apiError(w, r, err)
}
