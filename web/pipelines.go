package web

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/pipelines"
	"github.com/orchestrator-io/orchestrator/scheduler"
)

// pipelineView is what the pipelines page and GET /api/v1/pipelines show of one
// pipeline.
type pipelineView struct {
	Name          string      `json:"name"`
	Description   string      `json:"description,omitempty"`
	File          string      `json:"file"`
	Schedule      string      `json:"schedule,omitempty"`
	ScheduleWords string      `json:"schedule_words"`
	Timezone      string      `json:"timezone"`
	NextSlot      time.Time   `json:"next_slot,omitzero"`
	Catchup       string      `json:"catchup"`
	Overlap       string      `json:"overlap"`
	MaxActiveRuns int         `json:"max_active_runs"`
	Params        []paramView `json:"params"`
	Stages        []stageDecl `json:"stages"`
	Tables        []string    `json:"tables"`
	// LastRun is the newest run that is not a skipped slot; Recent the newest 20 runs,
	// newest first.
	LastRun *runEntry  `json:"last_run"`
	Recent  []runEntry `json:"recent"`
	// Active counts queued and running runs among Recent.
	Active int `json:"active"`
	// Paused is the pause of its schedule, if it is paused (its slots are recorded
	// skipped until it is resumed).
	Paused *scheduler.Pause `json:"paused,omitempty"`
	// Deadline is the watch of its deadline (deadline: in its file), if it has one;
	// Freshness the watches of its tables' freshness.
	Deadline  *watchView  `json:"deadline,omitempty"`
	Freshness []watchView `json:"freshness"`
}

// watchView is a deadline or freshness watch with its state in words.
type watchView struct {
	scheduler.Watch
	Limit string `json:"limit"`
	State string `json:"state"` // ok, breached, unknown
	Text  string `json:"text"`
	// Detail is Text without the state word its tag shows on the pages.
	Detail string `json:"-"`
}

func viewOfWatch(w scheduler.Watch) *watchView {
	v := &watchView{Watch: w, Limit: durationText(w.Limit), State: "ok", Text: w.Text()}
	if w.Limit%time.Hour != 0 {
		v.Limit = strings.TrimSuffix(strings.TrimSuffix(v.Limit, "0s"), "0m") // 45m, 1h30m
	}
	switch {
	case w.Breached:
		v.State = "breached"
	case w.Checked.IsZero() || w.Error != "" || (w.Kind == scheduler.WatchDeadline && w.Slot.IsZero()):
		v.State = "unknown"
	}
	if w.Error != "" {
		v.Text += " (last check failed: " + w.Error + ")"
	}
	v.Detail = v.Text
	if _, rest, ok := strings.Cut(v.Text, ": "); ok {
		v.Detail = rest // "fresh: ...", "late: ...", "deadline 45m: ..."
	}
	return v
}

type paramView struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Default     *string `json:"default,omitempty"`
	Description string  `json:"description,omitempty"`
}

type stageDecl struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	DependsOn []string `json:"depends_on,omitempty"`
}

// runEntry is a run as the run store's index lists it, with its duration and its
// outcome: its status as a person reads it ("rolled back", "retried: succeeded").
type runEntry struct {
	scheduler.Entry
	Outcome    string        `json:"outcome"`
	DurationMS float64       `json:"duration_ms,omitempty"`
	Duration   time.Duration `json:"-"`
}

func entryView(e scheduler.Entry, now time.Time) runEntry {
	re := runEntry{Entry: e, Outcome: e.Outcome()}
	switch {
	case !e.Start.IsZero() && !e.End.IsZero():
		re.Duration = e.End.Sub(e.Start)
	case !e.Start.IsZero() && e.Status == scheduler.Running:
		re.Duration = now.Sub(e.Start)
	}
	re.DurationMS = float64(re.Duration.Microseconds()) / 1000
	return re
}

// recentRuns is how many runs the pipelines page's bar strip shows.
const recentRuns = 20

// summaryTTL is how long a pipeline's summary is reused: the pipelines page of a
// thousand pipelines reads each index at most once a second.
const summaryTTL = time.Second

type summaryCache struct {
	mu sync.Mutex
	m  map[string]cachedSummary
}

type cachedSummary struct {
	at      time.Time
	hash    string
	recent  []scheduler.Entry
	lastRun *scheduler.Entry
}

