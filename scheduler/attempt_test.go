package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// TestRunnerWithoutEngineRefusesSpark: a runner given no engine runs every stage in
// this process, and a stage on Spark fails at once (no retry can help) saying what it
// needs; the record names the stage.
func TestRunnerWithoutEngineRefusesSpark(t *testing.T) {
	wh := mem.New(mem.Config{})
	r := NewRunner(RunnerConfig{Opener: opener{wh}, Logger: quiet})
	yaml := strings.Replace(fmt.Sprintf(testPipeline, `spark: {remote: "sc://127.0.0.1:1"}`),
		"{name: a, kind: vacuum, tables: [raw.t]}", "{name: a, kind: vacuum, tables: [raw.t], engine: spark, retries: 3}", 1)
	spec := parseSpec(t, yaml)
	rec, err := r.Run(context.Background(), spec, Trigger{Kind: Manual}, Hooks{})
	if err == nil || rec == nil || rec.Status != Failed {
		t.Fatalf("run: %v, record %+v; want a failed run", err, rec)
	}
	a := rec.Stage("a")
	if a == nil || len(a.Attempts) != 1 || !strings.Contains(a.Error, "stage a: engine spark needs the executor") {
		t.Errorf("stage a: %+v; want one attempt failing with engine spark needs the executor", a)
	}
}
