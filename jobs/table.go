package jobs

import "github.com/orchestrator-io/orchestrator/delta"

// Table is a table as a pipeline declares it: where it lives below the warehouse, its
// schema, partition columns and Delta properties. Stages create it on first use, and
// refuse it when the table that exists differs from the declaration (CheckTable).
type Table struct {
	// Name is "schema.table" (or a bare "table").
	Name string
	// Path is the table's location relative to the warehouse root.
	Path        string
	Description string
	Schema      *delta.StructType
	PartitionBy []string
	// ClusterBy are the clustering columns a new table gets (delta.CreateOptions).
	ClusterBy  []string
	Properties map[string]string
	// SchemaEvolution says a stage may add nullable columns to the table (the target of
	// a capture_history with schema_evolution), so such columns are no difference from
	// the declaration (see CheckTable).
	SchemaEvolution bool
	// RenamedFrom maps a declared column to the name it had in the table (renamed_from:
	// the table's column is renamed to it, which needs column mapping).
	RenamedFrom map[string]string
}

// ChangeDataFeed reports whether the table declares its change data feed on.
func (t *Table) ChangeDataFeed() bool { return delta.ChangeDataFeedOn(t.Properties) }
