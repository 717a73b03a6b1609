package pipelines

import (
	"context"
	"errors"
	"log/slog"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// LocalRuntime is what these tests run a compiled pipeline with: every stage in this
// process, each attempt with an environment as the scheduler's runner gives it.
type LocalRuntime struct {
	Warehouse    objectstore.Store
	OpenLocation func(ctx context.Context, location string) (objectstore.Store, string, error)
	Delta        delta.Options
	RunID        string
	Logger       *slog.Logger
	Done         func(stage string, attempt int, res jobs.Result, err error)
}

// LocalGraph compiles spec and returns its graph, each attempt running its job here.
func LocalGraph(spec *Spec, rt LocalRuntime) (*dag.Graph, error) {
	plan, err := Compile(spec, nil)
	if err != nil {
		return nil, err
	}
	tables := spec.TablesByName()
	return plan.Graph(func(st *StageSpec) dag.Task {
		return dag.TaskFunc(func(ctx context.Context, attempt int) error {
			env := &jobs.Env{
				Warehouse:    rt.Warehouse,
				Tables:       tables,
				OpenLocation: rt.OpenLocation,
				Lineage:      delta.Lineage{Pipeline: spec.Name, Stage: st.Name, RunID: rt.RunID, Attempt: attempt},
				Delta:        rt.Delta,
				Logger:       rt.Logger,
				PipelineFile: spec.File,
			}
			res, err := st.Job.Run(ctx, env)
			if rt.Done != nil {
				rt.Done(st.Name, attempt, res, err)
			}
			if diff := (*jobs.DifferenceError)(nil); errors.As(err, &diff) {
				return dag.Permanent(err)
			}
			return err
		})
	})
}
