package executor_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// A mixed pipeline on one warehouse (ingest and capture local, the SCD2 merge on Spark,
// vacuum local) gives the tables of an all-local run; a rerun commits nothing; and a
// process that did not run the merge reads its status from the dimension's Delta log.
func TestMixedPipelineEqualsLocal(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	d := executor.NewDispatcher(0)
	defer d.Close()
	file := examplePath("sales")
	localWH, mixedWH := t.TempDir(), t.TempDir()
	if _, err := runPipeline(ctx, t, d, loadExample(t, file, localWH, pipelines.EngineLocal), localWH, remote, "local"); err != nil {
		t.Fatal(err)
	}
	spec := loadExample(t, file, mixedWH, pipelines.EngineLocal)
	spec.Stage("merge_customers").Engine = pipelines.EngineSpark
	res, err := runPipeline(ctx, t, d, spec, mixedWH, remote, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	merge := res.results["merge_customers"]
	if merge.Engine != "spark" || len(merge.Operations) == 0 {
		t.Fatalf("merge_customers ran on %q with %d statements, want spark", merge.Engine, len(merge.Operations))
	}
	last := merge.Operations[len(merge.Operations)-1]
	if last.Version < 0 || last.Metrics["numTargetRowsInserted"] == "" {
		t.Errorf("the MERGE's record has version %d and metrics %v; want the committed version and Delta's MERGE metrics", last.Version, last.Metrics)
	}
	if res.results["ingest_customers"].Engine != "local" {
		t.Errorf("ingest_customers ran on %q, want local", res.results["ingest_customers"].Engine)
	}
	sameFacts(t, facts(ctx, t, spec, localWH), facts(ctx, t, spec, mixedWH), "mixed")
	again, err := runPipeline(ctx, t, d, spec, mixedWH, remote, "mixed-again")
	if err != nil {
		t.Fatal(err)
	}
	if n := again.written(); n != 0 {
		t.Errorf("a rerun committed %d versions, want none", n)
	}

	// Another process (a fresh executor, as after a restart) reads the merge's status
	// from the dimension's log: committed, so it would not submit it again.
	task := stageTask(t, spec, mixedWH, "merge_customers")
	st, err := executor.NewLocal().Status(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != executor.Committed {
		t.Errorf("status after a restart = %s, want %s", st.State, executor.Committed)
	}
}

// stageTask builds the task of one stage of a pipeline on warehouse wh.
func stageTask(t *testing.T, spec *pipelines.Spec, wh, name string) executor.Task {
	t.Helper()
	warehouse, err := fs.New(fs.Config{Dir: wh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { warehouse.Close() })
	st := spec.Stage(name)
	stage, err := jobs.New(name, st.Config, spec.Consumers())
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]*jobs.Table{}
	for _, tb := range spec.Tables {
		tables[tb.Name] = tb
	}
	return executor.Task{Key: "test/" + name, Stage: stage, Env: &jobs.Env{
		Warehouse: warehouse, Tables: tables, Delta: delta.Options{UserName: "test"},
		OpenLocation: func(ctx context.Context, loc string) (objectstore.Store, string, error) {
			s, err := fs.New(fs.Config{Dir: loc})
			return s, "", err
		},
		Lineage: delta.Lineage{Pipeline: spec.Name, Stage: name, RunID: "test", Attempt: 1},
	}}
}

// leaseChecked is a local stage that, when it runs, checks that the lease of its
// table names its own task: no other stage can be committing to the table.
type leaseChecked struct {
	jobs.Stage
	writes []string
	check  func(ctx context.Context) error
}

func (s *leaseChecked) Writes() []string { return s.writes }

func (s *leaseChecked) Run(ctx context.Context, env *jobs.Env) (jobs.Result, error) {
	if err := s.check(ctx); err != nil {
		return jobs.Result{}, err
	}
	res, err := s.Stage.Run(ctx, env)
	if cerr := s.check(ctx); cerr != nil && err == nil {
		err = cerr
	}
	return res, err
}

// A local and a Spark stage racing for one table are serialised by its lease: each
// holds it while it runs (the local one finds its own task in the lease before and after
// its work), both commit, and the table holds both files' rows.
func TestLocalAndSparkStagesSerialisedByLease(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	wh := t.TempDir()
	spec := loadExample(t, examplePath("sales"), wh, pipelines.EngineLocal)
	d := executor.NewDispatcher(0)
	defer d.Close()
	landing := filepath.Join(spec.Dir, "landing", "sales")
	mk := func(name, file string) executor.Task {
		cfg := *spec.Stage("ingest_sales").Config.(*jobs.IngestConfig)
		cfg.Source = filepath.Join(landing, file)
		st := *spec.Stage("ingest_sales")
		st.Name, st.Config = name, &cfg
		spec.Stages = append(spec.Stages, &st)
		return stageTask(t, spec, wh, name)
	}
	localTask, sparkTask := mk("load_day1", "2026-01-14.csv"), mk("load_day2", "2026-01-15.csv")
	table := spec.Table("bronze.sales_transactions").Path
	leases := d.Leases(localTask)
	var mu sync.Mutex
	var seen []string
	localTask.Stage = &leaseChecked{Stage: localTask.Stage, writes: []string{"bronze.sales_transactions"}, check: func(ctx context.Context) error {
		holder, err := leases.HolderOf(ctx, table)
		if err != nil {
			return err
		}
		mu.Lock()
		seen = append(seen, holder)
		mu.Unlock()
		if holder != localTask.Key {
			t.Errorf("the local stage runs while the lease names %q, want its own task", holder)
		}
		return nil
	}}
	spark := &executor.SparkConfig{Remote: remote, Warehouse: wh, Locate: func(loc string) (string, error) { return loc, nil }}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	results := make([]jobs.Result, 2)
	wg.Go(func() { results[0], errs[0] = d.Run(ctx, localTask, executor.Local, nil) })
	wg.Go(func() { results[1], errs[1] = d.Run(ctx, sparkTask, executor.Spark, spark) })
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
	}
	if len(results[1].Operations) == 0 || len(results[0].VersionsWritten) != 1 || len(results[1].VersionsWritten) != 1 {
		t.Fatalf("local wrote %v, spark wrote %v (%d statements); want one commit each", results[0].VersionsWritten, results[1].VersionsWritten, len(results[1].Operations))
	}
	if len(seen) != 2 {
		t.Errorf("the local stage checked the lease %d times, want 2", len(seen))
	}
	tbl, err := delta.Open(ctx, localTask.Env.Warehouse, table, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := snap.NumRecords(); n != 6 {
		t.Errorf("table has %d rows, want the 6 transactions of both files", n)
	}
}
