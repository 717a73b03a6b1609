package pipelines

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// checkExpectations reports the problems of a stage's expectations (sn is the stage's
// node): each at its key, naming the stage and the expectation.
func checkExpectations(ps *problems, sn *yaml.Node, st *Stage, label string) {
	for _, fe := range jobs.ValidateExpectations(st.Config, st.Expectations) {
		ps.at(lookup(sn, fe.Field), "%s: %s: %s", label, fe.Field, fe.Msg)
	}
	// A merge's quarantine table holds what its row checks set aside, and nothing else.
	q := ""
	switch c := st.Config.(type) {
	case *jobs.SCD1Config:
		q = c.QuarantineTable
	case *jobs.SCD2Config:
		q = c.QuarantineTable
	}
	if q != "" && !slices.ContainsFunc(st.Expectations, func(e jobs.Expectation) bool { return e.RowLevel() && e.Action() == jobs.ActionQuarantine }) {
		ps.at(lookup(sn, "quarantine_table"), "%s: quarantine_table: only used by row expectations with on_violation: quarantine, and this stage has none", label)
	}
}

// quarantineByExpectation reports whether fe is the ingest or fact_load config's
// complaint that quarantine_table goes unused, when a row expectation of the stage
// quarantines into it.
func quarantineByExpectation(st *Stage, cfg jobs.Config, fe jobs.FieldError) bool {
	switch cfg.(type) {
	case *jobs.IngestConfig, *jobs.FactLoadConfig:
	default:
		return false
	}
	if fe.Field != "quarantine_table" || !strings.Contains(fe.Msg, "only used") {
		return false
	}
	for i := range st.Expectations {
		if st.Expectations[i].Action() == jobs.ActionQuarantine {
			return true
		}
	}
	return false
}

// checkExpectationTables checks the columns a stage's expectations name against the
// declared target: each must be a column of it, and a predicate's literals must fit
// their columns' types.
func checkExpectationTables(ps *problems, spec *Spec, sn *yaml.Node, st *Stage) {
	if st.Config == nil || len(st.Expectations) == 0 {
		return
	}
	t := spec.Table(jobs.ExpectationTarget(st.Config))
	if t == nil || t.Schema == nil {
		return
	}
	for i := range st.Expectations {
		e := &st.Expectations[i]
		field := fmt.Sprintf("expectations[%d].%s", i, e.Check())
		for _, col := range jobs.ExpectationColumns(e) {
			if t.Schema.Field(col) == nil {
				ps.at(lookup(sn, field), "stage %s: %s: expectation %s: the target table %s has no column %q (columns: %s)", st.Name, field, e.Name, t.Name, col, columnNames(t))
			}
		}
		if !e.RowLevel() {
			continue
		}
		p, err := expr.Parse(e.Expect)
		if err != nil {
			continue // reported with its position by checkExpectations
		}
		// A merge judges its source's rows before it folds them: the columns the merge
		// computes (valid_from, valid_to, is_current, the surrogate key) are not there.
		if src := mergeSource(spec, st.Config); src != nil && src.Schema != nil {
			for _, col := range expr.Columns(p) {
				if t.Schema.Field(col) != nil && src.Schema.Field(col) == nil {
					ps.at(lookup(sn, field), "stage %s: %s: expectation %s: a merge's row checks judge each change it takes from its source %s, before it becomes a version; column %q is computed by the merge, not in the source (columns: %s)", st.Name, field, e.Name, src.Name, col, columnNames(src))
				}
			}
		}
		missing := slices.ContainsFunc(expr.Columns(p), func(col string) bool { return t.Schema.Field(col) == nil })
		if _, err := expr.NewMatcher(p, t.Schema); err != nil && !missing {
			ps.at(lookup(sn, field), "stage %s: %s: expectation %s: %q: %v", st.Name, field, e.Name, e.Expect, err)
		}
	}
}

// mergeSource is the declared source of a scd1_merge or scd2_merge stage (nil for
// another stage, or a source not declared).
func mergeSource(spec *Spec, cfg jobs.Config) *jobs.Table {
	switch c := cfg.(type) {
	case *jobs.SCD1Config:
		return spec.Table(c.Source)
	case *jobs.SCD2Config:
		return spec.Table(c.Source)
	}
	return nil
}

func columnNames(t *jobs.Table) string {
	names := make([]string, len(t.Schema.Fields))
	for i, f := range t.Schema.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// checkExpectationEngines refuses row checks on a stage that runs on Spark: they run in
// this process over the rows it decodes; on Spark they would not run at all.
func checkExpectationEngines(ps *problems, spec *Spec, nodes []*yaml.Node) {
	for i, st := range spec.Stages {
		if st.Engine != EngineSpark || i >= len(nodes) {
			continue
		}
		for j := range st.Expectations {
			if e := &st.Expectations[j]; e.RowLevel() {
				field := fmt.Sprintf("expectations[%d].expect", j)
				ps.at(lookup(nodes[i], field), "stage %s: %s: expectation %s: row checks run in this process, not on Spark; run the stage with engine: local, or check its target with a table check (unique, not_null, row_count, max_change)", st.Name, field, e.Name)
			}
		}
	}
}
