package jobs

import "github.com/orchestrator-io/orchestrator/delta"

// Table is a table as a pipeline declares it: where it lives below the warehouse, its
// schema, partition columns and Delta properties. Stages create it on first use.
type Table struct {
	// Name is "schema.table" (or a bare "table").
	Name string
	// Path is the table's location relative to the warehouse root.
	Path        string
	Description string
	Schema      *delta.StructType
	PartitionBy []string
	Properties  map[string]string
}

// ChangeDataFeed reports whether the table declares its change data feed on.
func (t *Table) ChangeDataFeed() bool { return delta.ChangeDataFeedOn(t.Properties) }
