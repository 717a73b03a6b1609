package pipelines

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// TestExamplesRunTwice runs every example pipeline on a fresh local warehouse, then again:
// the first run succeeds and commits, the second finds nothing to do and commits nothing.
func TestExamplesRunTwice(t *testing.T) {
	files, _ := filepath.Glob("../examples/pipelines/*/pipeline.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d example pipelines, want the sales scenario and one per stage kind", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(filepath.Dir(file)), func(t *testing.T) {
			ctx := context.Background()
			wh := t.TempDir()
			spec, err := Load(file, Options{LookupEnv: func(k string) (string, bool) {
				if k == "ORCH_WAREHOUSE" {
					return wh, true
				}
				return "", false
			}})
			if err != nil {
				t.Fatal(err)
			}
			warehouse, err := fs.New(fs.Config{Dir: wh})
			if err != nil {
				t.Fatal(err)
			}
			defer warehouse.Close()
			open := func(ctx context.Context, loc string) (objectstore.Store, string, error) {
				st, err := fs.New(fs.Config{Dir: loc})
				return st, "", err
			}
			run := func() (written int) {
				var mu sync.Mutex
				g, err := LocalGraph(spec, LocalRuntime{
					Warehouse:    warehouse,
					OpenLocation: open,
					Delta:        delta.Options{UserName: "example"},
					RunID:        "test",
					Done: func(stage string, attempt int, res jobs.Result, err error) {
						mu.Lock()
						defer mu.Unlock()
						written += len(res.VersionsWritten)
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := dag.Run(ctx, g, dag.Options{}); err != nil {
					t.Fatal(err)
				}
				return written
			}
			if n := run(); n == 0 {
				t.Fatal("first run committed nothing")
			}
			if n := run(); n != 0 {
				t.Errorf("second run committed %d versions, want none", n)
			}
			if _, err := os.Stat(filepath.Join(wh, spec.Tables[0].Path, "_delta_log")); err != nil {
				t.Errorf("table %s was not created: %v", spec.Tables[0].Name, err)
			}
		})
	}
}
