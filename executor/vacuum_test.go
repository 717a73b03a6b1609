package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// A vacuum with retain 0 (forced) on Spark deletes the files the local vacuum deletes
// (the plan's dry run lists them, Spark's VACUUM RETAIN n HOURS removes them), records
// VACUUM START/END as the local one does, and keeps what capture_history still needs.
func TestVacuumOnSparkEqualsLocal(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	d := executor.NewDispatcher(0)
	defer d.Close()
	now = time.Now // files must be older than the retention by the clock
	defer func() { now = func() time.Time { return clock } }()
	run := func(engine string) (string, *runResult) {
		wh := t.TempDir()
		spec := loadExample(t, examplePath("sales"), wh, pipelines.EngineLocal)
		vac := spec.Stage("vacuum")
		cfg := *vac.Config.(*jobs.VacuumConfig)
		zero := jobs.Duration(0)
		cfg.Retain, cfg.Force = &zero, true
		vac.Config, vac.Engine = &cfg, engine
		res, err := runPipeline(ctx, t, d, spec, wh, remote, engine)
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		return wh, res
	}
	localWH, localRes := run(pipelines.EngineLocal)
	sparkWH, sparkRes := run(pipelines.EngineSpark)
	if len(sparkRes.results["vacuum"].Operations) == 0 {
		t.Fatalf("the vacuum sent nothing to Spark: %v", sparkRes.results["vacuum"].Notes)
	}
	for _, table := range []string{"bronze/sales_transactions", "staging/customers", "sales/customer"} {
		if got, want := dataFiles(t, filepath.Join(sparkWH, table)), dataFiles(t, filepath.Join(localWH, table)); len(got) != len(want) {
			t.Errorf("%s: %d data files left after the Spark vacuum, %d after the local one", table, len(got), len(want))
		}
	}
	lv, sv := localRes.results["vacuum"].VersionsWritten, sparkRes.results["vacuum"].VersionsWritten
	if !slices.Equal(lv, sv) {
		t.Errorf("vacuum versions: local %v, spark %v", lv, sv)
	}
	// (Load times follow the real clock here, so only the histories are compared.)
	spec := loadExample(t, examplePath("sales"), sparkWH, pipelines.EngineLocal)
	lf, sf := facts(ctx, t, spec, localWH), facts(ctx, t, spec, sparkWH)
	for name, f := range lf {
		if !slices.Equal(f.history, sf[name].history) {
			t.Errorf("%s history: local %v, spark %v", name, f.history, sf[name].history)
		}
		if !slices.Contains(f.history, fmt.Sprintf("%d VACUUM END", len(f.history)-1)) && (name == "bronze.sales_transactions" || name == "staging.customers") {
			t.Errorf("%s: the local vacuum deleted nothing (history %v); the test needs files to delete", name, f.history)
		}
	}
}

// dataFiles lists the Parquet files of a table directory.
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && filepath.Ext(p) == ".parquet" {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
