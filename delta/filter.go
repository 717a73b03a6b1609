package delta

import (
	"bytes"
	"encoding/json"

	"github.com/orchestrator-io/orchestrator/delta/expr"
)

// bindPredicate binds p to a table schema, with the physical names (column mapping) by
// which the table's files name its columns, and without statistics of widened columns.
func bindPredicate(p expr.Predicate, schema *StructType) (*expr.Bound, error) {
	return expr.Bind(p, schema, fieldInfo)
}

func fieldInfo(f *StructField) (string, bool) { return physicalName(f), statsComparable(f) }

// fileFacts is what a predicate may learn of a file without reading it: its partition
// values (isPart: the lower-case partition column names) and its stats.
func fileFacts(a *Add, isPart map[string]bool) expr.File {
	return expr.File{
		PartitionValues: a.PartitionValues,
		IsPartition:     isPart,
		Stats:           func() *expr.Stats { return parseStatsView(a.Stats) },
	}
}

// parseStatsView parses a file's stats JSON (PROTOCOL.md §Per-file Statistics); nil when
// there is none or it is unreadable (unreadable stats never prune).
func parseStatsView(s string) *expr.Stats {
	if s == "" {
		return nil
	}
	var raw struct {
		NumRecords *int64         `json:"numRecords"`
		MinValues  map[string]any `json:"minValues"`
		MaxValues  map[string]any `json:"maxValues"`
		NullCount  map[string]any `json:"nullCount"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if dec.Decode(&raw) != nil {
		return nil
	}
	return &expr.Stats{NumRecords: raw.NumRecords, Min: raw.MinValues, Max: raw.MaxValues, NullCount: raw.NullCount}
}
