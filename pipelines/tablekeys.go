package pipelines

import (
	"slices"

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
		c, ok := st.Config.(jobs.RowKeyed)
		if !ok {
			continue
		}
		if _, writes := c.Tables(); slices.Contains(writes, name) {
			if keys := c.RowKeys(name); len(keys) > 0 {
				return keys
			}
		}
	}
	return nil
}
