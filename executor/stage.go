package executor

import (
	"context"
	"fmt"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// RunStage carries out one attempt of a compiled stage on its engine. A pipeline that is
// all local runs its stages here directly, without table leases. A pipeline with a
// stage on Spark runs every stage (local ones too) through Run, each holding the lease
// of the tables it writes while it runs, so that a local stage and a Spark one never
// write a table at once.
func (d *Dispatcher) RunStage(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
	if !r.Spec.UsesSpark() {
		return r.Stage.Job.Run(ctx, r.Env)
	}
	var spark *SparkConfig
	if r.Stage.Engine == pipelines.EngineSpark {
		cfg, err := PipelineSpark(r.Spec)
		if err != nil {
			return jobs.Result{}, err
		}
		spark = &cfg
	}
	return d.Run(ctx, Task{Key: r.Key(), Stage: r.Stage.Job, Env: r.Env}, Engine(r.Stage.Engine), spark)
}

// PipelineSpark is a pipeline's cluster and how it sees the warehouse and the ingest
// sources (storeurl.Spark: local paths as they are, s3:// as s3a://), unless the
// pipeline names the warehouse as the cluster reads it.
func PipelineSpark(spec *pipelines.Spec) (SparkConfig, error) {
	wh := spec.Spark.Warehouse
	if wh == "" {
		var err error
		if wh, err = storeurl.Spark(spec.Warehouse); err != nil {
			return SparkConfig{}, fmt.Errorf("pipeline %s: warehouse %s as Spark reads it: %w", spec.Name, spec.Warehouse, err)
		}
	}
	return SparkConfig{Remote: spec.Spark.Remote, Conf: spec.Spark.Conf, Warehouse: wh, Locate: storeurl.Spark}, nil
}
