package web

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// metrics are what /metrics exposes (names in docs/web.md). Counters count what this
// process saw since it started (the runs it ran, the slots it handled).
type metrics struct {
	runs          *prometheus.CounterVec
	stageDuration *prometheus.HistogramVec
	rowsWritten   *prometheus.CounterVec
	commits       *prometheus.CounterVec
	conflicts     *prometheus.CounterVec
	retries       *prometheus.CounterVec
	slotLag       *prometheus.HistogramVec
	missed        *prometheus.CounterVec
	skipped       *prometheus.CounterVec
	tick          *prometheus.HistogramVec
	gauges        *gauges
	checks        *checkMetrics
}

func newMetrics(o *Observer) *metrics {
	return &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_runs_total",
			Help: "Runs that ended in this process, by pipeline and final status."}, []string{"pipeline", "status"}),
		stageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "orchestrator_stage_duration_seconds",
			Help:    "Wall time of ended stages, first attempt start to end, by pipeline, stage kind and status.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}}, []string{"pipeline", "kind", "status"}),
		rowsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_rows_written_total",
			Help: "Rows written by ended stages, by pipeline and stage."}, []string{"pipeline", "stage"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_commits_total",
			Help: "Table versions committed by ended stages, by pipeline and table."}, []string{"pipeline", "table"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_commit_conflicts_total",
			Help: "Commits lost to a concurrent writer of the target (the stage ran again), by pipeline and stage."}, []string{"pipeline", "stage"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_stage_retries_total",
			Help: "Stage attempts after the first (retries: of its pipeline file), by pipeline and stage."}, []string{"pipeline", "stage"}),
		slotLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "orchestrator_scheduler_lag_seconds",
			Help:    "How long after its instant each due slot was handled, by pipeline.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600}}, []string{"pipeline"}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_missed_slots_total",
			Help: "Slots that came while no scheduler ran (handled by the catch-up policy), by pipeline."}, []string{"pipeline"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_skipped_slots_total",
			Help: "Slots recorded as skipped (overlap, catch-up), by pipeline."}, []string{"pipeline"}),
		tick: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "orchestrator_scheduler_tick_seconds",
			Help:    "Time of each scheduler pass over a warehouse's pipelines, by phase: plan (deciding the due slots), record (writing their records), dispatch (starting runs).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}}, []string{"phase"}),
		gauges: &gauges{o: o},
		checks: newCheckMetrics(),
	}
}

func (m *metrics) register(reg *prometheus.Registry) {
	reg.MustRegister(m.runs, m.stageDuration, m.rowsWritten, m.commits, m.conflicts, m.retries, m.slotLag, m.missed, m.skipped, m.tick, m.gauges)
	reg.MustRegister(m.checks.collectors()...)
}

// stageEnded counts an ended stage.
func (m *metrics) stageEnded(pipeline string, sr *scheduler.StageRecord) {
	if !sr.Start.IsZero() && !sr.End.IsZero() {
		m.stageDuration.WithLabelValues(pipeline, sr.Kind, string(sr.Status)).Observe(sr.End.Sub(sr.Start).Seconds())
	}
	m.rowsWritten.WithLabelValues(pipeline, sr.Name).Add(float64(sr.RowsOut))
	for _, v := range sr.VersionsWritten {
		m.commits.WithLabelValues(pipeline, v.Table).Inc()
	}
	if sr.Conflicts > 0 {
		m.conflicts.WithLabelValues(pipeline, sr.Name).Add(float64(sr.Conflicts))
	}
	if n := len(sr.Attempts); n > 1 {
		m.retries.WithLabelValues(pipeline, sr.Name).Add(float64(n - 1))
	}
	m.checks.stageEnded(pipeline, sr)
}

func (m *metrics) slotHandled(ev scheduler.SlotEvent) {
	n := float64(max(ev.Count, 1))
	if ev.Count <= 1 {
		m.slotLag.WithLabelValues(ev.Pipeline).Observe(max(ev.Lag.Seconds(), 0))
	}
	if ev.Missed {
		m.missed.WithLabelValues(ev.Pipeline).Add(n)
	}
	if ev.Skipped {
		m.skipped.WithLabelValues(ev.Pipeline).Add(n)
	}
}

