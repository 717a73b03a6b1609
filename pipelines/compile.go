package pipelines

import (
	"context"
	"fmt"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// StageSpec is one stage of a compiled pipeline: the validated stage (its name,
// dependencies, retries, timeout and engine) and the job that carries out its kind.
type StageSpec struct {
	*Stage
	Job jobs.Stage
}

// Plan is a compiled pipeline: its stages, each with its job, in declaration order. It
// says what runs and in which order, not where: an engine carries out each attempt.
type Plan struct {
	Spec   *Spec
	Stages []*StageSpec
}

// Compile turns a validated pipeline into its plan. consumers are the change feed
// readers its vacuum stages must not starve (those of every loaded pipeline); nil means
// the pipeline's own (Spec.Consumers).
func Compile(spec *Spec, consumers []jobs.Consumer) (*Plan, error) {
	if consumers == nil {
		consumers = spec.Consumers()
	}
	p := &Plan{Spec: spec}
	for _, st := range spec.Stages {
		job, err := jobs.New(st.Name, st.Config, consumers)
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", spec.Name, err)
		}
		p.Stages = append(p.Stages, &StageSpec{Stage: st, Job: job})
	}
	idle := dag.TaskFunc(func(context.Context, int) error { return nil })
	if _, err := p.Graph(func(*StageSpec) dag.Task { return idle }); err != nil { // the graph is sound
		return nil, err
	}
	return p, nil
}

// Graph is the plan as a graph to run: one node per stage with the stage's retries
// (exponential backoff from retry_delay up to max_retry_delay, full jitter) and
// per-attempt timeout, its task made by task.
func (p *Plan) Graph(task func(*StageSpec) dag.Task) (*dag.Graph, error) {
	nodes := make([]dag.Node, 0, len(p.Stages))
	for _, st := range p.Stages {
		nodes = append(nodes, dag.Node{
			Name:      st.Name,
			DependsOn: st.DependsOn,
			Retries:   st.Retries,
			Backoff:   dag.Backoff{Initial: st.RetryDelay, Max: st.MaxRetryDelay, Jitter: dag.FullJitter},
			Timeout:   st.Timeout,
			Task:      task(st),
		})
	}
	g, err := dag.New(nodes)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.Spec.Name, err)
	}
	return g, nil
}

// TablesByName maps the pipeline's declared tables by name, as a stage's environment holds
// them (jobs.Env.Tables).
func (s *Spec) TablesByName() map[string]*jobs.Table {
	tables := make(map[string]*jobs.Table, len(s.Tables))
	for _, t := range s.Tables {
		tables[t.Name] = t
	}
	return tables
}

// Consumers lists the pipeline's change feed consumers: its capture_history stages, its
// scd1_merge / scd2_merge stages with source_changes, and its fact_load stages (of their
// source: with source_changes, or a snapshot source with a change feed, which a run
// reads when the source changed in place; and of each lookup's dimension with a change
// feed, which re-keying reads). A vacuum keeps what they have yet to read.
func (s *Spec) Consumers() []jobs.Consumer {
	var out []jobs.Consumer
	add := func(st *Stage, source, target, appID string, starting *int64, rekeys, snapshot bool) {
		src, dst := s.Table(source), s.Table(target)
		if src == nil || dst == nil || snapshot && !src.ChangeDataFeed() {
			return
		}
		out = append(out, jobs.Consumer{Pipeline: s.Name, Stage: st.Name, Source: src, History: dst,
			AppID: appID, StartingVersion: starting, Rekeys: rekeys, Snapshot: snapshot})
	}
	for _, st := range s.Stages {
		switch c := st.Config.(type) {
		case *jobs.CaptureHistoryConfig:
			add(st, c.Source, c.Target, jobs.NewCaptureHistory(st.Name, c).AppID(), c.StartingVersion, false, false)
		case *jobs.SCD2Config:
			if c.SourceChanges {
				add(st, c.Source, c.Target, jobs.NewSCD2Merge(st.Name, c).AppID(), nil, false, false)
			}
		case *jobs.SCD1Config:
			if c.SourceChanges {
				add(st, c.Source, c.Target, jobs.NewSCD1Merge(st.Name, c).AppID(), nil, false, false)
			}
		case *jobs.FactLoadConfig:
			fl := jobs.NewFactLoad(st.Name, c)
			add(st, c.Source, c.Target, fl.AppID(), nil, false, !c.SourceChanges)
			for _, l := range c.Lookups {
				if dim := s.Table(l.Dimension); dim != nil && dim.ChangeDataFeed() {
					add(st, l.Dimension, c.Target, fl.DimensionAppID(l.Dimension), nil, true, false)
				}
			}
		}
	}
	return out
}
