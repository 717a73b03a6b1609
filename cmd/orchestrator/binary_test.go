package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// exampleQuestions are table commands asked of the sales example in the binary tests.
var exampleQuestions = [][]string{
	{"table", "show", "sales.customer"},
	{"table", "show", "bronze.sales_transactions", "--columns", "transaction_id,customer_id,product,quantity,amount,sold_at", "--format", "csv"},
	{"table", "show", "staging.customers", "--version", "1", "--columns", "customer_id,name,email,city,updated_at,source_file", "--format", "json"},
	{"table", "show", "audit.sales_transactions_history", "--columns", "transaction_id,amount,_change_type,_commit_version"},
	{"table", "changes", "staging.customers", "--from", "1", "--columns", "customer_id,city", "--format", "csv"},
	{"table", "properties", "bronze.sales_transactions"},
	// Point-in-time queries of the dimension: one row per customer, before and after
	// C-1 moved from Seattle to Portland.
	{"table", "show", "sales.customer", "--where", pointInTime("2026-01-15 00:00:00"), "--columns", "customer_id,city", "--format", "csv"},
	{"table", "show", "sales.customer", "--where", pointInTime("2026-01-16 00:00:00"), "--columns", "customer_id,city", "--format", "csv"},
}

// pointInTime is the predicate of a point-in-time query of the SCD2 dimension at t.
func pointInTime(t string) string {
	return "valid_from <= TIMESTAMP '" + t + "' AND valid_to > TIMESTAMP '" + t + "'"
}

// pointInTimeAnswers are the customers and cities the point-in-time queries return.
var pointInTimeAnswers = map[string]string{
	pointInTime("2026-01-15 00:00:00"): "customer_id,city\nC-1,Seattle\nC-2,Boston\nC-3,London\n",
	pointInTime("2026-01-16 00:00:00"): "customer_id,city\nC-1,Portland\nC-2,Boston\nC-3,London\n",
}

// withoutTimes drops the _commit_timestamp column (the last) of CSV output; commit
// times differ between two runs of a pipeline.
func withoutTimes(s string) string {
	lines := strings.Split(s, "\n")
	if !strings.HasSuffix(lines[0], ",_commit_timestamp") {
		return s
	}
	for i, l := range lines {
		if j := strings.LastIndexByte(l, ','); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}

// TestExampleBinary runs the sales example with the built binary, three times on local
// disk and three times on MinIO (the reruns change nothing), and checks that the table commands give the same answers as the
// in-process commands and on both stores.
func TestExampleBinary(t *testing.T) {
	bin := buildBinary(t)
	unsetEnv(t, "ORCH_WAREHOUSE")
	pipeline := copyExample(t)
	dir := filepath.Dir(pipeline)

	// The first run loads everything; the two reruns find nothing to do: every stage
	// reads no new rows and commits no version.
	runThrice := func(t *testing.T, env []string) {
		t.Helper()
		for i, want := range []string{"7", "0", "0"} { // rows read by ingest_sales: all, then none
			r := runCmdEnv(t, dir, env, bin, "run", pipeline, "--format", "csv")
			if r.code != 0 {
				t.Fatalf("run %d: exit %d\n%s%s", i+1, r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "\ningest_sales,succeeded,1,") || !strings.Contains(r.stdout, ","+want+","+want+",") {
				t.Errorf("run %d summary:\n%s\nwant ingest_sales succeeded with %s rows in and out", i+1, r.stdout, want)
			}
			if i == 0 {
				continue
			}
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
				if f := strings.Split(line, ","); f[6] != "none" || f[4] != "0" { // versions, rows_in
					t.Errorf("rerun %d: %s\nwant no rows read and no version committed", i, line)
				}
			}
		}
	}

	local := map[string]string{}
	t.Run("local", func(t *testing.T) {
		runThrice(t, nil)
		for _, q := range exampleQuestions {
			args := append(q, "--pipeline", pipeline)
			got := runCmdEnv(t, dir, nil, bin, args...)
			want := runCLI(t, args...)
			if got.code != 0 || got != want {
				t.Errorf("%s: binary exit %d\n%s%s\nin-process exit %d\n%s%s", strings.Join(q, " "), got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
			}
			local[strings.Join(q, " ")] = got.stdout
			if i := slices.Index(q, "--where"); i >= 0 && pointInTimeAnswers[q[i+1]] != "" && got.stdout != pointInTimeAnswers[q[i+1]] {
				want := pointInTimeAnswers[q[i+1]]
				t.Errorf("%s:\n%s\nwant exactly one row per customer:\n%s", strings.Join(q, " "), got.stdout, want)
			}
		}
	})

	t.Run("minio", func(t *testing.T) {
		cfg := testenv.S3Config(t)
		cfg.Prefix = testenv.S3Prefix(t)
		cleanS3(t, cfg)
		env := []string{
			"ORCH_WAREHOUSE=s3://" + cfg.Bucket + "/" + cfg.Prefix,
			"AWS_ACCESS_KEY_ID=" + cfg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + cfg.SecretKey,
			"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL_S3=" + cfg.Endpoint, "S3_FORCE_PATH_STYLE=true",
			"AWS_SESSION_TOKEN=", "AWS_ENDPOINT_URL=",
		}
		runThrice(t, env)
		for _, q := range exampleQuestions {
			args := append(q, "--pipeline", pipeline)
			got := runCmdEnv(t, dir, env, bin, args...)
			if got.code != 0 || withoutTimes(got.stdout) != withoutTimes(local[strings.Join(q, " ")]) {
				t.Errorf("%s on MinIO: exit %d\n%s%s\nwant what the local tables answer:\n%s", strings.Join(q, " "), got.code, got.stdout, got.stderr, local[strings.Join(q, " ")])
			}
		}
	})
}

// cleanS3 deletes everything under cfg's prefix when the test ends.
func cleanS3(t *testing.T, cfg s3.Config) {
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		infos, err := st.List(ctx, "", "")
		if err != nil {
			t.Logf("clean up %s: %v", st, err)
			return
		}
		for _, in := range infos {
			if err := st.Delete(ctx, in.Key); err != nil {
				t.Logf("clean up %s: %v", st, err)
				return
			}
		}
	})
}

