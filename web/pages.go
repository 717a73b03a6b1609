package web

import (
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

func pathEscape(s string) string { return url.PathEscape(s) }

func (s *Server) pageHome(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/pipelines", http.StatusSeeOther)
}

// pipelinesPage is the body of the pipelines page.
type pipelinesPage struct {
	Pipelines  []pipelineRow
	LoadErrors []LoadError
	Active     int
}

type pipelineRow struct {
	pipelineView
	Strip template.HTML
}

func (s *Server) pagePipelines(w http.ResponseWriter, r *http.Request) {
	p := pipelinesPage{LoadErrors: s.cfg.LoadErrors()}
	for _, spec := range s.pipelines() {
		v := s.pipelineView(r.Context(), spec)
		p.Active += v.Active
		p.Pipelines = append(p.Pipelines, pipelineRow{pipelineView: v, Strip: stripSVG(v.Recent)})
	}
	if r.URL.Query().Get("partial") == "1" {
		s.renderTemplate(w, r, http.StatusOK, "pipelines", "live", "", "", p)
		return
	}
	s.render(w, r, http.StatusOK, "pipelines", "Pipelines", "pipelines", p)
}

// pipelinePage is a pipeline with its runs grid.
type pipelinePage struct {
	pipelineView
	Definition string
	Stages     []string
	Runs       []gridRow
	Next       string // cursor of the next page
	Status     string
	Trigger    string
	Limit      int
	First      bool // the first page
	States     []scheduler.Status
	Triggers   []scheduler.TriggerKind
	Total      int64
	Graph      template.HTML
}

func (s *Server) pagePipeline(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	spec := s.sched.Pipeline(name)
	if spec == nil {
		s.pageError(w, r, notFoundf("no loaded pipeline %q", name))
		return
	}
	q := r.URL.Query()
	q.Set("pipeline", name)
	rq, err := s.parseRunsQuery(q, 25)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	cols, rows, next, err := s.grid(r.Context(), name, rq)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	p := pipelinePage{pipelineView: s.pipelineView(r.Context(), spec), Definition: string(spec.Source), Stages: cols, Runs: rows, Next: next,
		Status: q.Get("status"), Trigger: q.Get("trigger"), Limit: rq.limit, First: q.Get("cursor") == "", States: runStates, Triggers: triggerKinds}
	if st := s.sched.StoreOf(name); st != nil {
		if lo, hi, err := st.Span(r.Context(), name); err == nil {
			p.Total = hi - lo
		}
	}
	var nodes []dagNode
	for _, st := range spec.Stages {
		nodes = append(nodes, dagNode{Name: st.Name, Kind: string(st.Kind), DependsOn: st.DependsOn})
	}
	p.Graph = dagSVG(nodes)
	if q.Get("partial") == "1" {
		s.renderTemplate(w, r, http.StatusOK, "pipeline", "live", "", "", p)
		return
	}
	s.render(w, r, http.StatusOK, "pipeline", "Pipeline "+name, "pipelines", p)
}

func (s *Server) formTrigger(w http.ResponseWriter, r *http.Request) {
	rec, err := s.trigger(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	http.Redirect(w, r, "/runs/"+pathEscape(rec.ID), http.StatusSeeOther)
}

func (s *Server) formCancel(w http.ResponseWriter, r *http.Request) {
	rec, _, err := s.cancel(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	http.Redirect(w, r, "/runs/"+pathEscape(rec.ID), http.StatusSeeOther)
}

func (s *Server) formRetry(w http.ResponseWriter, r *http.Request) {
	rec, err := s.retry(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	http.Redirect(w, r, "/runs/"+pathEscape(rec.ID), http.StatusSeeOther)
}

// runPage is the body of a run's page.
type runPage struct {
	Rec      *scheduler.Record
	State    runEntry // the run as its pipeline's list shows it (its outcome)
	Duration time.Duration
	Graph    template.HTML
	Gantt    template.HTML
	Stages   []stageView
	Params   []paramValue
	// CanRetry: it ended without succeeding and no retry of it is active or succeeded;
	// CanRollback: it ended having committed to a table, and is not rolled back.
	CanRetry, CanRollback bool
	Loaded                bool // its pipeline is loaded (the buttons need it)
	// Open is the stage whose log is shown open (?stage=, a grid cell's link).
	Open string
}

type paramValue struct{ Name, Value string }

// stageView is a stage's row on the run page.
type stageView struct {
	scheduler.StageRecord
	Duration time.Duration
	Retries  int
	// Log is the last lines shown inline (of a stage that did not succeed); LogLines
	// counts them all (the whole log is linked).
	Log      []string
	LogLines int
}

// inlineLogLines is how many of a stage's last log lines the run page shows.
const inlineLogLines = 20

func (s *Server) pageRun(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	now := s.cfg.Now()
	p := runPage{Rec: rec, State: entryView(rec.Entry(), now), Gantt: ganttSVG(rec, now), Loaded: true, Open: r.URL.Query().Get("stage")}
	switch {
	case !rec.Start.IsZero() && !rec.End.IsZero():
		p.Duration = rec.End.Sub(rec.Start)
	case !rec.Start.IsZero():
		p.Duration = now.Sub(rec.Start)
	}
	for _, k := range sortedKeys(rec.Params) {
		p.Params = append(p.Params, paramValue{k, rec.Params[k]})
	}
	var nodes []dagNode
	for _, sr := range rec.Stages {
		nodes = append(nodes, dagNode{Name: sr.Name, Kind: sr.Kind, DependsOn: sr.DependsOn, Status: sr.Status})
		sv := stageView{StageRecord: sr, Retries: max(len(sr.Attempts)-1, 0)}
		switch {
		case !sr.Start.IsZero() && !sr.End.IsZero():
			sv.Duration = sr.End.Sub(sr.Start)
		case !sr.Start.IsZero() && sr.Status == scheduler.Running:
			sv.Duration = now.Sub(sr.Start)
		}
		// The tail of the log is on the page where something went wrong; every log is a
		// link away (the page of a 100-stage run stays light).
		sv.LogLines = len(sr.Log) + sr.LogDropped
		if (sr.Status != scheduler.Succeeded && sr.Status != scheduler.Skipped && sr.Status != scheduler.Queued) || sr.Name == p.Open {
			sv.Log = sr.Log[max(len(sr.Log)-inlineLogLines, 0):]
		}
		p.Stages = append(p.Stages, sv)
		if sr.Status != scheduler.Succeeded {
			p.CanRetry = true
		}
		if len(sr.VersionsWritten) > 0 && sr.Kind != string(jobs.KindVacuum) {
			p.CanRollback = true
		}
	}
	if len(rec.Stages) == 0 && rec.Status != scheduler.Succeeded {
		p.CanRetry = true
	}
	ended := !rec.Status.Active() && rec.Status != scheduler.Skipped
	p.CanRetry = p.CanRetry && ended && !rec.RetryStatus.Active() && rec.RetryStatus != scheduler.Succeeded && rec.RolledBackBy == "" && rec.Trigger.Kind != scheduler.Rollback
	p.CanRollback = p.CanRollback && ended && rec.RolledBackBy == "" && rec.Trigger.Kind != scheduler.Rollback
	p.Graph = dagSVG(nodes)
	if r.URL.Query().Get("partial") == "1" {
		s.renderTemplate(w, r, http.StatusOK, "run", "live", "", "", p)
		return
	}
	s.render(w, r, http.StatusOK, "run", "Run "+rec.ID, "pipelines", p)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
