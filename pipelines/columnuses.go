package pipelines

import (
	"strings"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// ColumnUse is a column of a declared table that a stage needs to do its work: a key,
// the sequence_by column, a column an scd2_merge maintains, the change feed columns a
// capture_history writes. Dropping it would stop the stage.
type ColumnUse struct {
	Column string
	Stage  string
	// Role says how the stage uses it, as its YAML says: "keys", "sequence_by",
	// "columns.valid_from", "change feed column".
	Role string
}

// ColumnUses lists the columns of the declared table name that the pipeline's stages
// need, in stage order.
func (s *Spec) ColumnUses(name string) []ColumnUse {
	var out []ColumnUse
	add := func(stage, role string, cols ...string) {
		for _, c := range cols {
			if c != "" {
				out = append(out, ColumnUse{Column: c, Stage: stage, Role: role})
			}
		}
	}
	for _, st := range s.Stages {
		switch c := st.Config.(type) {
		case *jobs.IngestConfig:
			if c.Target == name {
				add(st.Name, "keys", c.Keys...)
				add(st.Name, "sequence_by", c.SequenceBy)
			}
		case *jobs.SCD1Config:
			if c.Source == name || c.Target == name {
				add(st.Name, "keys", c.Keys...)
			}
			if c.Source == name {
				add(st.Name, "sequence_by", c.SequenceBy)
			}
		case *jobs.SCD2Config:
			if c.Source == name || c.Target == name {
				add(st.Name, "keys", c.Keys...)
			}
			if c.Source == name {
				add(st.Name, "sequence_by", c.SequenceBy)
			}
			if c.Target == name {
				add(st.Name, "columns.surrogate_key", c.Columns.SurrogateKey)
				cols := c.Columns.WithDefaults()
				add(st.Name, "columns.valid_from", cols.ValidFrom)
				add(st.Name, "columns.valid_to", cols.ValidTo)
				add(st.Name, "columns.is_current", cols.IsCurrent)
				add(st.Name, "columns.inferred", cols.Inferred)
			}
		case *jobs.CaptureHistoryConfig:
			if c.Target == name {
				add(st.Name, "change feed column", delta.ChangeTypeColumn, delta.CommitVersionColumn, delta.CommitTimestampColumn)
			}
		}
	}
	return out
}

// FindColumnUse finds the first use of column (case-insensitively) among uses.
func FindColumnUse(uses []ColumnUse, column string) (ColumnUse, bool) {
	for _, u := range uses {
		if strings.EqualFold(u.Column, column) {
			return u, true
		}
	}
	return ColumnUse{}, false
}
