package pipelines

import (
	"context"
	"fmt"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// markSchemaEvolution flags the tables a stage may widen: the targets of capture_history
// stages with schema_evolution.
func markSchemaEvolution(spec *Spec) {
	for _, st := range spec.Stages {
		if c, ok := st.Config.(*jobs.CaptureHistoryConfig); ok && c.SchemaEvolution {
			if t := spec.Table(c.Target); t != nil {
				t.SchemaEvolution = true
			}
		}
	}
}

// TablePlan is the schema change a run will make to a declared table that exists, in
// one metadata-only commit, before a stage writes to it.
type TablePlan struct {
	Table string
	Steps []delta.SchemaStep
}

// CheckTables compares every declared table that exists in the warehouse with its
// declaration (jobs.CheckTable); tables not created yet are skipped. A run converges
// the tables of plans and refuses those of differences.
func CheckTables(ctx context.Context, spec *Spec, warehouse objectstore.Store, opts delta.Options) ([]TablePlan, []jobs.Difference, error) {
	var plans []TablePlan
	var out []jobs.Difference
	for _, t := range spec.Tables {
		ok, err := delta.Exists(ctx, warehouse, t.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		if !ok {
			continue
		}
		tbl, err := delta.Open(ctx, warehouse, t.Path, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		ev, diffs := jobs.CheckTable(t, snap, spec.File)
		if ev != nil {
			plans = append(plans, TablePlan{Table: t.Name, Steps: ev.Steps})
		}
		out = append(out, diffs...)
	}
	return plans, out, nil
}
