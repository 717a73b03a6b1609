package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// stageExecutor carries out stage attempts through the dispatcher when the pipeline
// has a stage on Spark: every stage of such a pipeline (local ones too) holds the lease
// of the tables it writes while it runs. A pipeline that is all local runs its stages
// here directly, as before engines existed.
func stageExecutor(d *executor.Dispatcher) func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
	return func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
		if !r.Spec.UsesSpark() {
			return r.Job.Run(ctx, r.Env)
		}
		var spark *executor.SparkConfig
		if r.Stage.Engine == pipelines.EngineSpark {
			cfg, err := sparkConfig(r.Spec)
			if err != nil {
				return jobs.Result{}, err
			}
			spark = &cfg
		}
		return d.Run(ctx, executor.Task{Key: r.Key(), Stage: r.Job, Env: r.Env}, executor.Engine(r.Stage.Engine), spark)
	}
}

// sparkConfig is the pipeline's cluster and how it sees the warehouse and the ingest
// sources: local paths as they are (a cluster on this machine or a shared file
// system), s3:// as s3a://.
func sparkConfig(spec *pipelines.Spec) (executor.SparkConfig, error) {
	wh := spec.Spark.Warehouse
	if wh == "" {
		var err error
		if wh, err = sparkLocation(spec.Warehouse); err != nil {
			return executor.SparkConfig{}, fmt.Errorf("pipeline %s: warehouse %s as Spark reads it: %w", spec.Name, spec.Warehouse, err)
		}
	}
	return executor.SparkConfig{Remote: spec.Spark.Remote, Conf: spec.Spark.Conf, Warehouse: wh, Locate: sparkLocation}, nil
}

// sparkLocation turns a location as a pipeline writes it into one Spark reads.
func sparkLocation(loc string) (string, error) {
	if rest, ok := strings.CutPrefix(loc, "file://"); ok {
		loc = rest
	}
	if rest, ok := strings.CutPrefix(loc, "s3://"); ok {
		return "s3a://" + rest, nil
	}
	if strings.Contains(loc, "://") {
		return "", fmt.Errorf("%s: Spark reads local paths and s3:// (as s3a://) only", loc)
	}
	return filepath.Abs(loc)
}
