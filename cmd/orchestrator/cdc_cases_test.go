package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Change streams as a new user writes them, through the binary: an op column marks
// deletes (delete_when), several events per key, late events, one file per run.

// cdcPipelineYAML declares a bronze table of customer events (with its op column), a
// type 2 dimension and an scd1 table; stages holds the stages.
const cdcPipelineYAML = `pipeline: cdc
warehouse: ./warehouse
tables:
  bronze.events:
    columns:
      - {name: customer_id, type: string}
      - {name: city, type: string}
      - {name: op, type: string}
      - {name: updated_at, type: timestamp}
      - {name: source_file, type: string}
      - {name: load_timestamp, type: timestamp}
    properties:
      delta.enableChangeDataFeed: true
%s  dim.customer:
    columns:
      - {name: customer_sk, type: bigint, identity: {start: 1, step: 1}}
      - {name: customer_id, type: string}
      - {name: city, type: string}
      - {name: valid_from, type: timestamp}
      - {name: valid_to, type: timestamp}
      - {name: is_current, type: boolean}
stages:
`

const cdcMergeStage = `  - name: load
    kind: ingest
    source: landing/*.csv
    target: bronze.events
  - name: merge
    kind: scd2_merge
    depends_on: [load]
    source: bronze.events
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city]
    sequence_by: updated_at
    deletes: close
    columns: {surrogate_key: customer_sk}
`

// cdcMergeDeletes is cdcMergeStage with deletes marked by the op column.
const cdcMergeDeletes = cdcMergeStage + "    delete_when: \"op = 'D'\"\n"

// cdcDir writes a pipeline with the given stages to a new directory.
func cdcDir(t *testing.T, stages string) (dir, pipeline string) {
	return cdcDirWith(t, "", stages)
}

// shortLog makes the bronze table checkpoint at every commit and keep its log for a
// day; ageLog then makes its log files three days old, so the next commit cleans up
// the log before it: the change feed history is gone, as after weeks of operation.
const shortLog = "      delta.checkpointInterval: 1\n      delta.logRetentionDuration: interval 1 day\n"

