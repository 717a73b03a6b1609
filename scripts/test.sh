#!/usr/bin/env bash
# The project's one test command; CI runs it through .ci/run with CI=true.
#
#   bash scripts/test.sh                        # everything
#   bash scripts/test.sh ./objectstore/... -v   # other `go test` arguments (default ./...)
#
# In order:
#   1. gofmt -l (any file listed fails the run) and go vet ./...
#   2. MinIO: installed with `go install` at the pinned version if it is neither on PATH
#      nor in $(go env GOPATH)/bin, started on 127.0.0.1 on a free port with a temporary
#      data dir and generated credentials; once /minio/health/live answers, the tests
#      get ORCH_TEST_S3_ENDPOINT, ORCH_TEST_S3_ACCESS_KEY, ORCH_TEST_S3_SECRET_KEY and
#      ORCH_TEST_S3_BUCKET (see internal/testenv), and ORCH_TEST_MINIO_BIN for tests that
#      start, stop and restart a MinIO of their own.
#   3. Spark, when the go test arguments include a package that needs it (./..., the
#      executor, internal/sparkconnect, cmd/orchestrator): one standalone cluster from the
#      interop virtualenv's pyspark (scripts/spark-cluster.sh), exported to the tests as
#      ORCH_TEST_SPARK_REMOTE; stopped on every exit like MinIO.
#   4. Chromium for the browser test (cmd/orchestrator TestBrowser): Debian's chromium
#      package, installed with apt-get when no chromium is on PATH; the test gets its
#      path in ORCH_TEST_CHROMIUM and fails in CI (CI=true) when it is missing.
#   5. the suites in SUITES: go test -race -count=1, then any additional suites (the keyed
#      stages' property tests in full without -race, the interop suite).
# MinIO is stopped and the temporary dir removed on every exit: success, failure,
# Ctrl-C, SIGTERM. If this script is killed with SIGKILL, MinIO still gets SIGTERM
# (setpriv --pdeathsig), so no MinIO outlives the script; only the temporary dir stays,
# and a running `go test` finishes on its own (its S3 tests then fail fast).
#
# MinIO is AGPL-licensed: it is only ever run as a separate process, never imported.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

MINIO_MODULE="github.com/minio/minio"
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
MINIO_START_TIMEOUT="${MINIO_START_TIMEOUT:-60}" # seconds to wait for /minio/health/live
GO_TEST_ARGS=("$@")
if [[ ${#GO_TEST_ARGS[@]} -eq 0 ]]; then
  GO_TEST_ARGS=(./...)
fi

# State that cleanup undoes.
WORK_DIR=""  # temporary dir: MinIO data and log
MINIO_PID="" # MinIO server process
SPARK_PID="" # scripts/spark-cluster.sh (master, worker, Connect server)
SUITE_PID="" # process group leader of the running test command, if any

log() { printf '==> %s\n' "$*" >&2; }
die() {
  printf 'scripts/test.sh: %s\n' "$*" >&2
  exit 1
}

# --------------------------------------------------------------------------------------
# Cleanup: runs on every exit; INT and TERM exit through it too.
# --------------------------------------------------------------------------------------
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -n $SUITE_PID ]]; then
    kill -TERM -- "-$SUITE_PID" 2>/dev/null || kill -TERM "$SUITE_PID" 2>/dev/null || true
    wait "$SUITE_PID" 2>/dev/null || true
  fi
  stop_spark
  stop_minio
  if [[ -n $WORK_DIR ]]; then
    ((status == 0)) || keep_logs
    rm -rf -- "$WORK_DIR"
  fi
  exit "$status"
}