func (s *Server) pipelineView(ctx context.Context, spec *pipelines.Spec) pipelineView {
	now := s.cfg.Now()
	v := pipelineView{
		Name: spec.Name, Description: spec.Description, File: spec.File, Schedule: spec.Schedule,
		Timezone: spec.Location.String(), Catchup: spec.Catchup, Overlap: spec.Overlap, MaxActiveRuns: spec.MaxActiveRuns,
		ScheduleWords: "on demand only", Params: []paramView{}, Recent: []runEntry{}, Freshness: []watchView{},
	}
	for _, w := range s.sched.Watches(spec.Name) {
		if w.Kind == scheduler.WatchDeadline {
			v.Deadline = viewOfWatch(w)
		} else {
			v.Freshness = append(v.Freshness, *viewOfWatch(w))
		}
	}
	if spec.Cron != nil {
		v.ScheduleWords = spec.Cron.Describe()
		v.NextSlot = s.sched.NextSlot(spec.Name, now)
	}
	if p, ok := s.sched.Paused(spec.Name); ok {
		v.Paused = &p
	}
	for _, p := range spec.Params {
		v.Params = append(v.Params, paramView{Name: p.Name, Type: p.Type, Default: p.Default, Description: p.Description})
	}
	for _, st := range spec.Stages {
		v.Stages = append(v.Stages, stageDecl{Name: st.Name, Kind: string(st.Kind), DependsOn: st.DependsOn})
	}
	for _, t := range spec.Tables {
		v.Tables = append(v.Tables, t.Name)
	}
	recent, last := s.recent(ctx, spec)
	for _, e := range recent {
		v.Recent = append(v.Recent, entryView(s.fresh(e), now))
		if e.Status.Active() {
			v.Active++
		}
	}
	if last != nil {
		le := entryView(s.fresh(*last), now)
		v.LastRun = &le
	}
	return v
}

// fresh updates an index entry with the live record of a run this process runs (the
// index is rewritten only when the run's status changes).
func (s *Server) fresh(e scheduler.Entry) scheduler.Entry {
	if !e.Status.Active() {
		return e
	}
	if rec, ok := s.sched.Runner().Record(e.ID); ok {
		e.Status, e.Start, e.End = rec.Status, rec.Start, rec.End
	}
	return e
}

// recent returns a pipeline's newest runs and its newest run that is not a skipped
// slot, from the index (cached for summaryTTL).
func (s *Server) recent(ctx context.Context, spec *pipelines.Spec) ([]scheduler.Entry, *scheduler.Entry) {
	now := time.Now()
	s.summaries.mu.Lock()
	c, ok := s.summaries.m[spec.Name]
	s.summaries.mu.Unlock()
	if ok && now.Sub(c.at) < summaryTTL && c.hash == spec.Hash {
		return c.recent, c.lastRun
	}
	st := s.sched.StoreOf(spec.Name)
	if st == nil {
		return nil, nil
	}
	recent, _, err := st.Page(ctx, spec.Name, 0, recentRuns, 0, nil)
	if err != nil {
		s.log.Warn("web: list runs", "pipeline", spec.Name, "err", err)
	}
	var last *scheduler.Entry
	for i := range recent {
		if recent[i].Status != scheduler.Skipped {
			last = &recent[i]
			break
		}
	}
	if last == nil && len(recent) == recentRuns {
		more, _, err := st.Page(ctx, spec.Name, recent[len(recent)-1].Seq, 1, 1000, func(e scheduler.Entry) bool { return e.Status != scheduler.Skipped })
		if err == nil && len(more) > 0 {
			last = &more[0]
		}
	}
	s.summaries.mu.Lock()
	if s.summaries.m == nil {
		s.summaries.m = map[string]cachedSummary{}
	}
	s.summaries.m[spec.Name] = cachedSummary{at: now, hash: spec.Hash, recent: recent, lastRun: last}
	s.summaries.mu.Unlock()
	return recent, last
}

// forget drops a pipeline's cached summary (a run of it changed state).
func (s *Server) forget(pipeline string) {
	s.summaries.mu.Lock()
	delete(s.summaries.m, pipeline)
	s.summaries.mu.Unlock()
}

// pipelinesByName returns the loaded pipelines, sorted.
func (s *Server) pipelines() []*pipelines.Spec {
	specs := s.sched.Pipelines()
	slices.SortFunc(specs, func(a, b *pipelines.Spec) int { return strings.Compare(a.Name, b.Name) })
	return specs
}
