package pipelines

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// scd2Options checks an scd2_merge's options against its dimension: open_end: null
// writes NULL into valid_to, which must then be nullable.
func (c *stageCheck) scd2Options(cfg *jobs.SCD2Config, dst *jobs.Table) {
	if !cfg.OpenEnd.Null || dst == nil || dst.Schema == nil {
		return
	}
	col := cfg.Columns.WithDefaults().ValidTo
	if f := dst.Schema.Field(col); f != nil && !f.Nullable {
		c.ps.at(lookup(c.sn, "open_end"), "stage %s: open_end: null writes NULL into %s.%s for current versions, but the column is declared nullable: false; declare it nullable or give open_end a timestamp", c.st.Name, dst.Name, f.Name)
	}
}

// checkSCD2Engines refuses scd2_merge's options on Spark: its SQL (executor) writes
// 9999-12-31 as the open end and takes sequences as they come.
func checkSCD2Engines(ps *problems, spec *Spec, stageNodes []*yaml.Node) {
	for i, st := range spec.Stages {
		cfg, ok := st.Config.(*jobs.SCD2Config)
		if !ok || st.Engine != EngineSpark || i >= len(stageNodes) {
			continue
		}
		var opts []string
		if cfg.IgnoreNullUpdates {
			opts = append(opts, "ignore_null_updates")
		}
		if cfg.OpenEnd.IsSet() {
			opts = append(opts, "open_end")
		}
		if cfg.FirstValidFrom.IsSet() && cfg.FirstValidFrom.Text != jobs.FirstValidFromSequence {
			opts = append(opts, "first_valid_from")
		}
		if cfg.Columns.Inferred != "" {
			opts = append(opts, "columns.inferred")
		}
		if len(opts) == 0 {
			continue
		}
		n := stageNodes[i]
		if _, v := mapEntry(n, opts[0]); v != nil {
			n = v
		}
		ps.at(n, "stage %s: %s runs on the local engine only (the Spark SQL of scd2_merge keeps 9999-12-31 as the open end and each event's own values and sequence); set engine: local on the stage or drop the option", st.Name, strings.Join(opts, ", "))
	}
}
