"""The interoperability suite (issue 3, point 7): our Delta reader and writer against the
reference implementations, delta-rs (`deltalake`) and Apache Spark with Delta.

Run it with the project's test command, `bash scripts/test.sh` (its run_interop section
creates the virtualenv from requirements.txt, builds interop/deltatool and runs pytest with
MinIO up). By hand, from the repository root, with any Python that has requirements.txt:

    python -m pytest -q interop                      # builds deltatool itself
    DELTATOOL=/path/to/deltatool python -m pytest -q interop -k delta_rs

Layout:
    deltatool/                  Go helper: our reader/writer as a CLI over Arrow IPC files
    support.py                  sample data (every type, nulls), row comparison, the
                                DeltaTool wrapper, reference-engine reads, build_table
    test_reference_engines.py   the harness itself: delta-rs and Spark agree on the data
    test_delta_rs_to_ours.py    theirs → ours, tables written by delta-rs
    test_spark_to_ours.py       theirs → ours, tables written by Spark (DML, checkpoints)
    test_ours_to_theirs.py      ours → theirs: every version, history, checkpoints, MinIO
    test_ours_files.py          ours → independent readers: Parquet types, stats, DuckDB,
                                Spark data skipping over our stats
    test_partition_values.py    partition values of every type, both directions
    test_cdf_dml.py             issue 4: change data feed both ways (Spark readChangeFeed,
                                delta-rs load_cdf), MERGE/UPDATE/DELETE, RESTORE, VACUUM,
                                identity columns written by us and by Spark
    test_dv.py                  deletion vectors both ways: our DELETE/UPDATE/MERGE with
                                delta.enableDeletionVectors read by Spark and delta-rs
                                (rows per version, change feed, our checkpoint, RESTORE,
                                VACUUM, MinIO); Spark's vectors read by ours
    test_schema_evolution.py    column mapping (name, id) and type widening both ways:
                                our evolved tables read by Spark (and delta-rs where it
                                can) at every version, Spark's ALTER TABLE evolutions read
                                by us with their change feeds, stats_parsed checkpoints
    test_table_features.py      V2 checkpoints, in-commit timestamps, clustering, row
                                tracking: Spark's tables written by us, ours read by Spark
                                and delta-rs
    test_openlineage.py         our OpenLineage events (the sales example sent to a
                                loopback consumer) parsed by openlineage-python's models

Environment: DELTATOOL (a prebuilt helper), ORCH_IVY_DIR (the Ivy cache for Spark's Delta
jar, default ~/.cache/orchestrator-ivy), ORCH_TEST_S3_* (MinIO, from scripts/test.sh; the
MinIO tests fail when they are missing and CI=true, and are skipped otherwise).

Adding tests: give deltatool a command for the new operation (interop/deltatool/ops.go
has create, append, changes, update, delete, merge, restore and vacuum, alter.go alter; support.DeltaTool
wraps each), then compare with Spark (spark.sql on delta.`path`, readChangeFeed) and
delta-rs with support.assert_same_rows (test_cdf_dml.assert_same_changes for feeds).
Spark tables with change data feed need 'delta.enableChangeDataFeed' = 'true' in
TBLPROPERTIES; everything else here works unchanged. Keep one SparkSession (the `spark` fixture): starting the JVM costs ~20 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from support import Built, DeltaTool, build_table

REPO = Path(__file__).resolve().parent.parent
IVY_DIR = Path(os.environ.get("ORCH_IVY_DIR", Path.home() / ".cache" / "orchestrator-ivy"))


@pytest.fixture(scope="session")
def deltatool_bin(tmp_path_factory) -> Path:
    """The Go helper: $DELTATOOL when the test script built it, else built here once."""
    given = os.environ.get("DELTATOOL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("bin") / "deltatool"
    proc = subprocess.run(
        ["go", "build", "-o", str(out), "./interop/deltatool"], cwd=REPO, capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.fail(f"go build ./interop/deltatool failed:\n{proc.stderr}")
    return out


@pytest.fixture(scope="session")
def s3_env() -> dict[str, str] | None:
    """MinIO settings exported by scripts/test.sh; None when absent (outside CI)."""
    keys = ["ORCH_TEST_S3_ENDPOINT", "ORCH_TEST_S3_ACCESS_KEY", "ORCH_TEST_S3_SECRET_KEY", "ORCH_TEST_S3_BUCKET"]
    env = {k: os.environ.get(k, "") for k in keys}
    return env if all(env.values()) else None


@pytest.fixture
def deltatool(deltatool_bin, tmp_path) -> DeltaTool:
    return DeltaTool(deltatool_bin, tmp_path)


@pytest.fixture(scope="session")
def s3_bucket(s3_env, deltatool_bin, tmp_path_factory):
    """Creates the test bucket once (scripts/test.sh starts an empty MinIO)."""
    if s3_env is None:
        return None
    s3 = S3(s3_env, "bucket")
    DeltaTool(deltatool_bin, tmp_path_factory.mktemp("s3"), s3.deltatool_env).run(
        "ensure-bucket", "--table", f"s3://{s3.bucket}"
    )
    return s3.bucket


@pytest.fixture
def s3(s3_env, s3_bucket, request):
    """MinIO settings; a test that needs them fails in CI and is skipped elsewhere when absent."""
    if s3_env is None:
        msg = "ORCH_TEST_S3_* not set (run through scripts/test.sh, which starts MinIO)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return S3(s3_env, request.node.name)


class S3:
    """A unique prefix in the test bucket, with the options each engine needs to reach it."""

    def __init__(self, env: dict[str, str], test_name: str):
        self.endpoint = env["ORCH_TEST_S3_ENDPOINT"]
        if "://" not in self.endpoint:
            self.endpoint = "http://" + self.endpoint
        self.bucket = env["ORCH_TEST_S3_BUCKET"]
        self.access_key = env["ORCH_TEST_S3_ACCESS_KEY"]
        self.secret_key = env["ORCH_TEST_S3_SECRET_KEY"]
        safe = "".join(c if c.isalnum() else "-" for c in test_name)[:60]
        self.prefix = f"interop/{int(time.time() * 1000)}-{os.getpid()}-{safe}"

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}/{name}"

    @property
    def deltatool_env(self) -> dict[str, str]:
        """The standard AWS variables objectstore/s3.ConfigFromEnv reads."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
            "AWS_S3_FORCE_PATH_STYLE": "true",
        }

    @property
    def delta_rs_options(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "false",
            "conditional_put": "etag",
        }


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession with Delta for the whole run (the JVM starts once, ~20 s).

    The Delta jar comes from Maven Central through Ivy and is cached in IVY_DIR, so only the
    first run on a machine downloads it. Session time zone is UTC so that timestamps compare
    as instants; the driver binds to loopback only."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    delta_version = metadata.version("delta-spark")
    spark_minor = ".".join(metadata.version("pyspark").split(".")[:2])
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    started = time.monotonic()
    session = (
        SparkSession.builder.master("local[2]")
        .appName("orchestrator-interop")
        .config("spark.jars.packages", f"io.delta:delta-spark_{spark_minor}_2.13:{delta_version}")
        .config("spark.jars.ivy", str(IVY_DIR))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        # Tiny tables: one partition everywhere saves task overhead on 2 cores.
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    print(f"\nSparkSession with Delta {delta_version} started in {time.monotonic() - started:.1f}s")
    yield session
    session.stop()


@pytest.fixture
def table_dir(tmp_path) -> Path:
    """A fresh local directory for one table (not created: writers create it)."""
    d = tmp_path / "table"
    shutil.rmtree(d, ignore_errors=True)
    return d


# Unpartitioned, and partitioned by a string and a boolean column, both with null partitions.
LAYOUTS = {"flat": [], "partitioned": ["part", "flag"]}


@pytest.fixture(scope="session", params=list(LAYOUTS))
def built(request, deltatool_bin, tmp_path_factory) -> Built:
    work = tmp_path_factory.mktemp(f"ours-{request.param}")
    tool = DeltaTool(deltatool_bin, work)
    return build_table(tool, str(work / "table"), LAYOUTS[request.param])
