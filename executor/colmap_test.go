package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// The sales example with column mapping (name) on every table: its stages on Spark,
// whose SQL names columns by their logical names while Spark writes them under physical
// names, give the tables the local engine gives (rows, change feed, history), and the
// files Spark wrote name their columns physically, as the table's mapping says.
func TestColumnMappedTablesOnSparkEqualLocal(t *testing.T) {
	remote := testenv.SparkRemote(t)
	ctx := context.Background()
	d := executor.NewDispatcher(0)
	defer d.Close()
	file := examplePath("sales")
	mapped := func(spec *pipelines.Spec) *pipelines.Spec {
		for _, tbl := range spec.Tables {
			tbl.Properties["delta.columnMapping.mode"] = "name"
		}
		return spec
	}
	localWH, sparkWH := t.TempDir(), t.TempDir()
	if _, err := runPipeline(ctx, t, d, mapped(loadExample(t, file, localWH, pipelines.EngineLocal)), localWH, remote, "local"); err != nil {
		t.Fatalf("local run: %v", err)
	}
	spec := mapped(loadExample(t, file, sparkWH, pipelines.EngineSpark))
	res, err := runPipeline(ctx, t, d, spec, sparkWH, remote, "spark")
	if err != nil {
		t.Fatalf("spark run: %v", err)
	}
	sparkOps := 0
	for _, r := range res.results {
		sparkOps += len(r.Operations)
	}
	if sparkOps == 0 {
		t.Fatal("no statement was sent to Spark")
	}
	sameFacts(t, facts(ctx, t, spec, localWH), facts(ctx, t, spec, sparkWH), "sales with column mapping on spark")

	store, err := fs.New(fs.Config{Dir: sparkWH})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	checked := 0
	for _, decl := range spec.Tables {
		tbl, err := delta.Open(ctx, store, decl.Path, delta.Options{})
		if err != nil {
			continue
		}
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Properties()["delta.columnMapping.mode"]; got != "name" {
			t.Errorf("table %s: column mapping mode %q, want name", decl.Name, got)
		}
		hist, err := tbl.History(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		bySpark := false
		for _, h := range hist {
			bySpark = bySpark || strings.Contains(h.EngineInfo, "Apache-Spark")
		}
		if bySpark {
			checked++
			for _, f := range snap.Schema().Fields {
				if p, _ := f.Metadata["delta.columnMapping.physicalName"].(string); !strings.HasPrefix(p, "col-") {
					t.Errorf("table %s column %s: physical name %q, want Spark's col-<uuid> (the table was created mapped)", decl.Name, f.Name, p)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("Spark committed to no table")
	}
}
