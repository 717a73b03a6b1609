package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

const ingestPipeline = `pipeline: orders
warehouse: ./warehouse
tables:
  bronze.orders:
    columns:
      - {name: order_id, type: string, nullable: false}
      - {name: qty, type: int}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
stages:
  - {name: load, kind: ingest, source: landing/*.csv, target: bronze.orders}
  - {name: load_quarantine, kind: ingest, source: landing/*.csv, target: bronze.orders, on_error: skip}
`

// On Spark a CSV whose columns are not in the declared order fails the ingest, naming
// the file's header, and loads nothing (Spark maps CSV columns by position: it must not
// shift values); an option only the local engine has is refused before anything runs.
func TestSparkIngestRefusals(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "landing"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pipeline.yaml", ingestPipeline)
	write("landing/a.csv", "qty,order_id\n3,O-1\n")
	wh := filepath.Join(dir, "warehouse")
	d := executor.NewDispatcher(0)
	defer d.Close()
	spec, err := pipelines.Load(filepath.Join(dir, "pipeline.yaml"), pipelines.Options{})
	if err != nil {
		t.Fatal(err)
	}
	only := func(name string) {
		st := spec.Stage(name)
		st.Engine = pipelines.EngineSpark
		spec.Stages = []*pipelines.Stage{st}
	}
	only("load")
	_, err = runPipeline(ctx, t, d, spec, wh, remote, "swapped")
	if err == nil || !strings.Contains(err.Error(), "a.csv") {
		t.Errorf("ingest of a CSV with swapped columns on spark: %v; want an error naming the file or its header", err)
	}
	if v := tableVersionOf(t, wh, "bronze/orders"); v != 0 {
		t.Errorf("bronze.orders at version %d, want 0 (created, nothing loaded)", v)
	}

	spec, _ = pipelines.Load(filepath.Join(dir, "pipeline.yaml"), pipelines.Options{})
	only("load_quarantine")
	_, err = runPipeline(ctx, t, d, spec, wh, remote, "skip")
	if err == nil || !strings.Contains(err.Error(), "on_error: skip") || !strings.Contains(err.Error(), "engine: local") {
		t.Errorf("on_error: skip on spark: %v; want a refusal naming on_error: skip and engine: local", err)
	}
}
