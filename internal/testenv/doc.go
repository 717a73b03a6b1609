// Package testenv gives tests what they need from the environment that scripts/test.sh
// sets up: an S3-compatible store (MinIO), and the golden tables kept in testdata/golden.
//
// The variables, exported by scripts/test.sh after it starts MinIO on 127.0.0.1:
//
//	ORCH_TEST_S3_ENDPOINT    http://127.0.0.1:PORT (a URL; the scheme says HTTP or HTTPS)
//	ORCH_TEST_S3_ACCESS_KEY  access key (MinIO root user)
//	ORCH_TEST_S3_SECRET_KEY  secret key
//	ORCH_TEST_S3_BUCKET      bucket for tests; created if missing (default orchestrator-test)
//	ORCH_TEST_S3_USAGE_LOG   optional file listing the tests that used MinIO (for the summary)
//	ORCH_TEST_MINIO_BIN      the MinIO binary, for tests that run their own (StartMinIO)
//
// Fault tests get a MinIO of their own that they may stop and start again (StartMinIO;
// the shared one is never stopped), a loopback TCP proxy whose faults they set
// (NewProxy: latency, resets, hung requests, responses cut or stalled midway), and fuzz
// targets a bound on what one input may allocate (MaxAlloc). Random property tests take
// their seeds from PropertySeed, which ORCH_PROPERTY_SEED moves to other cases.
//
// With no endpoint a test that needs S3 is skipped, with a message saying to run
// scripts/test.sh, unless CI=true: then it fails, so CI can never pass by skipping the
// S3 tests. The same holds for anything else a test needs and lacks (Unavailable), such
// as the binary a test would build under -short. The golden tables (GoldenDir) are part
// of the repository, so their absence is always a failure.
package testenv
