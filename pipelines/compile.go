package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// Runtime is what a compiled pipeline runs with.
type Runtime struct {
	// Warehouse holds the pipeline's tables, each under its Path.
	Warehouse objectstore.Store
	// OpenLocation opens the store behind a source location (see jobs.Env).
	OpenLocation func(ctx context.Context, location string) (objectstore.Store, string, error)
	// Delta carries the clock, engine info and user name for commits.
	Delta delta.Options
	// RunID names this run in every commit's lineage.
	RunID string
	// Logger receives stage logs; nil means slog.Default(). StageLogger, when set, gives
	// each stage its own logger instead (a run record keeps each stage's log lines).
	Logger      *slog.Logger
	StageLogger func(stage string) *slog.Logger
	// Consumers are the capture_history stages of every loaded pipeline, which vacuum
	// stages must not starve; nil means this pipeline's own (Spec.Consumers).
	Consumers []jobs.Consumer
	// Progress, when set, receives running row counts per stage.
	Progress func(stage string, p jobs.Progress)
	// Done, when set, receives each attempt's result.
	Done func(stage string, attempt int, res jobs.Result, err error)
	// Execute, when set, carries out each stage attempt on its engine (the executor's
	// dispatcher, wired by the command); nil runs every stage here with jobs.Stage.Run,
	// and refuses spark stages.
	Execute func(ctx context.Context, r StageRun) (jobs.Result, error)
	// MemoryBudget and SpillDir are the stages' defaults (see jobs.Env).
	MemoryBudget jobs.ByteSize
	SpillDir     string
}

// Compile turns a validated pipeline into a graph of its stages, each node running the
// stage's kind with the runtime, its retries (exponential backoff from retry_delay up to
// max_retry_delay, full jitter) and its per-attempt timeout.
func Compile(spec *Spec, rt Runtime) (*dag.Graph, error) {
	consumers := rt.Consumers
	if consumers == nil {
		consumers = spec.Consumers()
	}
	tables := make(map[string]*jobs.Table, len(spec.Tables))
	for _, t := range spec.Tables {
		tables[t.Name] = t
	}
	nodes := make([]dag.Node, 0, len(spec.Stages))
	for _, st := range spec.Stages {
		stage, err := jobs.New(st.Name, st.Config, consumers)
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", spec.Name, err)
		}
		nodes = append(nodes, dag.Node{
			Name:      st.Name,
			DependsOn: st.DependsOn,
			Retries:   st.Retries,
			Backoff:   dag.Backoff{Initial: st.RetryDelay, Max: st.MaxRetryDelay, Jitter: dag.FullJitter},
			Timeout:   st.Timeout,
			Task:      stageTask(spec, st, rt, tables, stage),
		})
	}
	g, err := dag.New(nodes)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", spec.Name, err)
	}
	return g, nil
}

// stageTask adapts a stage to a dag task: each attempt gets its own environment, whose
// lineage names the pipeline, stage, run and attempt.
func stageTask(spec *Spec, st *Stage, rt Runtime, tables map[string]*jobs.Table, stage jobs.Stage) dag.Task {
	return dag.TaskFunc(func(ctx context.Context, attempt int) error {
		env := &jobs.Env{
			Warehouse:    rt.Warehouse,
			Tables:       tables,
			OpenLocation: rt.OpenLocation,
			Lineage:      delta.Lineage{Pipeline: spec.Name, Stage: stage.Name(), RunID: rt.RunID, Attempt: attempt},
			Delta:        rt.Delta,
			Logger:       rt.Logger,
			PipelineFile: spec.File,
			MemoryBudget: rt.MemoryBudget,
			SpillDir:     rt.SpillDir,
			Expectations: st.Expectations,
		}
		if rt.StageLogger != nil {
			env.Logger = rt.StageLogger(stage.Name())
		}
		if rt.Progress != nil {
			env.Progress = func(p jobs.Progress) { rt.Progress(stage.Name(), p) }
		}
		var res jobs.Result
		var err error
		switch {
		case rt.Execute != nil:
			res, err = rt.Execute(ctx, StageRun{Spec: spec, Stage: st, Job: stage, Env: env, Attempt: attempt})
		case st.Engine == EngineSpark:
			err = dag.Permanent(fmt.Errorf("stage %s: engine spark needs the executor (orchestrator run or serve)", st.Name))
		default:
			res, err = stage.Run(ctx, env)
		}
		if err == nil {
			err = jobs.CheckExpectations(ctx, env, stage.Name(), st.Config, &res)
		}
		if rt.Done != nil {
			rt.Done(stage.Name(), attempt, res, err)
		}
		if diff := (*jobs.DifferenceError)(nil); errors.As(err, &diff) {
			return dag.Permanent(err) // the tables stay as they are until someone converges them
		}
		if exp := (*jobs.ExpectationError)(nil); errors.As(err, &exp) {
			return dag.Permanent(err) // the same rows fail again
		}
		return err
	})
}

// Consumers lists the pipeline's change feed consumers: its capture_history stages and
// its scd1_merge / scd2_merge stages with source_changes. A vacuum keeps what they have
// yet to read.
func (s *Spec) Consumers() []jobs.Consumer {
	var out []jobs.Consumer
	for _, st := range s.Stages {
		var source, target, appID string
		var starting *int64
		switch c := st.Config.(type) {
		case *jobs.CaptureHistoryConfig:
			source, target, appID, starting = c.Source, c.Target, jobs.NewCaptureHistory(st.Name, c).AppID(), c.StartingVersion
		case *jobs.SCD2Config:
			if !c.SourceChanges {
				continue
			}
			source, target, appID = c.Source, c.Target, jobs.NewSCD2Merge(st.Name, c).AppID()
		case *jobs.SCD1Config:
			if !c.SourceChanges {
				continue
			}
			source, target, appID = c.Source, c.Target, jobs.NewSCD1Merge(st.Name, c).AppID()
		default:
			continue
		}
		src, dst := s.Table(source), s.Table(target)
		if src == nil || dst == nil {
			continue
		}
		out = append(out, jobs.Consumer{
			Pipeline:        s.Name,
			Stage:           st.Name,
			Source:          src,
			History:         dst,
			AppID:           appID,
			StartingVersion: starting,
		})
	}
	return out
}
