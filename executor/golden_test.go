package executor_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/dag"
	"github.com/orchestrator-io/orchestrator/executor"
	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

var (
	txnMtimeJSON = regexp.MustCompile(`"TxnVersion": [0-9]+`)
	txnMtimeSQL  = regexp.MustCompile(`(-- txn ingest:\S+) = [0-9]+`)
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden from what the code generates")

// golden compares got with the file testdata/golden/name (rewriting it with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test ./executor -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from what the code generates (after a deliberate change: go test ./executor -run %s -update, and review the diff)\n--- want\n%s\n--- got\n%s", file, t.Name(), want, got)
	}
}

// TestSparkSQLGolden: the Delta SQL the Spark engine generates for every stage of the
// examples, one golden file per stage (every stage kind among them: ingest appending,
// upserting and loading snapshots, capture_history, scd2_merge from snapshots and from
// a change feed, scd1_merge, vacuum), and each stage's plan as JSON. The stages run on
// the local engine in between, so each plan sees the tables its predecessors wrote.
// Paths show as /warehouse and /examples; commit times are pinned (pinCommitTimes).
func TestSparkSQLGolden(t *testing.T) {
	for _, name := range []string{"sales", "cdc-events", "history-vacuum", "scd2-snapshot", "daily-snapshot", "ingest-quarantine"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			wh := t.TempDir()
			spec := loadExample(t, examplePath(name), wh, pipelines.EngineLocal)
			examples, err := filepath.Abs(filepath.Join("..", "examples", "pipelines"))
			if err != nil {
				t.Fatal(err)
			}
			paths := strings.NewReplacer(wh, "/warehouse", examples, "/examples").Replace
			// An ingested file's txn version is its modification time, which a clone
			// sets to when it was made: shown as <mtime>.
			clean := func(s string) string {
				s = txnMtimeJSON.ReplaceAllString(paths(s), `"TxnVersion": "<mtime>"`)
				return txnMtimeSQL.ReplaceAllString(s, "$1 = <mtime>")
			}
			warehouse, err := fs.New(fs.Config{Dir: wh})
			if err != nil {
				t.Fatal(err)
			}
			defer warehouse.Close()
			d := executor.NewDispatcher(0)
			defer d.Close()
			g, err := pipelineGraph(spec, warehouse, "golden", func(ctx context.Context, r pipelines.StageRun) (jobs.Result, error) {
				pinCommitTimes(t, wh)
				if pl, ok := r.Stage.Job.(jobs.Planner); ok {
					p, err := pl.Plan(ctx, r.Env)
					if err != nil {
						t.Errorf("plan %s: %v", r.Stage.Name, err)
					} else {
						js, err := json.MarshalIndent(p, "", "  ")
						if err != nil {
							t.Fatalf("plan %s as JSON: %v", r.Stage.Name, err)
						}
						golden(t, filepath.Join(name, r.Stage.Name+".plan.json"), clean(string(js))+"\n")
						sql, err := executor.SparkSQL(p, r.Env, wh)
						if err != nil {
							sql = "-- refused on spark: " + err.Error() + "\n"
						}
						golden(t, filepath.Join(name, r.Stage.Name+".sql"), clean(sql))
					}
				}
				return d.Run(ctx, executor.Task{Key: r.Key(), Stage: r.Stage.Job, Env: r.Env}, executor.Local, nil)
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dag.Run(ctx, g, dag.Options{MaxParallel: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSparkVacuumSQLGolden: the examples' vacuums find nothing to delete on a first run
// (and so send nothing), so the VACUUM statements are shown from plans made here: a
// table with files to delete under a retention shorter than Delta's check allows, one
// kept back for a change feed consumer, one with nothing to delete, and a dry run.
func TestSparkVacuumSQLGolden(t *testing.T) {
	table := func(name string) jobs.PlanTable {
		return jobs.PlanTable{Name: name, Path: strings.ReplaceAll(name, ".", "/")}
	}
	plan := &jobs.Plan{Stage: "vacuum", Kind: jobs.KindVacuum, Writes: []string{"raw.events", "silver.orders", "gold.daily"}, Vacuum: &jobs.VacuumPlan{Tables: []jobs.VacuumTable{
		{Table: table("raw.events"), Retain: 90 * time.Minute, Force: true, KeepFrom: -1, WouldDelete: []string{"part-0001.parquet", "part-0002.parquet"}, Bytes: 2048},
		{Table: table("silver.orders"), Retain: 200*time.Hour + 30*time.Second, KeepFrom: 7, KeepFor: "capture_history orders_history", WouldDelete: []string{"part-0003.parquet"}, Bytes: 512},
		{Table: table("gold.daily"), Retain: 168 * time.Hour, KeepFrom: -1},
	}}}
	sql, err := executor.SparkSQL(plan, &jobs.Env{}, "/warehouse")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "vacuum/retain.sql", sql+"-- notes: "+strings.Join(plan.Result.Notes, " | ")+"\n")
	dry := *plan
	dry.Result = jobs.Result{}
	dry.Vacuum = &jobs.VacuumPlan{Tables: plan.Vacuum.Tables, DryRun: true}
	sql, err = executor.SparkSQL(&dry, &jobs.Env{}, "/warehouse")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "vacuum/dry_run.sql", sql+"-- notes: "+strings.Join(dry.Result.Notes, " | ")+"\n")
}

// pinCommitTimes sets the time of every commit file below wh (which Delta reads as its
// commit time) to the pinned clock plus its version in seconds, so that plans that name
// commit times are the same from run to run.
func pinCommitTimes(t *testing.T, wh string) {
	t.Helper()
	err := filepath.WalkDir(wh, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(path)) != "_delta_log" {
			return err
		}
		var v int64
		if n, _ := fmt.Sscanf(d.Name(), "%020d.json", &v); n != 1 || len(d.Name()) != 25 {
			return nil
		}
		at := clock.Add(time.Duration(v) * time.Second)
		return os.Chtimes(path, at, at)
	})
	if err != nil {
		t.Fatal(err)
	}
}
