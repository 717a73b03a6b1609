package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/objectstore/fs"
)

// Another tool changed the sales example's tables behind the pipeline's back: Spark
// raised a retention to 180 days where the pipeline says 90; and the pipeline now
// declares the dimension's valid_from nullable where the table has it NOT NULL.
// validate --check-tables prints the safe change as the plan a run carries out and
// names the difference with the command or declaration that converges it; a run refuses
// the tables and commits nothing; once the property converged, the run relaxes the
// column in one metadata-only commit and goes on.
func TestDeclaredTablesMustMatch(t *testing.T) {
	unsetEnv(t, "ORCH_WAREHOUSE")
	pipeline := copyExample(t)
	original, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	const nullableValidFrom = "{name: valid_from, type: timestamp}"
	const notNullValidFrom = "{name: valid_from, type: timestamp, nullable: false}"
	declare := func(validFrom string) {
		t.Helper()
		yaml := strings.Replace(string(original), nullableValidFrom, validFrom, 1)
		if yaml == string(original) && validFrom != nullableValidFrom {
			t.Fatal("the example no longer declares " + nullableValidFrom)
		}
		if err := os.WriteFile(pipeline, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	declare(notNullValidFrom)
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// What Spark's ALTER TABLE ... SET TBLPROPERTIES would do.
	if r := runCLI(t, "table", "properties", "--pipeline", pipeline, "bronze.sales_transactions",
		"--set", "delta.logRetentionDuration=interval 180 days"); r.code != 0 {
		t.Fatalf("set properties: exit %d\n%s", r.code, r.stderr)
	}
	declare(nullableValidFrom)

	r := runCLI(t, "validate", "--check-tables", pipeline)
	want := []string{
		pipeline + `: table bronze.sales_transactions: property delta.logRetentionDuration is "interval 180 days" in the table, "interval 90 days" in the pipeline; to converge, run orchestrator table properties bronze.sales_transactions --pipeline ` + pipeline + ` --set 'delta.logRetentionDuration=interval 90 days', or declare delta.logRetentionDuration: interval 180 days`,
	}
	plan := pipeline + ": table sales.customer will converge to its declaration in one metadata-only commit:\n  CHANGE COLUMN valid_from (nullable)\n"
	if got := strings.Split(strings.TrimSpace(r.stderr), "\n"); r.code != 1 || r.stdout != plan || !slices.Equal(got, want) {
		t.Fatalf("validate --check-tables: exit %d, stdout %q\nstderr:\n%s\nwant exit 1, the plan on stdout:\n%s\nand on stderr:\n%s", r.code, r.stdout, r.stderr, plan, strings.Join(want, "\n"))
	}

	versions := tableVersions(t, pipeline)
	r = runCLI(t, "run", pipeline)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want[0][len(pipeline)+2:]) {
		t.Fatalf("run on differing tables: exit %d\n%s%s\nwant exit 1 naming the difference", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "ingest_sales           failed            1 ") {
		t.Errorf("ingest_sales was retried on a table that differs (it cannot change by itself):\n%s", r.stdout)
	}
	// The refused table and the one downstream of it are untouched; the dimension, on
	// a branch of its own, converged (one commit: nothing new to merge).
	versions[3]++
	if got := tableVersions(t, pipeline); !slices.Equal(got, versions) {
		t.Fatalf("table versions after the refused run %v, want %v", got, versions)
	}

	// Converge the property as the pipeline says (the run converged the column).
	if r := runCLI(t, "table", "properties", "bronze.sales_transactions", "--pipeline", pipeline,
		"--set", "delta.logRetentionDuration=interval 90 days"); r.code != 0 {
		t.Fatalf("the suggested command: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "run", pipeline); r.code != 0 {
		t.Fatalf("run after converging: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "validate", "--check-tables", pipeline); r.code != 0 || !strings.Contains(r.stdout, "the existing tables match)") {
		t.Fatalf("validate --check-tables after the run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "table", "history", "--pipeline", pipeline, "sales.customer")
	if r.code != 0 || !strings.Contains(r.stdout, "CHANGE COLUMN") {
		t.Fatalf("sales.customer's history has no CHANGE COLUMN commit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// tableVersions is the latest version of each of the example's tables.
func tableVersions(t *testing.T, pipeline string) []int64 {
	t.Helper()
	st, err := fs.New(fs.Config{Dir: filepath.Join(filepath.Dir(pipeline), "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []int64
	for _, root := range []string{"bronze/sales_transactions", "audit/sales_transactions_history", "staging/customers", "sales/customer"} {
		tbl, err := delta.Open(context.Background(), st, root, delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := tbl.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, snap.Version())
	}
	return out
}
