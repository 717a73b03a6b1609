package testenv

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/s3"
)

// Names of the environment variables scripts/test.sh exports.
const (
	EnvS3Endpoint  = "ORCH_TEST_S3_ENDPOINT"
	EnvS3AccessKey = "ORCH_TEST_S3_ACCESS_KEY"
	EnvS3SecretKey = "ORCH_TEST_S3_SECRET_KEY"
	EnvS3Bucket    = "ORCH_TEST_S3_BUCKET"
	// EnvS3UsageLog names a file to which S3Config appends "<test binary> <test name>"
	// for every test that got the test MinIO; scripts/test.sh summarises it so the
	// output shows which tests ran against MinIO rather than skipping.
	EnvS3UsageLog = "ORCH_TEST_S3_USAGE_LOG"
)

// DefaultS3Bucket is the bucket used when ORCH_TEST_S3_BUCKET is unset.
const DefaultS3Bucket = "orchestrator-test"

// InCI reports whether the tests run in CI (CI=true), where missing services are
// failures, not skips.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Unavailable reports that something a test needs is missing (MinIO, the golden tables,
// a binary it may not build): in CI the test fails, elsewhere it is skipped.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s; CI=true requires this test to run", msg)
	}
	t.Skip(msg)
}

// GoldenDir returns the golden tables (tables written by Spark, delta-rs and the Delta
// projects' test suites, with their expected facts), kept in the repository under
// testdata/golden with their provenance and licences (testdata/golden/README.md), so a
// fresh clone runs every test.
func GoldenDir(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("golden tables: %v", err)
	}
	dir := filepath.Join(root, "testdata", "golden")
	if _, err := os.Stat(filepath.Join(dir, "expected.json")); err != nil {
		t.Fatalf("golden tables not found at %s: %v", dir, err)
	}
	return dir
}

// moduleRoot is the directory of the go.mod above the working directory (a test runs in
// its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = up
	}
}

// S3Config returns the configuration of the test MinIO: endpoint, credentials, path
// style and bucket, with no Prefix. The bucket exists when it returns. With no
// endpoint set it skips the test, or fails it when CI=true.
func S3Config(t testing.TB) s3.Config {
	t.Helper()
	endpoint := os.Getenv(EnvS3Endpoint)
	if endpoint == "" {
		Unavailable(t, "%s is not set, so there is no S3 (MinIO) to test against; run bash scripts/test.sh, which starts MinIO and sets %s, %s, %s and %s",
			EnvS3Endpoint, EnvS3Endpoint, EnvS3AccessKey, EnvS3SecretKey, EnvS3Bucket)
	}
	bucket := os.Getenv(EnvS3Bucket)
	if bucket == "" {
		bucket = DefaultS3Bucket
	}
	cfg := s3.Config{
		Endpoint:  endpoint,
		AccessKey: os.Getenv(EnvS3AccessKey),
		SecretKey: os.Getenv(EnvS3SecretKey),
		Region:    "us-east-1",
		Bucket:    bucket,
		PathStyle: true,
	}
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatalf("test S3 store: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatalf("test S3 at %s: %v", endpoint, err)
	}
	noteUsage(t)
	return cfg
}

// noteUsage records in $ORCH_TEST_S3_USAGE_LOG that t uses the test MinIO. Lines are
// short single writes with O_APPEND, so parallel test processes do not interleave them.
func noteUsage(t testing.TB) {
	path := os.Getenv(EnvS3UsageLog)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("note S3 usage: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %s\n", filepath.Base(os.Args[0]), t.Name()); err != nil {
		t.Logf("note S3 usage: %v", err)
	}
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// S3Prefix returns a fresh key prefix for t, unique across tests, runs and processes,
// such as "test/TestConformance_RoundTrip-6XJ3…".
func S3Prefix(t testing.TB) string {
	name := strings.Trim(unsafe.ReplaceAllString(t.Name(), "_"), "_.")
	if len(name) > 80 {
		name = name[:80]
	}
	return "test/" + name + "-" + strings.ToLower(rand.Text()[:12])
}

// S3Store returns a store on the test MinIO under a fresh prefix (see S3Prefix). When
// the test ends, everything under the prefix is deleted. It skips or fails like
// S3Config when there is no endpoint.
func S3Store(t testing.TB) objectstore.Store {
	t.Helper()
	cfg := S3Config(t)
	cfg.Prefix = S3Prefix(t)
	return S3StoreOf(t, cfg)
}

// S3StoreOf returns a store for cfg (a test MinIO's, with a prefix of its own) and
// deletes everything under the prefix when the test ends.
func S3StoreOf(t testing.TB, cfg s3.Config) objectstore.Store {
	t.Helper()
	st, err := s3.New(cfg)
	if err != nil {
		t.Fatalf("test S3 store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		infos, err := st.List(ctx, "", "")
		if err != nil {
			t.Logf("cleaning up %s: %v", st, err)
			return
		}
		for _, in := range infos {
			if err := st.Delete(ctx, in.Key); err != nil {
				t.Logf("cleaning up %s: %v", st, err)
				return
			}
		}
	})
	return st
}
