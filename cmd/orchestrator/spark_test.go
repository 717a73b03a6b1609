package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// sparkPipeline copies the sales example and puts its stages on Spark (all of them, or
// the SCD2 merge only), with the cluster from ${SPARK_REMOTE}.
func sparkPipeline(t *testing.T, mergeOnly bool) string {
	t.Helper()
	pipeline := copyExample(t)
	b, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	top := "engine: spark\nspark: {remote: \"${SPARK_REMOTE}\"}\n"
	if !mergeOnly {
		// Row checks run in this process only (validate refuses them on Spark): the
		// ingest keeps its table check, loses its row checks and their quarantine. The
		// example's rows violate none that change a table.
		var kept []string
		for _, line := range strings.SplitAfter(s, "\n") {
			if !strings.Contains(line, `expect: "`) && !strings.Contains(line, "quarantine_table:") {
				kept = append(kept, line)
			}
		}
		s = strings.Join(kept, "")
	}
	if mergeOnly {
		top = "spark: {remote: \"${SPARK_REMOTE}\"}\n"
		s = strings.Replace(s, "    kind: scd2_merge\n", "    kind: scd2_merge\n    engine: spark\n", 1)
	}
	s = strings.Replace(s, "\ntables:\n", "\n"+top+"\ntables:\n", 1)
	if err := os.WriteFile(pipeline, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return pipeline
}

// tableView is what a user sees of the sales tables: rows, the dimension's change feed
// and every table's history operations, with values that differ between two copies of
// the example (load times, commit times, paths, surrogate keys) left out.
func tableView(t *testing.T, pipeline string) map[string][]string {
	t.Helper()
	shows := map[string]string{
		"bronze.sales_transactions":        "transaction_id,customer_id,product,quantity,amount,sold_at",
		"audit.sales_transactions_history": "transaction_id,amount,_change_type,_commit_version",
		"staging.customers":                "customer_id,name,email,city,updated_at",
		"sales.customer":                   "customer_id,name,email,city,valid_from,valid_to,is_current",
	}
	out := map[string][]string{}
	for table, cols := range shows {
		add := func(kind string, r result) {
			if r.code != 0 {
				t.Fatalf("%s %s: exit %d\n%s", kind, table, r.code, r.stderr)
			}
			var rows []string
			for _, row := range csvRows(t, r) {
				rows = append(rows, strings.Join(row, ","))
			}
			if kind != "history" {
				slices.Sort(rows)
			}
			out[table+" "+kind] = rows
		}
		add("rows", runCLI(t, "table", "show", table, "--pipeline", pipeline, "--columns", cols, "--format", "csv"))
		hist := runCLI(t, "table", "history", table, "--pipeline", pipeline, "--format", "json")
		var ops []string
		for _, line := range strings.Split(strings.TrimSpace(hist.stdout), "\n") {
			var h struct {
				Version   int64  `json:"version"`
				Operation string `json:"operation"`
			}
			if err := json.Unmarshal([]byte(line), &h); err != nil {
				t.Fatalf("history of %s: %v in %q", table, err, line)
			}
			ops = append(ops, h.Operation)
		}
		out[table+" history"] = ops
	}
	r := runCLI(t, "table", "changes", "sales.customer", "--pipeline", pipeline, "--from", "0",
		"--columns", "customer_id,city,valid_to,is_current,_change_type,_commit_version", "--format", "csv")
	if r.code != 0 {
		t.Fatalf("changes: %s", r.stderr)
	}
	var rows []string
	for _, row := range csvRows(t, r) {
		rows = append(rows, strings.Join(row[:6], ",")) // not _commit_timestamp
	}
	slices.Sort(rows)
	out["sales.customer changes"] = rows
	return out
}

func sameView(t *testing.T, want, got map[string][]string, what string) {
	t.Helper()
	for k, w := range want {
		if g := got[k]; !slices.Equal(w, g) {
			t.Errorf("%s: %s differ:\nlocal:\n  %s\n%s:\n  %s", what, k, strings.Join(w, "\n  "), what, strings.Join(g, "\n  "))
		}
	}
}

// The sales example on Spark through the binary, killed (SIGKILL) while its SCD2 merge
// runs on the cluster, then run again: the tables equal those of a local run, the rerun
// having interrupted the orphaned statement (named in the dimension's lease) before it
// merged again; a third run commits nothing. The record of the Spark stage names its
// SQL, operation id and Delta's metrics.
func TestSparkRunKilledMidStage(t *testing.T) {
	remote := testenv.SparkRemote(t)
	bin := buildBinary(t)
	unsetEnv(t, "ORCH_WAREHOUSE")
	t.Setenv("SPARK_REMOTE", remote) // for the CLI commands run in this process
	env := []string{"ORCH_WAREHOUSE=", "SPARK_REMOTE=" + remote}

	local := copyExample(t)
	if r := runCmdEnv(t, filepath.Dir(local), env, bin, "run", local); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}

	pipeline := sparkPipeline(t, false)
	dir := filepath.Dir(pipeline)
	leases := filepath.Join(dir, "warehouse", "_orchestrator", "table-leases", "sales", "customer")
	cmd := exec.Command(bin, "run", pipeline)
	cmd.Dir, cmd.Env = dir, commandEnv(env)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	deadline := time.After(5 * time.Minute)
	for !killed {
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) before its SCD2 merge was seen running on Spark", err)
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the SCD2 merge never ran on Spark within 5 minutes")
		case <-time.After(20 * time.Millisecond):
		}
		files, _ := filepath.Glob(filepath.Join(leases, "*.json"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && strings.Contains(string(b), `"spark_operation":"`) && strings.Contains(string(b), "merge_customers") {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
	}
	<-exited

	r := runCmdEnv(t, dir, env, bin, "run", pipeline)
	if r.code != 0 {
		t.Fatalf("rerun after the kill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rerun := lastRecord(t, pipeline)
	if notes := strings.Join(rerun.stage("merge_customers").Notes, "\n"); !strings.Contains(notes, "took over the lease of sales/customer") || !strings.Contains(notes, "was interrupted first") {
		t.Errorf("the rerun's merge_customers notes do not say it took over the killed run's lease and interrupted its Spark operation:\n%s", notes)
	}
	sameView(t, tableView(t, local), tableView(t, pipeline), "spark, killed and rerun")

	r = runCmdEnv(t, dir, env, bin, "run", pipeline)
	if r.code != 0 {
		t.Fatalf("third run: exit %d\n%s", r.code, r.stderr)
	}
	rec := lastRecord(t, pipeline)
	if ops := rerun.stage("merge_customers").Operations; len(ops) == 0 || !strings.HasPrefix(ops[len(ops)-1].SQL, "WITH raw AS") || ops[len(ops)-1].OperationID == "" || ops[len(ops)-1].Metrics["numTargetRowsInserted"] == "" {
		t.Errorf("the rerun's record of merge_customers does not show the MERGE with its operation id and metrics: %+v", ops)
	}
	for _, s := range rec.Stages {
		if len(s.VersionsWritten) > 0 {
			t.Errorf("third run: stage %s committed %v, want nothing", s.Name, s.VersionsWritten)
		}
		if s.Engine != "spark" {
			t.Errorf("stage %s ran on %q, want spark", s.Name, s.Engine)
		}
	}
}

type sparkStageView struct {
	Name            string   `json:"name"`
	Engine          string   `json:"engine"`
	Notes           []string `json:"notes"`
	VersionsWritten []any    `json:"versions_written"`
	Operations      []struct {
		SQL         string            `json:"sql"`
		OperationID string            `json:"operation_id"`
		Metrics     map[string]string `json:"metrics"`
	} `json:"operations"`
}

type sparkRecordView struct{ Stages []sparkStageView }

func (r sparkRecordView) stage(name string) sparkStageView {
	for _, s := range r.Stages {
		if s.Name == name {
			return s
		}
	}
	return sparkStageView{}
}

// lastRecord is the newest run record of the pipeline.
func lastRecord(t *testing.T, pipeline string) sparkRecordView {
	t.Helper()
	runs := runCLI(t, "runs", "list", "--pipeline", pipeline, "--limit", "1", "--format", "json")
	var entry struct {
		ID string `json:"run"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(runs.stdout, "\n", 2)[0]), &entry); err != nil {
		t.Fatalf("runs list: %v\n%s", err, runs.stdout)
	}
	show := runCLI(t, "runs", "show", "--pipeline", pipeline, "--format", "json", entry.ID)
	var rec sparkRecordView
	if err := json.Unmarshal([]byte(show.stdout), &rec); err != nil {
		t.Fatalf("runs show %s: %v\n%s%s", entry.ID, err, show.stdout, show.stderr)
	}
	return rec
}
