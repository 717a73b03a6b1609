package main

import (
	"context"
	"fmt"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// validateTables is validate --check-tables: each valid pipeline's existing tables are
// compared with their declarations; every difference is printed with its fix.
func validateTables(ctx context.Context, e *env, files []string, s3 storeurl.Options) error {
	return validateEach(e, files, func(spec *pipelines.Spec) (string, bool) {
		warehouse, err := e.opener(s3).Warehouse(ctx, spec)
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: warehouse %s: %v\n", spec.File, spec.Warehouse, err)
			return "", false
		}
		plans, diffs, err := pipelines.CheckTables(ctx, spec, warehouse, delta.Options{Now: e.now})
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", spec.File, err)
			return "", false
		}
		for _, d := range diffs {
			fmt.Fprintf(e.stderr, "%s: %s\n", spec.File, d)
		}
		for _, p := range plans {
			fmt.Fprintf(e.stdout, "%s: table %s will converge to its declaration in one metadata-only commit:\n", spec.File, p.Table)
			for _, s := range p.Steps {
				fmt.Fprintf(e.stdout, "  %s\n", s)
			}
		}
		if len(plans) > 0 {
			return ", the existing tables match or converge on the next run", len(diffs) == 0
		}
		return ", the existing tables match", len(diffs) == 0
	})
}
