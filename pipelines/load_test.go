package pipelines

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func noEnv(string) (string, bool) { return "", false }

// TestInvalidPipelines checks the exact messages a user sees for each broken pipeline in
// testdata/invalid: every problem, with file:line:col, in one go.
func TestInvalidPipelines(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("found %d broken pipelines in testdata/invalid, want at least 15", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			spec, err := Load(file, Options{LookupEnv: noEnv})
			if err == nil {
				t.Fatalf("Load(%s) = %+v, want an error", file, spec)
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Load(%s) error %T %v, want *pipelines.Error", file, err, err)
			}
			for _, p := range perr.Problems {
				if p.Line == 0 && name != "invalid_yaml" {
					t.Errorf("problem without a position: %s", p)
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden file (run go test ./pipelines -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("problems for %s:\ngot:\n%s\nwant:\n%s", file, got, want)
			}
		})
	}
}

func TestSeveralProblemsReportedTogether(t *testing.T) {
	_, err := Load("testdata/invalid/several_problems.yaml", Options{LookupEnv: noEnv})
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("got %v, want *Error", err)
	}
	if len(perr.Problems) < 8 {
		t.Errorf("got %d problems, want at least 8 reported together:\n%v", len(perr.Problems), err)
	}
	for i := 1; i < len(perr.Problems); i++ {
		if perr.Problems[i].Line < perr.Problems[i-1].Line {
			t.Errorf("problems not sorted by line: %v before %v", perr.Problems[i-1], perr.Problems[i])
		}
	}
}

func TestLoadExample(t *testing.T) {
	spec, err := Load("../examples/pipelines/sales/pipeline.yaml", Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatalf("example pipeline does not validate:\n%v", err)
	}
	if spec.Name != "sales" {
		t.Errorf("Name = %q, want sales", spec.Name)
	}
	if spec.Location.String() != "Europe/Berlin" {
		t.Errorf("Location = %v, want Europe/Berlin", spec.Location)
	}
	if want := filepath.Join(spec.Dir, "warehouse"); spec.Warehouse != want {
		t.Errorf("Warehouse = %q, want %q (relative to the pipeline file)", spec.Warehouse, want)
	}
	var names []string
	for _, st := range spec.Stages {
		names = append(names, st.Name)
	}
	if got, want := strings.Join(names, ","), "ingest_sales,capture_sales_history,ingest_customers,merge_customers,vacuum"; got != want {
		t.Errorf("stages = %s, want %s", got, want)
	}
	bronze := spec.Table("bronze.sales_transactions")
	if bronze == nil || !bronze.ChangeDataFeed() || bronze.Path != "bronze/sales_transactions" {
		t.Fatalf("bronze table = %+v, want CDF on at bronze/sales_transactions", bronze)
	}
	if got := bronze.Properties["delta.logRetentionDuration"]; got != "interval 90 days" {
		t.Errorf("logRetentionDuration = %q", got)
	}
	if f := bronze.Schema.Field("amount"); f == nil || f.Type.String() != "decimal(10,2)" {
		t.Errorf("amount column = %+v, want decimal(10,2)", f)
	}
	dim := spec.Table("sales.customer")
	sk := dim.Schema.Field("customer_sk")
	if sk == nil || sk.Metadata["delta.identity.start"] != int64(1) || sk.Nullable {
		t.Errorf("customer_sk = %+v, want a non-null identity column starting at 1", sk)
	}
	ingest := spec.Stage("ingest_sales")
	if ingest.Retries != 2 || ingest.Timeout != 10*time.Minute {
		t.Errorf("ingest retries/timeout = %d/%v, want 2/10m", ingest.Retries, ingest.Timeout)
	}
	cfg, ok := ingest.Config.(*jobs.IngestConfig)
	if !ok || cfg.Mode != "upsert" || cfg.Keys[0] != "transaction_id" {
		t.Errorf("ingest config = %+v", ingest.Config)
	}
	merge := spec.Stage("merge_customers").Config.(*jobs.SCD2Config)
	if merge.Columns.SurrogateKey != "customer_sk" || merge.Deletes != "close" || !merge.SourceChanges {
		t.Errorf("merge config = %+v", merge)
	}
}