# keep_logs copies the services' logs (MinIO's, Spark's daemons') of a failed run out of
# the temporary dir before it goes: $ORCH_TEST_LOG_DIR, default $TMPDIR/orch-test-logs.
keep_logs() {
  local keep
  keep="${ORCH_TEST_LOG_DIR:-${TMPDIR:-/tmp}/orch-test-logs}/$(date -u +%Y%m%dT%H%M%SZ)-$$"
  mkdir -p "$keep" || return 0
  cp -- "$WORK_DIR"/*.log "$keep"/ 2>/dev/null || true
  if [[ -d $WORK_DIR/spark/logs ]]; then
    cp -r -- "$WORK_DIR/spark/logs" "$keep/spark" 2>/dev/null || true
  fi
  log "the failed run's service logs are kept in $keep"
}
trap cleanup EXIT
trap 'log "interrupted (SIGINT): stopping"; exit 130' INT
trap 'log "terminated (SIGTERM): stopping"; exit 143' TERM

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------

# random_hex N: 2N random hex digits.
random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local port
  for _ in $(seq 200); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "found no free TCP port on 127.0.0.1"
}

# http_ok URL: true if URL answers 2xx.
http_ok() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
  else
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2>/dev/null
  fi
}

# run_in_group CMD...: runs CMD in its own process group and waits for it, so a signal
# to this script can stop CMD and every process it started (go test runs test binaries).
run_in_group() {
  if command -v setsid >/dev/null 2>&1; then
    setsid "$@" </dev/null &
  else
    "$@" </dev/null &
  fi
  SUITE_PID=$!
  local status=0
  wait "$SUITE_PID" || status=$?
  SUITE_PID=""
  return "$status"
}

# --------------------------------------------------------------------------------------
# Static checks
# --------------------------------------------------------------------------------------
check_tools() {
  command -v go >/dev/null 2>&1 || die "go is not on PATH (need Go 1.26)"
  log "$(go version)"
}

check_format() {
  log "gofmt -l"
  local unformatted
  unformatted="$(find . -name '*.go' -not -path '*/.*' -not -path '*/testdata/*' \
    -not -path './vendor/*' -not -path '*/node_modules/*' -print0 | xargs -0 -r gofmt -l)"
  if [[ -n $unformatted ]]; then
    printf '%s\n' "$unformatted" >&2
    die "the files above are not gofmt-formatted: run gofmt -w on them"
  fi
}

run_go_vet() {
  log "go vet ./..."
  go vet ./...
}

# --------------------------------------------------------------------------------------
# MinIO
# --------------------------------------------------------------------------------------
MINIO_BIN=""

ensure_minio() {
  local gobin gopath
  gobin="$(go env GOBIN)"
  if [[ -z $gobin ]]; then
    gopath="$(go env GOPATH)"
    gobin="${gopath%%:*}/bin"
  fi
  if command -v minio >/dev/null 2>&1; then
    MINIO_BIN="$(command -v minio)"
  elif [[ -x $gobin/minio ]]; then
    MINIO_BIN="$gobin/minio"
  else
    log "MinIO not found: go install $MINIO_MODULE@$MINIO_VERSION (builds once, takes minutes)"
    go install "$MINIO_MODULE@$MINIO_VERSION"
    MINIO_BIN="$gobin/minio"
    [[ -x $MINIO_BIN ]] || die "go install finished but $MINIO_BIN is not there"
  fi
  log "MinIO: $MINIO_BIN"
}

# wait_for_minio PORT: true once MinIO answers its liveness probe; false if it exits or
# MINIO_START_TIMEOUT passes.
wait_for_minio() {
  local url="http://127.0.0.1:$1/minio/health/live"
  local deadline=$((SECONDS + MINIO_START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$MINIO_PID" 2>/dev/null; then
      log "MinIO exited before answering $url"
      return 1
    fi
    if http_ok "$url"; then
      return 0
    fi
    sleep 0.2
  done
  log "MinIO did not answer $url within ${MINIO_START_TIMEOUT}s"
  return 1
}

start_minio() {
  WORK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/orch-test.XXXXXX")"
  local user pass port console attempt
  user="orch-$(random_hex 4)"
  pass="$(random_hex 16)"
  # setpriv --pdeathsig: the kernel sends MinIO SIGTERM if this script dies, even by SIGKILL.
  local launcher=()
  if command -v setpriv >/dev/null 2>&1; then
    launcher=(setpriv --pdeathsig TERM --)
  fi
  for attempt in 1 2 3; do
    port="$(free_port)"
    console="$(free_port)"
    [[ $port != "$console" ]] || continue
    log "starting MinIO on 127.0.0.1:$port (console :$console, log $WORK_DIR/minio.log)"
    MINIO_ROOT_USER="$user" MINIO_ROOT_PASSWORD="$pass" MINIO_UPDATE=off \
      "${launcher[@]}" "$MINIO_BIN" server "$WORK_DIR/data" \
      --address "127.0.0.1:$port" --console-address "127.0.0.1:$console" \
      >"$WORK_DIR/minio.log" 2>&1 </dev/null &
    MINIO_PID=$!
    if wait_for_minio "$port"; then
      export ORCH_TEST_S3_ENDPOINT="http://127.0.0.1:$port"
      export ORCH_TEST_S3_ACCESS_KEY="$user"
      export ORCH_TEST_S3_SECRET_KEY="$pass"
      export ORCH_TEST_S3_BUCKET="orchestrator-test"
      export ORCH_TEST_MINIO_BIN="$MINIO_BIN" # for tests that run a MinIO of their own
      log "MinIO is up: ORCH_TEST_S3_ENDPOINT=$ORCH_TEST_S3_ENDPOINT ORCH_TEST_S3_BUCKET=$ORCH_TEST_S3_BUCKET"
      return 0
    fi
    log "MinIO start attempt $attempt failed; last lines of its log:"
    tail -n 20 "$WORK_DIR/minio.log" >&2 || true
    stop_minio
  done
  die "MinIO did not start (3 attempts); see its log above"
}

stop_minio() {
  [[ -n $MINIO_PID ]] || return 0
  if kill -0 "$MINIO_PID" 2>/dev/null; then
    kill -TERM "$MINIO_PID" 2>/dev/null || true
    for _ in $(seq 100); do # up to 10s for a clean shutdown
      kill -0 "$MINIO_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$MINIO_PID" 2>/dev/null || true
  fi
  wait "$MINIO_PID" 2>/dev/null || true
  MINIO_PID=""
}

# --------------------------------------------------------------------------------------
# Spark: one standalone cluster (master, a one-core worker, a Connect server with Delta)
# for the whole run, from the interop virtualenv's pyspark (scripts/spark-cluster.sh).
# Started when the Go tests include a package that needs it; the tests get
# ORCH_TEST_SPARK_REMOTE=sc://127.0.0.1:PORT. ORCH_TEST_SPARK=0 skips it (those tests
# then skip, or fail under CI=true).
# --------------------------------------------------------------------------------------
SPARK_PACKAGES_RE='^(\./\.\.\.|\./internal/sparkconnect|\./executor|\./cmd/orchestrator)'

needs_spark() {
  [[ ${ORCH_TEST_SPARK:-1} != 0 ]] || return 1
  local arg
  for arg in "${GO_TEST_ARGS[@]}"; do
    [[ $arg =~ $SPARK_PACKAGES_RE ]] && return 0
  done
  return 1
}

start_spark() {
  needs_spark || return 0
  command -v java >/dev/null 2>&1 || die "spark: java not found (Spark needs Java 17)"
  interop_venv || die "spark: the interop virtualenv (pyspark) could not be set up"
  local dir="$WORK_DIR/spark" launcher=()
  if command -v setpriv >/dev/null 2>&1; then
    launcher=(setpriv --pdeathsig TERM --)
  fi
  log "starting Spark (master, worker, Connect server with Delta; logs in $dir/logs)"
  local home
  home="$("$INTEROP_PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" ||
    die "spark: pyspark is not importable from $INTEROP_PY"
  # A second start, on fresh ports, when the first fails: a daemon can lose its port to
  # another between spark-cluster.sh's choice and its bind (a Connect server once stopped
  # 7 s in). The first start's errors are shown either way.
  local attempt deadline up
  for attempt in 1 2; do
    rm -rf "$dir"
    ORCH_SPARK_HOME="$home" "${launcher[@]}" bash scripts/spark-cluster.sh "$dir" \
      >"$WORK_DIR/spark.log" 2>&1 </dev/null &
    SPARK_PID=$!
    deadline=$((SECONDS + 300)) up=1
    until [[ -f $dir/remote ]]; do
      if ! kill -0 "$SPARK_PID" 2>/dev/null || ((SECONDS >= deadline)); then
        up=0
        break
      fi
      sleep 0.5
    done
    ((up)) && break
    tail -n 20 "$WORK_DIR/spark.log" >&2 || true
    local f
    for f in "$dir"/logs/*; do
      [[ -f $f ]] || continue
      printf -- '--- %s (its last 30 lines)\n' "$f" >&2
      tail -n 30 "$f" >&2 || true
    done
    stop_spark
    ((attempt == 1)) || die "Spark did not start (see above)"
    log "Spark did not start; starting it again on other ports"
  done
  ORCH_TEST_SPARK_REMOTE="$(cat "$dir/remote")"
  export ORCH_TEST_SPARK_REMOTE
  log "Spark is up: ORCH_TEST_SPARK_REMOTE=$ORCH_TEST_SPARK_REMOTE"
}

stop_spark() {
  [[ -n $SPARK_PID ]] || return 0
  kill -TERM "$SPARK_PID" 2>/dev/null || true
  wait "$SPARK_PID" 2>/dev/null || true
  SPARK_PID=""
}

# --------------------------------------------------------------------------------------
# Chromium (the browser test)
# --------------------------------------------------------------------------------------
find_chromium() {
  local c
  for c in chromium chromium-browser /usr/bin/chromium; do
    if command -v "$c" >/dev/null 2>&1; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

ensure_chromium() {
  local bin sudo=()
  if bin="$(find_chromium)"; then
    export ORCH_TEST_CHROMIUM="$bin"
    log "Chromium: $bin"
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    log "Chromium not found and no apt-get to install it: the browser test fails in CI, is skipped elsewhere"
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
      log "Chromium not found; installing it needs root (apt-get install chromium)"
      return 0
    fi
    sudo=(sudo -n)
  fi
  log "Chromium not found: apt-get install chromium (Debian's package)"
  if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    bin="$(find_chromium)" && export ORCH_TEST_CHROMIUM="$bin" && log "Chromium: $bin"
  else
    log "apt-get install chromium failed: the browser test fails in CI, is skipped elsewhere"
  fi
}

# --------------------------------------------------------------------------------------
# Test suites
# --------------------------------------------------------------------------------------
# Each suite is a function that runs from the repository root with MinIO up and the
# ORCH_TEST_S3_* variables exported, prints its runner's own output, and returns non-zero
# on failure. Run long commands through run_in_group so Ctrl-C / SIGTERM stop them.

run_go_tests() {
  # -timeout: the Spark engine's tests wait on a one-core cluster (about 8 minutes in
  # all with -race); go test's default of 10 minutes per package is too close, and jobs
  # under -race on a busy host takes near half an hour.
  log "go test -race -count=1 -timeout 45m ${GO_TEST_ARGS[*]}"
  export ORCH_TEST_S3_USAGE_LOG="$WORK_DIR/s3-usage.log"
  local status=0
  run_in_group go test -race -count=1 -timeout 45m "${GO_TEST_ARGS[@]}" || status=$?
  report_s3_usage
  return "$status"
}

# report_s3_usage: which tests ran against MinIO (internal/testenv records them), so the
# output shows the S3 tests ran rather than skipped.
report_s3_usage() {
  if [[ ! -s $ORCH_TEST_S3_USAGE_LOG ]]; then
    log "no test used MinIO"
    return 0
  fi
  log "tests that ran against MinIO at $ORCH_TEST_S3_ENDPOINT (test binary, test: count with subtests):"
  awk '{ split($2, p, "/"); n[$1 " " p[1]]++ } END { for (k in n) printf "      %s: %d\n", k, n[k] }' \
    "$ORCH_TEST_S3_USAGE_LOG" | sort >&2
}

# run_properties: the property tests of the keyed stages (random streams against a
# reference fold) and of schema evolution (delta: random schema and data changes against
# a model, 256 seeds), in full: under -race they run a few streams each (jobs/race_on_test.go),
# since the race detector makes them ten times slower; here, without it, 32 per mode. The
# heap bound of the memory budget is measured here too: under -race it is skipped (the
# race detector's instrumentation changes what the heap holds between collections).
run_properties() {
  if [[ ${#GO_TEST_ARGS[@]} -ne 1 || ${GO_TEST_ARGS[0]} != ./... ]]; then
    log "property suite not run: go test arguments were given (run without arguments for it)"
    return 0
  fi
  local tests='TestCDCStreamsAnyOrderAnySplit|TestSCD1SnapshotSourceProperty|TestSCD2SnapshotSourceProperty|TestSCD2OptionsAnyOrderAnySplit|TestDailySnapshotsWithBusinessTime|TestSnapshotBacklogAnyRunsAnyBudget|TestCaptureHistoryProperty|TestUpsertIngestProperty|TestAppendIngestProperty|TestVacuumProperty'
  log "go test -count=1 -run '$tests' ./jobs (in full, without -race)"
  local status=0
  run_in_group go test -count=1 -timeout 30m -run "$tests" ./jobs || status=$?
  # The same streams again from other seeds, and the fact property's: more streams than
  # the -race run has time for (two wrong answers were found only past CI's seeds).
  log "ORCH_PROPERTY_SEED=1000 go test -count=1 -run '$tests' ./jobs, and -run TestFactLoadProperty ./pipelines"
  run_in_group env ORCH_PROPERTY_SEED=1000 go test -count=1 -timeout 30m -run "$tests" ./jobs || status=$?
  run_in_group env ORCH_PROPERTY_SEED=1000 go test -count=1 -timeout 30m -run 'TestFactLoadProperty$' ./pipelines || status=$?
  # The heap bound alone in its process: parallel tests beside it would share its heap.
  log "go test -count=1 -run TestBudgetHeapStaysUnderBudget ./jobs (alone, without -race)"
  run_in_group go test -count=1 -timeout 10m -run 'TestBudgetHeapStaysUnderBudget$' ./jobs || status=$?
  # The scheduler's planner in full (a fifth of its expressions under -race), and data
  # skipping and table DML from other seeds.
  log "go test -count=1 -run TestNextMatchesReference ./cron, and ORCH_PROPERTY_SEED=1000 -run 'TestPruningMatchesReference|TestDMLMatchesModel' ./delta"
  run_in_group go test -count=1 -timeout 10m -run 'TestNextMatchesReference$' ./cron || status=$?
  run_in_group env ORCH_PROPERTY_SEED=1000 go test -count=1 -timeout 10m -run 'TestPruningMatchesReference$|TestDMLMatchesModel$' ./delta || status=$?
  log "ORCH_EVOLVE_SEEDS=256 go test -count=1 -run TestEvolutionProperty ./delta (schema evolution, without -race)"
  run_in_group env ORCH_EVOLVE_SEEDS=256 go test -count=1 -timeout 30m -run 'TestEvolutionProperty$' ./delta || status=$?
  return "$status"
}

# ---- Additional suites go here. ------------------------------------------------------
# Define run_<name> above this line's block and append it to SUITES, for example:
#   run_python_interop: create a virtualenv (python3 -m venv "$WORK_DIR/venv"), pip install
#     the pinned requirements, then run_in_group pytest; treat pytest's exit 5 ("no tests
#     collected") as a failure or not, deliberately.
# ---- Interoperability suite (interop/, owned by the delta interop work) ---------------
# Python + pytest with the reference Delta implementations (delta-rs, Spark with Delta)
# against our reader and writer, through the Go helper interop/deltatool.
#   - The virtualenv lives outside the clone, keyed by the hash of interop/requirements.txt
#     and the Python version, so CI's fresh clones reuse it; a changed pin rebuilds it.
#   - Spark's Delta jar comes from Maven Central into ~/.cache/orchestrator-ivy (conftest.py).
#   - Runs only in the full run (no go test arguments given); CI always runs it.
#   - pytest exit 5 (no tests collected) is a failure.
INTEROP_CACHE="${ORCH_CACHE_DIR:-$HOME/.cache/orchestrator}"

interop_venv() {
  local python="${ORCH_INTEROP_PYTHON:-python3}" stamp venv
  command -v "$python" >/dev/null 2>&1 || die "interop: $python not found (need Python 3.10+)"
  stamp="$( (cat interop/requirements.txt; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)"
  venv="$INTEROP_CACHE/interop-venv-$stamp"
  if [[ ! -f $venv/.complete ]]; then
    log "interop: creating virtualenv $venv (pip install -r interop/requirements.txt)"
    rm -rf -- "$venv"
    mkdir -p "$INTEROP_CACHE"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r interop/requirements.txt ||
      { rm -rf -- "$venv"; return 1; }
    touch "$venv/.complete"
  fi
  INTEROP_PY="$venv/bin/python"
}

run_interop() {
  if [[ ${#GO_TEST_ARGS[@]} -ne 1 || ${GO_TEST_ARGS[0]} != ./... ]]; then
    log "interop suite not run: go test arguments were given (run without arguments for it)"
    return 0
  fi
  command -v java >/dev/null 2>&1 || die "interop: java not found (Spark needs Java 17)"
  interop_venv || { log "interop: virtualenv setup failed"; return 1; }
  log "interop: go build ./interop/deltatool"
  go build -o "$WORK_DIR/deltatool" ./interop/deltatool || return 1
  log "interop: python -m pytest -q interop"
  local status=0
  DELTATOOL="$WORK_DIR/deltatool" run_in_group "$INTEROP_PY" -m pytest -q interop || status=$?
  if ((status == 5)); then
    log "interop: pytest collected no tests; that is a failure"
  fi
  return "$status"
}

SUITES=(run_go_tests run_properties run_interop)

# --------------------------------------------------------------------------------------
main() {
  check_tools
  check_format
  run_go_vet
  ensure_minio
  start_minio
  start_spark
  ensure_chromium

  local failed=() suite
  for suite in "${SUITES[@]}"; do
    if ! "$suite"; then
      failed+=("$suite")
    fi
  done
  if ((${#failed[@]} > 0)); then
    log "FAILED suites: ${failed[*]}"
    return 1
  fi
  log "all suites passed: ${SUITES[*]}"
}

main
