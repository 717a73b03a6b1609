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

// CheckTables compares every declared table that exists in the warehouse with its
// declaration (jobs.CheckTable); tables not created yet are skipped. A run refuses the
// tables this reports.
func CheckTables(ctx context.Context, spec *Spec, warehouse objectstore.Store, opts delta.Options) ([]jobs.Difference, error) {
	var out []jobs.Difference
	for _, t := range spec.Tables {
		ok, err := delta.Exists(ctx, warehouse, t.Path)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		if !ok {
			continue
		}
		tbl, err := delta.Open(ctx, warehouse, t.Path, opts)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		out = append(out, jobs.CheckTable(t, snap, spec.File)...)
	}
	return out, nil
}
