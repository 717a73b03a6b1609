package pipelines

import (
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// TableKeys returns the columns that identify a row of the declared table name, for a
// diff of two of its versions: its identity columns (an SCD2 surrogate key) when it has
// some; else the keys of the stage that writes it (an upsert or snapshot ingest, an
// scd1_merge, an scd2_merge with its valid_from column); else none (the whole row).
func (s *Spec) TableKeys(name string) []string {
	t := s.Table(name)
	if t == nil {
		return nil
	}
	var ids []string
	if t.Schema != nil {
		for _, f := range t.Schema.Fields {
			if delta.IsIdentity(f) {
				ids = append(ids, f.Name)
			}
		}
	}
	if len(ids) > 0 {
		return ids
	}
	for _, st := range s.Stages {
		switch c := st.Config.(type) {
		case *jobs.IngestConfig:
			if c.Target == name && len(c.Keys) > 0 {
				return c.Keys
			}
		case *jobs.SCD1Config:
			if c.Target == name {
				return c.Keys
			}
		case *jobs.SCD2Config:
			if c.Target == name {
				from := c.Columns.ValidFrom
				if from == "" {
					from = "valid_from"
				}
				return append(append([]string(nil), c.Keys...), from)
			}
		}
	}
	return nil
}
