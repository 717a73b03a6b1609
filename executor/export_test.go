package executor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// SparkSQL renders the statements the Spark engine sends for a plan, as a script a
// person reads (golden files): per statement its commit (table, txn), confs and note,
// then its setup and SQL. warehouse is the warehouse as Spark sees it; locations are
// passed through as written.
func SparkSQL(p *jobs.Plan, env *jobs.Env, warehouse string) (string, error) {
	e := &SparkExecutor{cfg: SparkConfig{Warehouse: warehouse, Locate: func(loc string) (string, error) { return loc, nil }}}
	stmts, err := e.statements(p, env)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, s := range stmts {
		fmt.Fprintf(&b, "-- statement %d: commits to %s (%s)\n", i+1, s.table.Name, s.table.Path)
		if s.txn != nil {
			fmt.Fprintf(&b, "-- txn %s = %d\n", s.txn.AppID, s.txn.Version)
		}
		for _, k := range slices.Sorted(maps.Keys(s.conf)) {
			fmt.Fprintf(&b, "-- conf %s = %s\n", k, s.conf[k])
		}
		if s.note != "" {
			fmt.Fprintf(&b, "-- note: %s\n", s.note)
		}
		for _, q := range s.setup {
			b.WriteString(q + ";\n")
		}
		b.WriteString(s.sql + ";\n\n")
	}
	return b.String(), nil
}