// TestRunInterrupted sends SIGINT to the binary while it ingests many files, then runs the
// pipeline again: every table is at a committed version after the interruption, and the
// rerun finishes the work exactly once (every transaction once in bronze, one insert per
// transaction in the audit history).
func TestRunInterrupted(t *testing.T) {
	bin := buildBinary(t)
	unsetEnv(t, "ORCH_WAREHOUSE")
	pipeline := copyExample(t)
	dir := filepath.Dir(pipeline)
	const extra = 150
	for i := 0; i < extra; i++ {
		name := filepath.Join(dir, "landing", "sales", fmt.Sprintf("2026-02-%03d.csv", i))
		row := fmt.Sprintf("transaction_id,customer_id,product,quantity,amount,sold_at\nT-%d,C-2,tea,1,4.20,2026-02-01T10:00:00Z\n", 5000+i)
		if err := os.WriteFile(name, []byte(row), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command(bin, "run", pipeline)
	cmd.Dir = dir
	cmd.Env = commandEnv([]string{"ORCH_WAREHOUSE="})
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if !signalled && strings.HasPrefix(line, "ingest_sales: running") {
			time.Sleep(200 * time.Millisecond) // into the ingest of the extra files
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	err = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	switch {
	case code == 1 && strings.Contains(log.String(), "cancelled"):
		t.Logf("run cancelled as intended:\n%s", log.String())
	case code == 0:
		t.Logf("the run finished before SIGINT arrived; the rerun checks still apply:\n%s", log.String())
	default:
		t.Fatalf("interrupted run: exit %d (%v), want 1 with \"cancelled\" (or 0 if it finished first)\n%s", code, err, log.String())
	}

	// Every table that exists opens at a committed version.
	for _, name := range []string{"bronze.sales_transactions", "staging.customers", "sales.customer", "audit.sales_transactions_history"} {
		r := runCLI(t, "table", "history", name, "--pipeline", pipeline, "--limit", "1")
		if r.code != 0 && !strings.Contains(r.stderr, "no such directory") && !strings.Contains(r.stderr, "not a Delta table") {
			t.Errorf("%s after the interruption: exit %d\n%s", name, r.code, r.stderr)
		}
	}

	r := runCmdEnv(t, dir, []string{"ORCH_WAREHOUSE="}, bin, "run", pipeline)
	if r.code != 0 {
		t.Fatalf("rerun: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rows := csvRows(t, runCLI(t, "table", "show", "bronze.sales_transactions", "--pipeline", pipeline, "--columns", "transaction_id", "--format", "csv"))
	seen := map[string]int{}
	for _, row := range rows {
		seen[row[0]]++
	}
	if len(rows) != 6+extra || len(seen) != 6+extra {
		t.Errorf("bronze has %d rows, %d distinct transactions; want %d of each", len(rows), len(seen), 6+extra)
	}
	audit := csvRows(t, runCLI(t, "table", "show", "audit.sales_transactions_history", "--pipeline", pipeline, "--columns", "transaction_id", "--where", "_change_type = 'insert'", "--format", "csv"))
	inserts := map[string]int{}
	for _, row := range audit {
		inserts[row[0]]++
	}
	for id, n := range inserts {
		if n != 1 {
			t.Errorf("audit history has %d inserts of %s, want 1", n, id)
		}
	}
	if len(inserts) != 6+extra {
		t.Errorf("audit history has inserts of %d transactions, want %d", len(inserts), 6+extra)
	}
}

// csvRows parses CSV output without its header.
func csvRows(t *testing.T, r result) [][]string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows[1:]
}
