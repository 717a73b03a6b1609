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

// copyDir copies an example's directory (its pipeline and landing files).
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "warehouse" {
			return filepath.SkipDir
		}
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// A late event (one that falls before events merged earlier) is refused on Spark,
// naming the key, and nothing is written; the same stage on the local engine then
// places it (its event log filled from the source's change feed, the watermark taken
// from it), and both targets equal those of an all-local run.
func TestLateEventRefusedOnSpark(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	d := executor.NewDispatcher(0)
	defer d.Close()
	src := filepath.Dir(examplePath("cdc-events"))
	localWH, sparkWH := t.TempDir(), t.TempDir()
	if _, err := runPipeline(ctx, t, d, loadExample(t, filepath.Join(src, "pipeline.yaml"), localWH, pipelines.EngineLocal), localWH, remote, "local"); err != nil {
		t.Fatal(err)
	}

	dir := copyDir(t, src)
	late := filepath.Join(dir, "landing", "events-003.csv") // C-3 at 2026-01-14T18:00, before its merged events of the 15th
	hidden := late + ".later"
	if err := os.Rename(late, hidden); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	spec := loadExample(t, file, sparkWH, pipelines.EngineSpark, "load_events")
	if _, err := runPipeline(ctx, t, d, spec, sparkWH, remote, "first"); err != nil {
		t.Fatalf("first files on spark: %v", err)
	}
	before := facts(ctx, t, spec, sparkWH)
	if err := os.Rename(hidden, late); err != nil {
		t.Fatal(err)
	}
	res, err := runPipeline(ctx, t, d, spec, sparkWH, remote, "late")
	if err == nil {
		t.Fatal("the late batch merged on spark; want it refused")
	}
	for _, stage := range []string{"customer_history", "customer_current"} {
		if r := res.results[stage]; len(r.VersionsWritten) != 0 {
			t.Errorf("%s committed %v though it refused the batch", stage, r.VersionsWritten)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, "key C-3") || !strings.Contains(msg, "late event") || !strings.Contains(msg, "engine: local") {
		t.Errorf("error = %v; want it to name key C-3, the late event and engine: local", err)
	}
	after := facts(ctx, t, spec, sparkWH)
	for _, name := range []string{"dim.customer", "current.customer"} {
		if len(after[name].history) != len(before[name].history) {
			t.Errorf("%s: history %v after the refused batch, want %v", name, after[name].history, before[name].history)
		}
	}

	// The dimension's stage on the local engine places the late event exactly (its
	// event log is filled from the source's change feed): the tables of an all-local run.
	spec = loadExample(t, file, sparkWH, pipelines.EngineLocal)
	spec.Stages = []*pipelines.Stage{spec.Stage("customer_history"), spec.Stage("customer_current")}
	for _, st := range spec.Stages {
		st.DependsOn = nil
	}
	if _, err := runPipeline(ctx, t, d, spec, sparkWH, remote, "late-local"); err != nil {
		t.Fatal(err)
	}
	full := loadExample(t, file, sparkWH, pipelines.EngineLocal)
	want, got := facts(ctx, t, full, localWH), facts(ctx, t, full, sparkWH)
	for _, name := range []string{"dim.customer", "current.customer"} {
		if w, g := want[name].rows, got[name].rows; strings.Join(w, "\n") != strings.Join(g, "\n") {
			t.Errorf("%s after the local merge of the late event:\n%s\nwant (all local):\n%s", name, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
	}
}
