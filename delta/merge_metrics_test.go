package delta_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
)

// sparkMergeMetrics reads the operationMetrics of a MERGE commit Delta-Spark wrote
// (testdata/golden/spark-merge, made by its generate.py).
func sparkMergeMetrics(t *testing.T, name string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir(t), "spark-merge", name))
	if err != nil {
		t.Fatal(err)
	}
	var ci struct {
		Operation        string            `json:"operation"`
		OperationMetrics map[string]string `json:"operationMetrics"`
	}
	if err := json.Unmarshal(b, &ci); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if ci.Operation != "MERGE" || len(ci.OperationMetrics) < 20 {
		t.Fatalf("%s: operation %q with %d metrics, want a MERGE with Spark's metrics", name, ci.Operation, len(ci.OperationMetrics))
	}
	return ci.OperationMetrics
}

// TestMergeMetricsKeysAreSparks runs the MERGE that Delta-Spark ran for the golden
// commits (a table of ids 1-4 in one file; the source updates 1, deletes 2 and inserts
// 5), without and with deletion vectors: our commit's operationMetrics have exactly
// Spark's keys, and the row and deletion vector counts are Spark's. A second MERGE
// into the file that now has a vector updates it: one vector added, removed and updated.
func TestMergeMetricsKeysAreSparks(t *testing.T) {
	ctx := context.Background()
	// The counts that do not depend on how an engine lays out its files or how fast it is.
	counts := []string{"numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted",
		"numTargetRowsMatchedUpdated", "numTargetRowsMatchedDeleted", "numTargetRowsNotMatchedBySourceUpdated",
		"numTargetRowsNotMatchedBySourceDeleted", "numTargetRowsCopied", "numOutputRows", "numTargetChangeFilesAdded",
		"numTargetDeletionVectorsAdded", "numTargetDeletionVectorsRemoved", "numTargetDeletionVectorsUpdated"}
	for _, c := range []struct {
		golden string
		props  map[string]string
	}{
		{"merge.json", nil},
		{"merge-dv.json", map[string]string{delta.PropEnableDeletionVectors: "true"}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			spark := sparkMergeMetrics(t, c.golden)
			tbl, _, _ := newTestTable(t, c.props)
			commitChange(t, tbl, "WRITE", nil, []row{{1, "a", "p"}, {2, "b", "p"}, {3, "c", "p"}, {4, "d", "p"}}, nil, nil)
			src := sourceRecord([]row{{1, "A", "p"}, {2, "", "p"}, {5, "e", "p"}}, []string{"U", "D", "I"})
			defer src.Release()
			res, err := tbl.Merge(ctx, upsertOptions(src))
			if err != nil {
				t.Fatal(err)
			}
			op, _, ours := lastMetrics(t, tbl)
			if op != "MERGE" {
				t.Fatalf("operation %q, want MERGE", op)
			}
			if got, want := slices.Sorted(maps.Keys(ours)), slices.Sorted(maps.Keys(spark)); !slices.Equal(got, want) {
				t.Errorf("metric keys:\ngot  %v\nwant %v (Delta-Spark's)", got, want)
			}
			for _, k := range counts {
				if got := ours[k]; got != spark[k] {
					t.Errorf("%s = %v, Delta-Spark wrote %s", k, got, spark[k])
				}
			}
			for _, k := range []string{"materializeSourceTimeMs", "scanTimeMs", "rewriteTimeMs", "executionTimeMs"} {
				if v, err := strconv.ParseInt(ours[k].(string), 10, 64); err != nil || v < 0 {
					t.Errorf("%s = %v, want a duration in milliseconds", k, ours[k])
				}
			}
			if res.ExecutionTimeMs < res.ScanTimeMs+res.RewriteTimeMs {
				t.Errorf("execution %d ms is shorter than scan %d ms plus rewrite %d ms", res.ExecutionTimeMs, res.ScanTimeMs, res.RewriteTimeMs)
			}
			if c.props == nil {
				return
			}
			// Delete 3 from the file that has a vector: its vector is replaced.
			src2 := sourceRecord([]row{{3, "", "p"}}, []string{"D"})
			defer src2.Release()
			res, err = tbl.Merge(ctx, upsertOptions(src2))
			if err != nil {
				t.Fatal(err)
			}
			if res.NumTargetDeletionVectorsAdded != 1 || res.NumTargetDeletionVectorsRemoved != 1 || res.NumTargetDeletionVectorsUpdated != 1 {
				t.Errorf("deletion vectors added %d, removed %d, updated %d; want 1, 1, 1 (the file's vector replaced)",
					res.NumTargetDeletionVectorsAdded, res.NumTargetDeletionVectorsRemoved, res.NumTargetDeletionVectorsUpdated)
			}
			if _, _, m := lastMetrics(t, tbl); m["numTargetDeletionVectorsUpdated"] != "1" {
				t.Errorf("numTargetDeletionVectorsUpdated = %v in the commit, want 1", m["numTargetDeletionVectorsUpdated"])
			}
		})
	}
}
