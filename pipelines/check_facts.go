package pipelines

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// factLoad checks a fact_load stage's tables: the source and the fact table hold the
// keys and each lookup's on and at columns, the fact table each lookup's key (bigint),
// and each dimension is the target of an scd2_merge with a surrogate key, whose SCD
// columns the lookup takes.
func (c *stageCheck) factLoad(cfg *jobs.FactLoadConfig) {
	src := c.table("source", cfg.Source)
	dst := c.table("target", cfg.Target)
	if cfg.SourceChanges && src != nil && !src.ChangeDataFeed() {
		c.noChangeFeed("source_changes", src)
	}
	c.quarantineTable(cfg.QuarantineTable)
	for i, k := range cfg.Keys {
		c.needColumn(fmt.Sprintf("keys[%d]", i), src, k, "")
		c.needColumn(fmt.Sprintf("keys[%d]", i), dst, k, "")
	}
	for i := range cfg.Lookups {
		l := &cfg.Lookups[i]
		f := fmt.Sprintf("lookups[%d]", i)
		dim := c.table(f+".dimension", l.Dimension)
		c.needColumn(f+".key", dst, l.Key, "bigint")
		for _, fc := range sortedKeys(l.On) {
			c.needColumn(f+".on", src, fc, "")
			c.needColumn(f+".on", dst, fc, "")
			c.needColumn(f+".on", dim, l.On[fc], "")
		}
		c.needColumn(f+".at", src, l.At, "")
		c.needColumn(f+".at", dst, l.At, "")
		c.needTime(f+".at", src, l.At)
		if dim == nil {
			continue
		}
		merge := c.dimensionMerge(l.Dimension)
		switch {
		case merge == nil:
			c.ps.at(lookup(c.sn, f+".dimension"), "stage %s: %s.dimension: no scd2_merge stage of this pipeline writes %s; a lookup needs a type 2 dimension", c.st.Name, f, l.Dimension)
		case merge.Columns.SurrogateKey == "":
			c.ps.at(lookup(c.sn, f+".dimension"), "stage %s: %s.dimension: the scd2_merge that writes %s declares no columns.surrogate_key (an identity column); facts carry that key", c.st.Name, f, l.Dimension)
		case l.Missing == jobs.MissingInferred && (merge.Columns.Inferred == "" || !merge.FirstValidFrom.IsSet() || merge.FirstValidFrom.Text == jobs.FirstValidFromSequence):
			c.ps.at(lookup(c.sn, f+".missing"), "stage %s: %s.missing: inferred adds placeholder versions to %s that its scd2_merge fills in place when the key arrives: that merge must declare columns.inferred (a boolean column of %s flagging them) and first_valid_from: <timestamp> (where a key's first version, and so a placeholder, starts)", c.st.Name, f, l.Dimension, l.Dimension)
		default:
			l.SetDimensionColumns(merge.Columns)
			l.SetDimensionOpenEnd(merge.OpenEnd)
			l.SetDimensionFirstValidFrom(merge.FirstValidFrom)
			if l.Missing != jobs.MissingFail {
				c.memberNulls(f, l, dim)
			}
		}
		if !dim.ChangeDataFeed() {
			c.ws.at(lookup(c.sn, f+".dimension"), "warning: stage %s: dimension %s has no change feed: each run after it changes looks every fact up again (set %s: true in its properties)", c.st.Name, l.Dimension, delta.PropEnableChangeDataFeed)
		}
	}
}

// memberNulls checks that the dimension can hold the lookup's unknown member row: its
// business key and attribute columns are NULL there, so none may be nullable: false.
func (c *stageCheck) memberNulls(f string, l *jobs.FactLookup, dim *jobs.Table) {
	if dim.Schema == nil {
		return
	}
	cols := l.DimensionColumns()
	for _, fld := range dim.Schema.Fields {
		switch strings.ToLower(fld.Name) {
		case strings.ToLower(cols.SurrogateKey), strings.ToLower(cols.ValidFrom), strings.ToLower(cols.ValidTo), strings.ToLower(cols.IsCurrent), strings.ToLower(cols.Inferred):
			continue
		}
		if !fld.Nullable {
			missing := l.Missing
			if missing == "" {
				missing = jobs.MissingUnknown
			}
			c.ps.at(lookup(c.sn, f+".missing"), "stage %s: %s.missing: %s writes an unknown member row to %s whose %s is NULL, but the column is declared nullable: false; declare it nullable (the scd2_merge refuses NULL keys from its source all the same) or use missing: fail",
				c.st.Name, f, missing, l.Dimension, fld.Name)
		}
	}
}

// needTime checks that a lookup's at column is a time (timestamp, date) or an integer.
func (c *stageCheck) needTime(field string, t *jobs.Table, col string) {
	if t == nil || t.Schema == nil || col == "" {
		return
	}
	f := t.Schema.Field(col)
	if f == nil {
		return
	}
	for _, ty := range []string{"timestamp", "timestamp_ntz", "date", "bigint", "int"} {
		if typeIs(f.Type, ty) {
			return
		}
	}
	c.ps.at(lookup(c.sn, field), "stage %s: %s: column %s.%s is %s, expected timestamp, timestamp_ntz or date", c.st.Name, field, t.Name, col, f.Type)
}

// dimensionMerge returns the config of the scd2_merge stage that writes the table name.
func (c *stageCheck) dimensionMerge(name string) *jobs.SCD2Config {
	for _, st := range c.spec.Stages {
		if m, ok := st.Config.(*jobs.SCD2Config); ok && m.Target == name {
			return m
		}
	}
	return nil
}

// checkFactEngines refuses a fact_load stage on Spark: the range join runs here only.
func checkFactEngines(ps *problems, spec *Spec, stageNodes []*yaml.Node) {
	for i, st := range spec.Stages {
		if st.Kind != jobs.KindFactLoad || st.Engine != EngineSpark || i >= len(stageNodes) {
			continue
		}
		n := stageNodes[i]
		if _, en := mapEntry(n, "engine"); en != nil {
			n = en
		}
		ps.at(n, "stage %s: fact_load runs on the local engine only (its as-of range join and re-keying are not written in Spark SQL); set engine: local on the stage", st.Name)
	}
}
