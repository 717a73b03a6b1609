package scheduler

import (
	"context"
	"fmt"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Engine carries out one attempt of a compiled stage, with the environment the runner
// built for it, and returns the stage's result. The executor's Dispatcher is the engine
// of orchestrator run and serve: it picks where each stage runs and which leases it
// holds.
type Engine interface {
	RunStage(ctx context.Context, r pipelines.StageRun) (jobs.Result, error)
}

// inProcess is the engine of a runner given none: every stage runs in this process; a
// stage on Spark cannot run.
type inProcess struct{}

func (inProcess) RunStage(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
	if r.Stage.Engine == pipelines.EngineSpark {
		return jobs.Result{}, dag.Permanent(fmt.Errorf("stage %s: engine spark needs the executor (orchestrator run or serve)", r.Stage.Name))
	}
	return r.Stage.Job.Run(ctx, r.Env)
}
