package s3_test

import (
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
	"github.com/orchestrator-io/orchestrator/objectstore"
	"github.com/orchestrator-io/orchestrator/objectstore/storetest"
)

// TestConformance runs the storetest suite against the MinIO that scripts/test.sh
// starts (ORCH_TEST_S3_*), each subtest on a fresh key prefix.
func TestConformance(t *testing.T) {
	testenv.S3Config(t) // skip (or, in CI, fail) once rather than in every subtest
	storetest.Run(t, func(t *testing.T) objectstore.Store { return testenv.S3Store(t) })
}
