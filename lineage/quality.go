package lineage

import (
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// dataQualityAssertionsURL is the facet that carries a stage's expectation results on
// the dataset they judged.
const dataQualityAssertionsURL = "https://openlineage.io/spec/facets/1-1-0/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet"

// Check is the result of one expectation of a stage, on the table it judged.
type Check struct {
	Name  string
	Table string
	// Action is its on_violation (warn, drop, quarantine, fail); Failed the rows (or, for
	// row_count and max_change, 1) that did not pass.
	Action string
	Failed int64
}

type assertion struct {
	Assertion string `json:"assertion"`
	Success   bool   `json:"success"`
	Column    string `json:"column,omitempty"`
	Severity  string `json:"severity,omitempty"`
}

type dataQualityAssertionsFacet struct {
	facet
	Assertions []assertion `json:"assertions"`
}

// qualityFacet is the data quality assertions of the checks of stage that judged table:
// one assertion per expectation, named as declared, with its column when it names one,
// severity error for fail (the run stops) and warn for the others; ok is false when no
// check judged the table.
func qualityFacet(stage *pipelines.Stage, table string, checks []Check) (dataQualityAssertionsFacet, bool) {
	f := dataQualityAssertionsFacet{facet: base(dataQualityAssertionsURL), Assertions: []assertion{}}
	for _, c := range checks {
		if c.Table != table {
			continue
		}
		a := assertion{Assertion: c.Name, Success: c.Failed == 0, Severity: "warn"}
		if c.Action == jobs.ActionFail {
			a.Severity = "error"
		}
		for i := range stage.Expectations {
			if e := &stage.Expectations[i]; e.Name == c.Name {
				if cols := jobs.ExpectationColumns(e); len(cols) == 1 {
					a.Column = cols[0]
				}
			}
		}
		f.Assertions = append(f.Assertions, a)
	}
	return f, len(f.Assertions) > 0
}
