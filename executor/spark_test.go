package executor_test

import (
	"context"
	"testing"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// The example pipelines with engine: spark give the tables engine: local gives on the
// same input: rows, change feed and history operations. A rerun commits nothing.
// Stages Spark refuses by design stay local (named per example).
func TestExamplesOnSparkEqualLocal(t *testing.T) {
	remote := testenv.SparkRemote(t)
	cases := []struct {
		name  string
		local []string // stages that stay on the local engine
	}{
		{name: "sales"},
		// An append of several files commits once per file on Spark (one txn per
		// commit): kept local so its history is the local one.
		{name: "cdc-events", local: []string{"load_events"}},
		{name: "history-vacuum"},
		{name: "scd2-snapshot"},
		// (daily-snapshot: TestDailySnapshotsOnSparkEqualLocal runs its three days.)
		// A backlog of extracts loads locally (Spark refuses a snapshot ingest), one
		// commit per day; the merge of their change feed runs on Spark.
		{name: "snapshot-backlog", local: []string{"load_extracts"}},
		// (ingest-quarantine has one stage, a quarantining ingest: local only.)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d := executor.NewDispatcher(0)
			defer d.Close()
			file := examplePath(tc.name)
			localWH, sparkWH := t.TempDir(), t.TempDir()
			if _, err := runPipeline(ctx, t, d, loadExample(t, file, localWH, pipelines.EngineLocal), localWH, remote, "local"); err != nil {
				t.Fatalf("local run: %v", err)
			}
			spec := loadExample(t, file, sparkWH, pipelines.EngineSpark, tc.local...)
			res, err := runPipeline(ctx, t, d, spec, sparkWH, remote, "spark")
			if err != nil {
				t.Fatalf("spark run: %v", err)
			}
			sparkOps := 0
			for _, r := range res.results {
				sparkOps += len(r.Operations)
			}
			if sparkOps == 0 {
				t.Fatal("no statement was sent to Spark")
			}
			sameFacts(t, facts(ctx, t, spec, localWH), facts(ctx, t, spec, sparkWH), tc.name+" on spark")
			again, err := runPipeline(ctx, t, d, spec, sparkWH, remote, "spark-again")
			if err != nil {
				t.Fatalf("spark rerun: %v", err)
			}
			if n := again.written(); n != 0 {
				t.Errorf("a rerun on spark committed %d versions, want none", n)
			}
		})
	}
}