func TestEnvExpansion(t *testing.T) {
	src := `pipeline: p
warehouse: s3://${BUCKET}/${PREFIX:-wh}
storage:
  endpoint: ${S3_HOST}
  secret_access_key: ${SECRET}
tables:
  raw.t:
    columns: [{name: id, type: string}]
stages:
  - {name: v, kind: vacuum, tables: [raw.t], retries: "${RETRIES}"}
`
	env := map[string]string{"BUCKET": "lake", "S3_HOST": "127.0.0.1:9000", "SECRET": "s3cr3t", "RETRIES": "3"}
	spec, err := Parse("env.yaml", []byte(src), Options{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Warehouse != "s3://lake/wh" {
		t.Errorf("Warehouse = %q, want s3://lake/wh", spec.Warehouse)
	}
	if spec.Storage.Endpoint != "127.0.0.1:9000" || spec.Storage.SecretAccessKey != "s3cr3t" {
		t.Errorf("Storage = %+v", spec.Storage)
	}
	if spec.Stages[0].Retries != 3 {
		t.Errorf("Retries = %d, want 3", spec.Stages[0].Retries)
	}
}

// memory_budget takes a size with a unit (or plain bytes) on the stages that hold a
// batch by key.
func TestMemoryBudgetKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	yaml := `pipeline: p
tables:
  raw.t:
    columns:
      - {name: id, type: string}
      - {name: city, type: string}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
  cur.t:
    columns:
      - {name: id, type: string}
      - {name: city, type: string}
stages:
  - {name: load, kind: ingest, source: landing/*.csv, target: raw.t, mode: upsert, keys: [id], memory_budget: 512MiB}
  - {name: merge, kind: scd1_merge, source: raw.t, target: cur.t, keys: [id], memory_budget: 1048576, depends_on: [load]}
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := Load(file, Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	got := []jobs.ByteSize{spec.Stages[0].Config.(*jobs.IngestConfig).MemoryBudget, spec.Stages[1].Config.(*jobs.SCD1Config).MemoryBudget}
	if want := []jobs.ByteSize{512 << 20, 1 << 20}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("memory_budget = %v, want %v", got, want)
	}
}

// cluster_by declares a new table's clustering columns.
func TestClusterByDeclared(t *testing.T) {
	src := "pipeline: p\ntables:\n  raw.t:\n    columns:\n      - {name: id, type: string}\n      - {name: n, type: long}\n    cluster_by: [n, id]\nstages:\n  - name: v\n    kind: vacuum\n    tables: [raw.t]\n"
	spec, err := Parse("p.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Tables[0].ClusterBy; !slices.Equal(got, []string{"n", "id"}) {
		t.Errorf("ClusterBy = %v, want [n id]", got)
	}
}

// A merge key that its source declares nullable is valid but warned about, at the key,
// unless the stage has a where.
func TestNullableMergeKeyWarns(t *testing.T) {
	src := `pipeline: p
tables:
  bronze.events:
    columns:
      - {name: customer_id, type: string}
      - {name: city, type: string}
    properties: {delta.enableChangeDataFeed: true}
  current.customer:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
stages:
  - name: merge
    kind: scd1_merge
    source: bronze.events
    source_changes: true
    target: current.customer
    keys: [customer_id]
`
	spec, err := Parse("p.yaml", []byte(src), Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Warnings) != 1 || spec.Warnings[0].Line != 18 || !strings.Contains(spec.Warnings[0].Msg, "key customer_id is nullable in source bronze.events") {
		t.Fatalf("warnings %v, want one at line 18 naming the nullable key", spec.Warnings)
	}
	spec, err = Parse("p.yaml", []byte(src+"    where: customer_id IS NOT NULL\n"), Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Warnings) != 0 {
		t.Fatalf("with where: warnings %v, want none", spec.Warnings)
	}
}

// An scd2_merge ordering by a business time a table that snapshot loads date at the
// load's wall-clock time is warned about, at its sequence_by; dated snapshots are not.
func TestUndatedSnapshotSourceWarns(t *testing.T) {
	src := `pipeline: p
tables:
  staging.customers:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: as_of, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties: {delta.enableChangeDataFeed: true}
  dim.customer:
    columns:
      - {name: customer_id, type: string, nullable: false}
      - {name: city, type: string}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
stages:
  - name: merge
    kind: scd2_merge
    source: staging.customers
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city]
    sequence_by: as_of
    depends_on: [load]
  - name: load
    kind: ingest
    source: extracts/*.csv
    target: staging.customers
    mode: snapshot
    keys: [customer_id]
`
	spec, err := Parse("p.yaml", []byte(src), Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Warnings) != 1 || spec.Warnings[0].Line != 26 || !strings.Contains(spec.Warnings[0].Msg, "stage load loads staging.customers as snapshots with no time of their own") {
		t.Fatalf("warnings %v, want one at line 26 naming the snapshot stage", spec.Warnings)
	}
	for _, dated := range []string{"    snapshot_time: file_name\n", "    sequence_by: as_of\n"} {
		spec, err = Parse("p.yaml", []byte(src+dated), Options{LookupEnv: noEnv})
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Warnings) != 0 {
			t.Fatalf("with %q: warnings %v, want none", dated, spec.Warnings)
		}
	}
}

// ${VAR} set to the empty string is the empty string, as in the shell (${VAR:-d} takes
// d); only an unset one is a problem. A load for the tables only leaves an unset
// variable in a stage value as written.
func TestEnvEmptyAndTablesOnly(t *testing.T) {
	src := `pipeline: p
warehouse: ./wh${SUFFIX}
tables:
  raw.t: {columns: [{name: id, type: string}, {name: source_file, type: string}, {name: load_timestamp, type: timestamp}]}
stages:
  - {name: load, kind: ingest, source: "${LANDING}/*.csv", target: raw.t}
`
	env := func(vars map[string]string) Options {
		return Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	}
	spec, err := Parse("/p/p.yaml", []byte(src), env(map[string]string{"SUFFIX": "", "LANDING": "landing"}))
	if err != nil {
		t.Fatalf("SUFFIX set to the empty string: %v", err)
	}
	if !strings.HasSuffix(spec.Warehouse, "/p/wh") {
		t.Errorf("warehouse %q, want /p/wh", spec.Warehouse)
	}
	if _, err := Parse("/p/p.yaml", []byte(src), env(map[string]string{"SUFFIX": ""})); err == nil || !strings.Contains(err.Error(), "LANDING is not set") {
		t.Fatalf("LANDING unset: %v, want it named", err)
	}
	opts := env(map[string]string{"SUFFIX": ""})
	opts.TablesOnly = true
	spec, err = Parse("/p/p.yaml", []byte(src), opts)
	if err != nil {
		t.Fatalf("tables only, LANDING unset in a stage value: %v", err)
	}
	if spec.Table("raw.t") == nil {
		t.Fatal("no table raw.t")
	}
	if _, err := Parse("/p/p.yaml", []byte(src), Options{TablesOnly: true, LookupEnv: func(string) (string, bool) { return "", false }}); err == nil || !strings.Contains(err.Error(), "SUFFIX is not set") {
		t.Fatalf("tables only, SUFFIX (the warehouse's) unset: %v, want it named", err)
	}
}
