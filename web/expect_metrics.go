package web

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orchestrator-io/orchestrator/scheduler"
)

// checkMetrics count the results of stages' expectations (docs/expectations.md).
type checkMetrics struct {
	results *prometheus.CounterVec
	checked *prometheus.CounterVec
	failed  *prometheus.CounterVec
}

func newCheckMetrics() *checkMetrics {
	labels := []string{"pipeline", "stage", "expectation"}
	return &checkMetrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_expectation_results_total",
			Help: "Results of expectations of ended stages, by pipeline, stage, expectation and outcome (passed, warned, dropped, quarantined, failed)."},
			append(labels, "outcome")),
		checked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_expectation_checked_rows_total",
			Help: "Rows a row expectation checked (table checks: the rows of the version judged), by pipeline, stage and expectation."}, labels),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orchestrator_expectation_failed_rows_total",
			Help: "Rows that violated an expectation, by pipeline, stage, expectation and on_violation."}, append(labels, "on_violation")),
	}
}

func (m *checkMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.results, m.checked, m.failed}
}

// stageEnded counts the checks of an ended stage.
func (m *checkMetrics) stageEnded(pipeline string, sr *scheduler.StageRecord) {
	for _, c := range sr.Checks {
		m.results.WithLabelValues(pipeline, sr.Name, c.Name, c.Outcome()).Inc()
		m.checked.WithLabelValues(pipeline, sr.Name, c.Name).Add(float64(c.Rows))
		m.failed.WithLabelValues(pipeline, sr.Name, c.Name, c.Action).Add(float64(c.Failed))
	}
}