func ageLog(t *testing.T, dir, table string) {
	t.Helper()
	logDir := filepath.Join(dir, "warehouse", table, "_delta_log")
	entries, err := os.ReadDir(logDir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-72 * time.Hour)
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(logDir, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// cdcDirWith is cdcDir with more bronze table properties (YAML lines).
func cdcDirWith(t *testing.T, bronzeProps, stages string) (dir, pipeline string) {
	t.Helper()
	dir = t.TempDir()
	pipeline = filepath.Join(dir, "pipeline.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "landing"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pipeline, []byte(fmt.Sprintf(cdcPipelineYAML, bronzeProps)+stages), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, pipeline
}

func landFile(t *testing.T, dir, name string, lines ...string) {
	t.Helper()
	body := "customer_id,city,op,updated_at\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "landing", name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	r := runCmdEnv(t, dir, nil, bin, args...)
	if r.code != 0 {
		t.Fatalf("orchestrator %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func dimension(t *testing.T, bin, dir, pipeline string) string {
	return mustRun(t, bin, dir, "table", "show", "--pipeline", pipeline, "dim.customer", "--columns", "customer_id,city,valid_from,valid_to,is_current", "--order-by", "valid_from", "--format", "csv")
}

func TestCDCCasesThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)

	// scd2_merge takes delete_when; a delete closes the row at its own sequence, not at
	// the wall clock, and the key's return later is current.
	t.Run("delete_when on scd2_merge, one file per run", func(t *testing.T) {
		dir, p := cdcDir(t, cdcMergeDeletes)
		mustRun(t, bin, dir, "validate", p)
		landFile(t, dir, "1.csv", "C1,Seattle,U,2026-01-14T01:00:00Z")
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "2.csv", "C1,,D,2026-01-14T02:00:00Z")
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "3.csv", "C1,Portland,U,2026-01-14T03:00:00Z")
		mustRun(t, bin, dir, "run", p)
		want := "customer_id,city,valid_from,valid_to,is_current\n" +
			"C1,Seattle,2026-01-14T01:00:00Z,2026-01-14T02:00:00Z,false\n" +
			"C1,Portland,2026-01-14T03:00:00Z,9999-12-31T00:00:00Z,true\n"
		if got := dimension(t, bin, dir, p); got != want {
			t.Fatalf("dimension:\n%s\nwant:\n%s", got, want)
		}
	})

	// An upsert bronze table (delete_when deletes its rows) merged from its change feed:
	// the delete carries no time of its own, and it is placed before the key's return
	// (a later commit), never at the wall clock after it.
	t.Run("deletes in the change feed with sequence_by", func(t *testing.T) {
		dir, p := cdcDir(t, `  - name: load
    kind: ingest
    source: landing/*.csv
    target: bronze.events
    mode: upsert
    keys: [customer_id]
    sequence_by: updated_at
    delete_when: "op = 'D'"
  - name: merge
    kind: scd2_merge
    depends_on: [load]
    source: bronze.events
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city]
    sequence_by: updated_at
    deletes: close
    columns: {surrogate_key: customer_sk}
`)
		for i, line := range []string{"C1,Seattle,U,2026-01-14T01:00:00Z", "C1,,D,2026-01-14T02:00:00Z", "C1,Portland,U,2026-01-14T03:00:00Z"} {
			landFile(t, dir, fmt.Sprintf("%d.csv", i+1), line)
			mustRun(t, bin, dir, "run", p)
		}
		want := "customer_id,city,valid_from,valid_to,is_current\n" +
			"C1,Seattle,2026-01-14T01:00:00Z,2026-01-14T03:00:00Z,false\n" +
			"C1,Portland,2026-01-14T03:00:00Z,9999-12-31T00:00:00Z,true\n"
		if got := dimension(t, bin, dir, p); got != want {
			t.Fatalf("dimension:\n%s\nwant:\n%s", got, want)
		}
	})

	// An upsert ingest whose target declares op too: delete_when means the source row.
	t.Run("upsert delete_when on a declared column", func(t *testing.T) {
		dir, p := cdcDir(t, `  - name: load
    kind: ingest
    source: landing/*.csv
    target: bronze.events
    mode: upsert
    keys: [customer_id]
    delete_when: "op = 'D'"
`)
		landFile(t, dir, "1.csv", "C1,Seattle,U,2026-01-14T01:00:00Z", "C2,Leeds,U,2026-01-14T01:00:00Z")
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "2.csv", "C1,,D,2026-01-14T02:00:00Z")
		mustRun(t, bin, dir, "run", p)
		got := mustRun(t, bin, dir, "table", "show", "--pipeline", p, "bronze.events", "--columns", "customer_id,city", "--format", "csv")
		if want := "customer_id,city\nC2,Leeds\n"; got != want {
			t.Fatalf("bronze:\n%s\nwant:\n%s", got, want)
		}
	})

	// Several rows of one key in one upsert file: an error naming the file, the lines
	// and the key without sequence_by (nothing written); folded with it.
	t.Run("upsert with several rows per key", func(t *testing.T) {
		stage := `  - name: load
    kind: ingest
    source: landing/*.csv
    target: bronze.events
    mode: upsert
    keys: [customer_id]
`
		dir, p := cdcDir(t, stage)
		landFile(t, dir, "1.csv", "C1,Seattle,U,2026-01-14T01:00:00Z", "C2,Leeds,U,2026-01-14T01:00:00Z", "C1,Tacoma,U,2026-01-14T02:00:00Z")
		r := runCmdEnv(t, dir, nil, bin, "run", p)
		if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "landing/1.csv: key C1 is on lines 2 and 4") {
			t.Fatalf("exit %d, want 1 with the file, lines and key:\n%s%s", r.code, r.stdout, r.stderr)
		}
		dir, p = cdcDir(t, stage+"    sequence_by: updated_at\n")
		landFile(t, dir, "1.csv", "C1,Tacoma,U,2026-01-14T02:00:00Z", "C2,Leeds,U,2026-01-14T01:00:00Z", "C1,Seattle,U,2026-01-14T01:00:00Z")
		mustRun(t, bin, dir, "run", p)
		got := mustRun(t, bin, dir, "table", "show", "--pipeline", p, "bronze.events", "--columns", "customer_id,city", "--order-by", "customer_id", "--format", "csv")
		if want := "customer_id,city\nC1,Tacoma\nC2,Leeds\n"; got != want {
			t.Fatalf("bronze:\n%s\nwant:\n%s", got, want)
		}
	})

	// The same key and sequence with other values: refused alike in one batch and
	// across two, naming the key and the sequence as a timestamp.
	t.Run("same key and sequence", func(t *testing.T) {
		want := "key C1 has two different upserts at the same sequence value 2026-01-14T01:00:00Z"
		dir, p := cdcDir(t, cdcMergeStage)
		landFile(t, dir, "1.csv", "C1,Seattle,U,2026-01-14T01:00:00Z", "C1,Tacoma,U,2026-01-14T01:00:00Z")
		if r := runCmdEnv(t, dir, nil, bin, "run", p); r.code != 1 || !strings.Contains(r.stdout+r.stderr, want) {
			t.Fatalf("one batch: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		dir, p = cdcDir(t, cdcMergeStage)
		landFile(t, dir, "1.csv", "C1,Seattle,U,2026-01-14T01:00:00Z")
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "2.csv", "C1,Tacoma,U,2026-01-14T01:00:00Z")
		if r := runCmdEnv(t, dir, nil, bin, "run", p); r.code != 1 || !strings.Contains(r.stdout+r.stderr, want) {
			t.Fatalf("two batches: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	// A late event between two no-op confirmations, in a later run, after the source's
	// change feed history is gone (its log is cleaned up at every commit): placed exactly.
	t.Run("late event between confirmations", func(t *testing.T) {
		dir, p := cdcDirWith(t, shortLog, cdcMergeStage)
		landFile(t, dir, "1.csv", "C1,Seattle,U,2026-01-14T01:00:00Z")
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "2.csv", "C1,Seattle,U,2026-01-14T03:00:00Z")
		mustRun(t, bin, dir, "run", p)
		landFile(t, dir, "3.csv", "C1,Seattle,U,2026-01-14T05:00:00Z")
		mustRun(t, bin, dir, "run", p)
		ageLog(t, dir, "bronze/events")
		landFile(t, dir, "4.csv", "C1,Tacoma,U,2026-01-14T02:00:00Z")
		mustRun(t, bin, dir, "run", p)
		if _, err := os.Stat(filepath.Join(dir, "warehouse", "bronze", "events", "_delta_log", "00000000000000000000.json")); !os.IsNotExist(err) {
			t.Fatalf("the bronze log was not cleaned up (stat of version 0: %v)", err)
		}
		want := "customer_id,city,valid_from,valid_to,is_current\n" +
			"C1,Seattle,2026-01-14T01:00:00Z,2026-01-14T02:00:00Z,false\n" +
			"C1,Tacoma,2026-01-14T02:00:00Z,2026-01-14T03:00:00Z,false\n" +
			"C1,Seattle,2026-01-14T03:00:00Z,9999-12-31T00:00:00Z,true\n"
		if got := dimension(t, bin, dir, p); got != want {
			t.Fatalf("dimension:\n%s\nwant:\n%s", got, want)
		}
	})
}