func (m *metrics) tickDone(t scheduler.TickTimes) {
	m.tick.WithLabelValues("plan").Observe(t.Plan.Seconds())
	m.tick.WithLabelValues("record").Observe(t.Record.Seconds())
	m.tick.WithLabelValues("dispatch").Observe(t.Dispatch.Seconds())
}

// gauges are read from the scheduler at each scrape.
type gauges struct{ o *Observer }

var (
	activeDesc    = prometheus.NewDesc("orchestrator_active_runs", "Runs this process has queued or running, by pipeline and state.", []string{"pipeline", "status"}, nil)
	pipelinesDesc = prometheus.NewDesc("orchestrator_pipelines_loaded", "Pipelines loaded and scheduled.", nil, nil)
	leaseDesc     = prometheus.NewDesc("orchestrator_lease_held", "1 when this process holds the scheduler lease of the warehouse.", []string{"warehouse"}, nil)
	ageDesc       = prometheus.NewDesc("orchestrator_table_data_age_seconds", "Age of the newest commit that changed a table's data (tables with freshness:), when last checked.", []string{"pipeline", "table"}, nil)
	freshDesc     = prometheus.NewDesc("orchestrator_table_freshness_seconds", "The freshness a pipeline declares for a table.", []string{"pipeline", "table"}, nil)
	staleDesc     = prometheus.NewDesc("orchestrator_table_stale", "1 while a table's newest data change is older than its freshness.", []string{"pipeline", "table"}, nil)
	deadlineDesc  = prometheus.NewDesc("orchestrator_pipeline_deadline_seconds", "The deadline a pipeline declares for its scheduled runs.", []string{"pipeline"}, nil)
	lateDesc      = prometheus.NewDesc("orchestrator_pipeline_late", "1 while a scheduled run has not ended its deadline after its slot.", []string{"pipeline"}, nil)
)

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- activeDesc
	ch <- pipelinesDesc
	ch <- leaseDesc
	for _, d := range []*prometheus.Desc{ageDesc, freshDesc, staleDesc, deadlineDesc, lateDesc} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	s := g.o.scheduler()
	if s == nil {
		return
	}
	type key struct{ pipeline, status string }
	counts := map[key]int{}
	for _, rec := range s.Runner().Owned() {
		counts[key{rec.Pipeline, string(rec.Status)}]++
	}
	for _, spec := range s.Pipelines() {
		for _, st := range []scheduler.Status{scheduler.Queued, scheduler.Running} {
			k := key{spec.Name, string(st)}
			ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(counts[k]), k.pipeline, k.status)
			delete(counts, k)
		}
	}
	for k, n := range counts { // runs of pipelines no longer loaded
		ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(n), k.pipeline, k.status)
	}
	ch <- prometheus.MustNewConstMetric(pipelinesDesc, prometheus.GaugeValue, float64(len(s.Pipelines())))
	for _, l := range s.Leases() {
		v := 0.0
		if l.Held {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(leaseDesc, prometheus.GaugeValue, v, l.Warehouse)
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, w := range s.Watches("") {
		if w.Checked.IsZero() {
			continue // never checked here: no value to tell
		}
		if w.Kind == scheduler.WatchDeadline {
			ch <- prometheus.MustNewConstMetric(deadlineDesc, prometheus.GaugeValue, w.Limit.Seconds(), w.Pipeline)
			ch <- prometheus.MustNewConstMetric(lateDesc, prometheus.GaugeValue, flag(w.Breached), w.Pipeline)
			continue
		}
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, w.Age.Seconds(), w.Pipeline, w.Table)
		ch <- prometheus.MustNewConstMetric(freshDesc, prometheus.GaugeValue, w.Limit.Seconds(), w.Pipeline, w.Table)
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, flag(w.Breached), w.Pipeline, w.Table)
	}
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.obs.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
