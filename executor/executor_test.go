package executor_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// The Executor contract on Spark: a key submitted twice runs once; Status and Logs
// tell what it did (its session, each statement with its operation id); after it, a
// process that never ran it (a fresh executor) finds it committed in the target's log.
func TestSparkExecutorContract(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	wh := t.TempDir()
	d := executor.NewDispatcher(0)
	defer d.Close()
	spec := loadExample(t, examplePath("sales"), wh, pipelines.EngineLocal)
	spec.Stages = slices.DeleteFunc(spec.Stages, func(s *pipelines.Stage) bool {
		return s.Name == "capture_sales_history" || s.Name == "vacuum"
	})
	if _, err := runPipeline(ctx, t, d, spec, wh, remote, "load"); err != nil {
		t.Fatal(err)
	}
	full := loadExample(t, examplePath("sales"), wh, pipelines.EngineLocal)
	task := stageTask(t, full, wh, "capture_sales_history")

	before, err := executor.NewLocal().Status(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if before.State != executor.NotSubmitted {
		t.Fatalf("status before any run = %s, want %s", before.State, executor.NotSubmitted)
	}
	ex, err := executor.NewSpark(executor.SparkConfig{Remote: remote, Warehouse: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	for range 2 {
		if err := ex.Submit(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ex.Wait(ctx, task.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Operations) != 1 || len(res.VersionsWritten) != 1 || res.RowsWritten != 8 {
		t.Errorf("capture on spark: %d statements, versions %v, %d rows; want one INSERT committing the 8 change rows once", len(res.Operations), res.VersionsWritten, res.RowsWritten)
	}
	st, err := ex.Status(ctx, task)
	if err != nil || st.State != executor.Succeeded {
		t.Errorf("status = %v, %v; want %s", st.State, err, executor.Succeeded)
	}
	logs := strings.Join(ex.Logs(task.Key), "\n")
	if !strings.Contains(logs, "spark session") || !strings.Contains(logs, res.Operations[0].OperationID+": INSERT INTO") {
		t.Errorf("logs do not name the session and the statement with its operation id:\n%s", logs)
	}
	after, err := executor.NewLocal().Status(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != executor.Committed {
		t.Errorf("status in a fresh executor = %s, want %s", after.State, executor.Committed)
	}
}
