package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// TestTableCommandsS3 runs the table commands on a table in MinIO, named by an s3://
// location and by a declared name in a pipeline whose warehouse is on S3. Credentials
// come from the AWS_* variables, the endpoint from --s3-endpoint or the pipeline.
func TestTableCommandsS3(t *testing.T) {
	cfg := testenv.S3Config(t)
	cfg.Prefix = testenv.S3Prefix(t)
	store, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		infos, err := store.List(ctx, "", "")
		if err != nil {
			t.Logf("clean up %s: %v", store, err)
			return
		}
		for _, in := range infos {
			if err := store.Delete(ctx, in.Key); err != nil {
				t.Logf("clean up %s: %v", store, err)
				return
			}
		}
	})
	writeOrdersTable(t, store, "bronze/orders")
	local := makeOrdersTable(t) // the same rows on disk, to compare with

	t.Setenv("AWS_ACCESS_KEY_ID", cfg.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", cfg.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	for _, name := range []string{"AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT", "S3_FORCE_PATH_STYLE", "AWS_S3_FORCE_PATH_STYLE"} {
		t.Setenv(name, "")
	}
	warehouse := "s3://" + cfg.Bucket + "/" + cfg.Prefix
	loc := warehouse + "/bronze/orders"
	s3Flags := []string{"--s3-endpoint", cfg.Endpoint, "--s3-path-style"}

	t.Run("show", func(t *testing.T) {
		for _, format := range []string{"text", "csv", "json"} {
			got := runCLI(t, append([]string{"table", "show", loc, "--format", format}, s3Flags...)...)
			want := runCLI(t, "table", "show", local, "--format", format)
			if got.code != 0 || got.stdout != want.stdout {
				t.Errorf("show --format %s on S3: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the rows shown for the local table:\n%s", format, got.code, got.stdout, got.stderr, want.stdout)
			}
		}
	})

	t.Run("history", func(t *testing.T) {
		r := runCLI(t, append([]string{"table", "history", loc, "--format", "csv", "--limit", "2"}, s3Flags...)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "3,") || !strings.Contains(lines[2], ",WRITE,tester,orchestrator/test,orders,ingest,run-2,2,") {
			t.Errorf("history on S3: exit %d\nstdout:\n%s\nstderr:\n%s\nwant versions 3 and 2 with their lineage", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("pipeline", func(t *testing.T) {
		t.Setenv("ORCH_TEST_WAREHOUSE", warehouse)
		t.Setenv("ORCH_TEST_ENDPOINT", cfg.Endpoint)
		pipeline := filepath.Join(t.TempDir(), "pipeline.yaml")
		src, err := os.ReadFile("testdata/pipelines/valid.yaml")
		if err != nil {
			t.Fatal(err)
		}
		yaml := strings.Replace(string(src), "warehouse: /tmp/orchestrator-cli-test-warehouse",
			"warehouse: ${ORCH_TEST_WAREHOUSE}\nstorage: {endpoint: \"${ORCH_TEST_ENDPOINT}\", path_style: true}", 1)
		if err := os.WriteFile(pipeline, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "table", "properties", "bronze.orders", "--pipeline", pipeline, "--set", "owner=sales")
		want := "key                         value\n" +
			"--------------------------  ----------------\n" +
			"delta.enableChangeDataFeed  true\n" +
			"delta.logRetentionDuration  interval 90 days\n" +
			"owner                       sales\n"
		if r.code != 0 || r.stdout != want || r.stderr != "table bronze.orders: properties changed in version 4\n" {
			t.Errorf("properties via an S3 pipeline: exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", r.code, r.stdout, r.stderr, want)
		}
	})

	t.Run("missing bucket", func(t *testing.T) {
		r := runCLI(t, append([]string{"table", "history", "s3://no-such-bucket-orch/t"}, s3Flags...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "no-such-bucket-orch") {
			t.Errorf("missing bucket: exit %d, stderr:\n%s\nwant exit 1 and a message naming the bucket", r.code, r.stderr)
		}
	})
}
