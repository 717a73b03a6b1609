package executor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// leaseProbe is a stage that writes raw.t and notes whether a table lease is held while
// it runs.
type leaseProbe struct{ held bool }

func (*leaseProbe) Name() string     { return "a" }
func (*leaseProbe) Kind() jobs.Kind  { return jobs.KindVacuum }
func (*leaseProbe) Writes() []string { return []string{"raw.t"} }

func (p *leaseProbe) Run(ctx context.Context, env *jobs.Env) (jobs.Result, error) {
	infos, err := env.Warehouse.List(ctx, "_orchestrator/table-leases/", "")
	p.held = len(infos) > 0
	return jobs.Result{}, err
}

// TestRunStageLeasesOnlyWithSpark: the dispatcher's engine policy. A local stage of an
// all-local pipeline runs without a table lease; the same local stage in a pipeline
// with a stage on Spark holds the lease of the table it writes while it runs, and lets
// it go after.
func TestRunStageLeasesOnlyWithSpark(t *testing.T) {
	const local = `pipeline: p
tables: {raw.t: {columns: [{name: id, type: string}]}}
stages:
  - {name: a, kind: vacuum, tables: [raw.t]}
`
	mixed := local + "  - {name: b, kind: vacuum, tables: [raw.t], engine: spark}\nspark: {remote: \"sc://127.0.0.1:1\"}\n"
	d := executor.NewDispatcher(0)
	defer d.Close()
	for _, tc := range []struct {
		name, yaml string
		wantLease  bool
	}{{"all local", local, false}, {"with a spark stage", mixed, true}} {
		spec, err := pipelines.Parse("/p.yaml", []byte(tc.yaml), pipelines.Options{LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		wh := mem.New(mem.Config{})
		probe := &leaseProbe{}
		env := &jobs.Env{Warehouse: wh, Tables: spec.TablesByName()}
		env.Lineage.RunID = "r1"
		r := pipelines.StageRun{Spec: spec, Stage: &pipelines.StageSpec{Stage: spec.Stage("a"), Job: probe}, Env: env, Attempt: 1}
		if _, err := d.RunStage(context.Background(), r); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if probe.held != tc.wantLease {
			t.Errorf("%s: lease held while the stage ran: %v, want %v", tc.name, probe.held, tc.wantLease)
		}
		if left, _ := wh.List(context.Background(), "_orchestrator/table-leases/", ""); len(left) > 0 {
			t.Errorf("%s: leases left after the stage: %v", tc.name, left)
		}
	}
}

// TestPipelineSpark: a pipeline's cluster sees its warehouse and sources in their Spark
// form (s3:// as s3a://) unless the pipeline names the warehouse as the cluster reads it.
func TestPipelineSpark(t *testing.T) {
	const yaml = `pipeline: p
warehouse: s3://bucket/wh
tables: {raw.t: {columns: [{name: id, type: string}]}}
stages:
  - {name: a, kind: vacuum, tables: [raw.t], engine: spark}
spark: {remote: "sc://spark:15002"%s}
`
	for _, tc := range []struct{ extra, want string }{
		{"", "s3a://bucket/wh"},
		{", warehouse: \"s3a://mirror/wh\"", "s3a://mirror/wh"},
	} {
		spec, err := pipelines.Parse("/p.yaml", []byte(fmt.Sprintf(yaml, tc.extra)), pipelines.Options{LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := executor.PipelineSpark(spec)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Warehouse != tc.want || cfg.Remote != "sc://spark:15002" {
			t.Errorf("spark config %+v, want warehouse %s", cfg, tc.want)
		}
		if loc, err := cfg.Locate("s3://landing/day=1/a.csv"); err != nil || loc != "s3a://landing/day=1/a.csv" {
			t.Errorf("a source as Spark reads it: %q, %v", loc, err)
		}
	}
}
