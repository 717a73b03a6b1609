package scheduler

import (
	"fmt"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Check is the result of one expectation of a stage (jobs.ExpectationResult): a row
// check's counts over the rows the stage wrote (Version -1: checked before the commit),
// or a table check's verdict on the version it judged.
type Check struct {
	Name   string `json:"name"`
	Check  string `json:"check"`
	Action string `json:"on_violation"`
	Table  string `json:"table"`
	// Version is the table version a table check judged; -1 for a row check.
	Version int64  `json:"version"`
	Rows    int64  `json:"rows"`
	Failed  int64  `json:"failed"`
	Detail  string `json:"detail,omitempty"`
}

// Passed reports whether the check found nothing wrong.
func (c Check) Passed() bool { return c.Failed == 0 }

// Outcome names what the check's result did: passed, warned, dropped, quarantined or
// failed.
func (c Check) Outcome() string {
	if c.Failed == 0 {
		return "passed"
	}
	switch c.Action {
	case jobs.ActionDrop:
		return "dropped"
	case jobs.ActionQuarantine:
		return "quarantined"
	case jobs.ActionFail:
		return "failed"
	}
	return "warned"
}

func checksOf(res []jobs.ExpectationResult) []Check {
	var out []Check
	for _, r := range res {
		out = append(out, Check{Name: r.Name, Check: r.Check, Action: r.Action, Table: r.Table, Version: r.Version,
			Rows: r.Rows, Failed: r.Failed, Detail: r.Detail})
	}
	return out
}

// ChecksOf converts a stage result's expectation results.
func ChecksOf(res []jobs.ExpectationResult) []Check { return checksOf(res) }

// Text is the check's result in one line, e.g. "check positive_quantity (expect,
// quarantine): 2 of 5 rows quarantined; first at ...".
func (c Check) Text() string {
	what := c.Check
	if c.Version >= 0 {
		what += fmt.Sprintf(" on %s@v%d", c.Table, c.Version)
	}
	t := fmt.Sprintf("check %s (%s, on_violation %s): ", c.Name, what, c.Action)
	switch {
	case c.Failed == 0:
		t += "passed"
	case c.Check == jobs.CheckExpect:
		t += fmt.Sprintf("%d of %d rows %s", c.Failed, c.Rows, c.Outcome())
	default:
		t += c.Outcome()
	}
	if c.Detail != "" && c.Failed > 0 {
		t += "; " + c.Detail
	}
	return t
}

// stageExpectations are the expectations a pipeline's stage declares.
func stageExpectations(spec *pipelines.Spec, stage string) []jobs.Expectation {
	if st := spec.Stage(stage); st != nil {
		return st.Expectations
	}
	return nil
}
