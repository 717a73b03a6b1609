package executor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Three daily extracts (a rename, an upgrade, a key dropped and back, a new key), each
// loaded locally as a snapshot and merged into the SCD2 dimension on Spark, one run a
// day: after every day the tables equal those of the all-local runs, change feed and
// history included.
func TestDailySnapshotsOnSparkEqualLocal(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	d := executor.NewDispatcher(0)
	defer d.Close()
	file := examplePath("daily-snapshot")
	localWH, sparkWH := t.TempDir(), t.TempDir()
	for _, day := range []string{"2026-01-14", "2026-01-15", "2026-01-16"} {
		vars := func(wh string) map[string]string { return map[string]string{"ORCH_WAREHOUSE": wh, "EXTRACT_DAY": day} }
		if _, err := runPipeline(ctx, t, d, loadExampleEnv(t, file, vars(localWH), pipelines.EngineLocal), localWH, remote, "local-"+day); err != nil {
			t.Fatalf("%s local: %v", day, err)
		}
		spec := loadExampleEnv(t, file, vars(sparkWH), pipelines.EngineSpark, "load_extract")
		res, err := runPipeline(ctx, t, d, spec, sparkWH, remote, "spark-"+day)
		if err != nil {
			t.Fatalf("%s spark: %v", day, err)
		}
		if r := res.results["account_history"]; r.Engine != "spark" {
			t.Fatalf("%s: account_history ran on %q", day, r.Engine)
		}
		sameFacts(t, facts(ctx, t, spec, localWH), facts(ctx, t, spec, sparkWH), fmt.Sprintf("after %s", day))
	}
}
