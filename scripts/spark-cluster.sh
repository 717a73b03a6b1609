#!/usr/bin/env bash
# A standalone Spark cluster on loopback for the tests: one master, one worker with one
# core, and a Spark Connect server with Delta's jars, all from the pyspark wheel of the
# interop virtualenv (no sbin scripts needed).
#
#   bash scripts/spark-cluster.sh DIR
#
# It runs in the foreground until SIGTERM/SIGINT (or its parent dies: every daemon gets
# SIGTERM through setpriv --pdeathsig), keeping logs and state under DIR. Once the
# Connect server answers, DIR/remote holds its address (sc://127.0.0.1:PORT); on failure
# DIR/failed holds the reason and the script exits non-zero.
#
# Environment:
#   ORCH_SPARK_HOME   the pyspark package directory (default: found in the interop
#                     virtualenv under ${ORCH_CACHE_DIR:-~/.cache/orchestrator})
#   ORCH_IVY_DIR      Ivy cache for io.delta:delta-spark (default ~/.cache/orchestrator-ivy,
#                     shared with interop/conftest.py)
#   ORCH_SPARK_START_TIMEOUT  seconds to wait for the Connect server (default 240: the first
#                     start downloads Delta's jars)
set -euo pipefail

DIR="${1:?usage: spark-cluster.sh DIR}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
CACHE="${ORCH_CACHE_DIR:-$HOME/.cache/orchestrator}"
IVY_DIR="${ORCH_IVY_DIR:-$HOME/.cache/orchestrator-ivy}"
TIMEOUT="${ORCH_SPARK_START_TIMEOUT:-240}"
DELTA_PACKAGE="io.delta:delta-spark_4.1_2.13:4.4.0" # interop/requirements.txt's pins

PIDS=()
fail() {
  printf '%s\n' "$*" >"$DIR/failed"
  printf 'spark-cluster.sh: %s\n' "$*" >&2
  exit 1
}
stop() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}
trap stop EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

SPARK_HOME="${ORCH_SPARK_HOME:-}"
if [[ -z $SPARK_HOME ]]; then
  for d in "$CACHE"/interop-venv-*/lib/python3*/site-packages/pyspark; do
    if [[ -f ${d%/lib/*}/.complete && -x $d/bin/spark-class ]]; then SPARK_HOME="$d"; fi
  done
fi
[[ -n $SPARK_HOME && -x $SPARK_HOME/bin/spark-class ]] ||
  fail "no pyspark found (set ORCH_SPARK_HOME, or let scripts/test.sh create the interop virtualenv)"
command -v java >/dev/null 2>&1 || fail "java not found (Spark needs Java 17)"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
launcher=()
if command -v setpriv >/dev/null 2>&1; then launcher=(setpriv --pdeathsig TERM --); fi

export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_DIRS="$DIR/local" SPARK_WORKER_DIR="$DIR/work" \
  SPARK_LOG_DIR="$DIR/logs" SPARK_CONF_DIR="$DIR/conf" SPARK_NO_DAEMONIZE=1
mkdir -p "$SPARK_LOCAL_DIRS" "$SPARK_WORKER_DIR" "$SPARK_LOG_DIR" "$SPARK_CONF_DIR"

MASTER_PORT="$(free_port)"
CONNECT_PORT="$(free_port)"
SPARK_DAEMON_MEMORY=256m "${launcher[@]}" "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
  --host 127.0.0.1 --port "$MASTER_PORT" --webui-port "$(free_port)" >"$DIR/logs/master.out" 2>&1 </dev/null &
PIDS+=($!)
SPARK_DAEMON_MEMORY=256m "${launcher[@]}" "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
  --host 127.0.0.1 --cores 1 --memory 1g --webui-port "$(free_port)" "spark://127.0.0.1:$MASTER_PORT" \
  >"$DIR/logs/worker.out" 2>&1 </dev/null &
PIDS+=($!)

# SPARK_DAEMON_MEMORY must be unset here: it would override --driver-memory.
# One core: one partition everywhere (without it a VACUUM takes 80 s instead of 3-6 s).
"${launcher[@]}" "$SPARK_HOME/bin/spark-submit" --master "spark://127.0.0.1:$MASTER_PORT" \
  --class org.apache.spark.sql.connect.service.SparkConnectServer --driver-memory 1g \
  --packages "$DELTA_PACKAGE" --conf "spark.jars.ivy=$IVY_DIR" \
  --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
  --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
  --conf spark.executor.memory=1g --conf spark.cores.max=1 \
  --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 \
  --conf spark.connect.grpc.binding.address=127.0.0.1 --conf "spark.connect.grpc.binding.port=$CONNECT_PORT" \
  --conf spark.sql.shuffle.partitions=1 --conf spark.default.parallelism=1 \
  --conf spark.databricks.delta.snapshotPartitions=1 \
  --conf spark.sql.sources.parallelPartitionDiscovery.parallelism=1 \
  --conf spark.sql.adaptive.enabled=false --conf spark.sql.session.timeZone=UTC \
  --conf spark.ui.enabled=false --conf "spark.driver.extraJavaOptions=-Dderby.system.home=$DIR/derby" \
  --conf "spark.sql.warehouse.dir=$DIR/spark-warehouse" \
  spark-internal >"$DIR/logs/connect.out" 2>&1 </dev/null &
PIDS+=($!)

deadline=$((SECONDS + TIMEOUT))
until grep -q "Spark Connect server started" "$DIR/logs/connect.out" 2>/dev/null; do
  for pid in "${PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || fail "a Spark daemon exited during start; see $DIR/logs ($(tail -n 5 "$DIR/logs/connect.out" | tr '\n' ' '))"
  done
  ((SECONDS < deadline)) || fail "the Spark Connect server did not start within ${TIMEOUT}s; see $DIR/logs"
  sleep 0.5
done
# Accepting connections on the port, not only logged.
until (exec 3<>"/dev/tcp/127.0.0.1/$CONNECT_PORT") 2>/dev/null; do
  ((SECONDS < deadline)) || fail "the Spark Connect port $CONNECT_PORT does not accept connections; see $DIR/logs"
  sleep 0.2
done
echo "sc://127.0.0.1:$CONNECT_PORT" >"$DIR/remote.tmp"
mv "$DIR/remote.tmp" "$DIR/remote"
echo "spark-cluster.sh: Spark Connect at sc://127.0.0.1:$CONNECT_PORT (logs in $DIR/logs)" >&2
# Stay up until told to stop (or a daemon dies).
while true; do
  for pid in "${PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || fail "a Spark daemon exited; see $DIR/logs"
  done
  sleep 2 &
  wait $! || true
done
