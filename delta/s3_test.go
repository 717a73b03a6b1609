package delta_test

import (
	"os"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
)

// s3Store gives the MinIO-backed store that scripts/test.sh starts, or nil when none is
// configured outside CI. In CI (CI=true) a missing MinIO fails the test.
func s3Store(t *testing.T) objectstore.Store {
	t.Helper()
	if os.Getenv(testenv.EnvS3Endpoint) == "" && !testenv.InCI() {
		t.Logf("no %s: the S3 variant is not run (scripts/test.sh runs it)", testenv.EnvS3Endpoint)
		return nil
	}
	return testenv.S3Store(t)
}
