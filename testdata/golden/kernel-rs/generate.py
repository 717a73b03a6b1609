"""Records what Delta-Spark reads from each delta-kernel-rs test table in tables/: the
rows of every version, DESCRIBE HISTORY and, where the table has one, the change data
feed. delta's TestKernelRsTables compares its own reads with these answers.

For each table (a directory, or a .tar.zst archive unpacked to a temporary directory
without its macOS "._*" entries) the commit files' modification times are first set the
way the Go test sets them (commit_mtime below), so that timestamps agree:

  expected/<table>/v<N>/   Spark's rows of version N (one Parquet file, timestamps as
                           INT64 microseconds)
  expected/<table>/cdf/    Spark's change data feed from version 0 (or from the first
                           version it can read, cdf_start) to the latest
  expected.json            per table: latest version, DESCRIBE HISTORY (version,
                           operation, timestamp in ms), cdf_start, and the errors Spark
                           gave for what it refused

Run with the interop virtualenv (pyspark, delta-spark; Java 17) and zstd on PATH:
  python testdata/golden/kernel-rs/generate.py [table ...]
(with table names, only those are re-made).
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

import pyarrow.parquet as pq

# Commits without a commitInfo get this time plus one second per version (ms).
BASE_MS = 1_700_000_000_000


def session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    delta_version = metadata.version("delta-spark")
    spark_minor = ".".join(metadata.version("pyspark").split(".")[:2])
    ivy = Path(os.environ.get("ORCH_IVY_DIR", Path.home() / ".cache" / "orchestrator-ivy"))
    return (
        SparkSession.builder.master("local[1]")
        .config("spark.jars.packages", f"io.delta:delta-spark_{spark_minor}_2.13:{delta_version}")
        .config("spark.jars.ivy", str(ivy))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "1")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # Read the commits, not the log compaction files: those of compacted-log-files-table
        # do not reconcile to what its commits say (Spark's default reads them and returns
        # rows that no commit sequence gives; kernel-rs's tests/read.rs agrees with the commits).
        .config("spark.databricks.delta.deltaLog.minorCompaction.useForReads", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )


def unpack(src: Path, dst: Path) -> Path:
    """Copies or unpacks a table into dst and returns its root."""
    dst.mkdir(parents=True)
    if src.is_dir():
        shutil.copytree(src, dst / src.name)
        return dst / src.name
    raw = subprocess.run(["zstd", "-dc", str(src)], check=True, capture_output=True).stdout
    tar_path = dst / "t.tar"
    tar_path.write_bytes(raw)
    with tarfile.open(tar_path) as tf:
        members = [m for m in tf.getmembers() if not Path(m.name).name.startswith("._")]
        tf.extractall(dst, members=members, filter="data")
    tar_path.unlink()
    name = src.name.removesuffix(".tar.zst")
    return dst / name


def commit_mtime(path: Path, version: int) -> int:
    for line in path.read_text().splitlines():
        if line.strip():
            a = json.loads(line)
            if "commitInfo" in a and "timestamp" in a["commitInfo"]:
                return a["commitInfo"]["timestamp"]
    return BASE_MS + version * 1000


def set_mtimes(root: Path) -> int:
    latest = -1
    for p in sorted((root / "_delta_log").glob("*.json")):
        stem = p.name.removesuffix(".json")
        if not stem.isdigit():
            continue
        v = int(stem)
        ms = commit_mtime(p, v)
        os.utime(p, ns=(ms * 1_000_000, ms * 1_000_000))
        latest = max(latest, v)
    return latest


def recent(root: Path, latest: int) -> None:
    now = time.time()
    for p in (root / "_delta_log").glob("*.json"):
        stem = p.name.removesuffix(".json")
        if stem.isdigit():
            t = now - 60 * (latest + 1 - int(stem))
            os.utime(p, (t, t))


def err_text(e: Exception) -> str:
    java = getattr(e, "java_exception", None)
    text = str(java.toString()) if java is not None else str(e)
    return text.strip().splitlines()[0][:400]


def write_rows(df, out: Path) -> int:
    shutil.rmtree(out, ignore_errors=True)
    df.coalesce(1).write.parquet(str(out))
    for p in out.iterdir():
        if p.name.startswith((".", "_")):
            p.unlink()
    return sum(pq.read_metadata(p).num_rows for p in out.glob("*.parquet"))


def cdf_enabled(root: Path) -> bool:
    for p in (root / "_delta_log").glob("*.json"):
        if '"delta.enableChangeDataFeed":"true"' in p.read_text().replace(" ", ""):
            return True
    return False


def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    here = Path(__file__).resolve().parent
    spark = session()
    expected = {"engine": f"Delta-Spark {metadata.version('delta-spark')} on Spark {metadata.version('pyspark')}",
                "tables": {}}
    only = set(sys.argv[1:])  # table names: re-make just these
    if only:
        expected = json.loads((here / "expected.json").read_text())
    else:
        shutil.rmtree(here / "expected", ignore_errors=True)
    for src in sorted((here / "tables").iterdir()):
        name = src.name.removesuffix(".tar.zst")
        if only and name not in only:
            continue
        shutil.rmtree(here / "expected" / name, ignore_errors=True)
        print("table", name, flush=True)
        tmp = Path(tempfile.mkdtemp(prefix="kernel_gen_"))
        root = unpack(src, tmp / "h")
        latest = set_mtimes(root)
        entry = {"latest_version": latest, "versions": {}, "errors": {}}
        try:
            hist = spark.sql(f"DESCRIBE HISTORY delta.`{root}`").collect()
            entry["history"] = sorted(
                ({"version": r["version"], "operation": r["operation"],
                  "timestamp_ms": int(r["timestamp"].timestamp() * 1000)} for r in hist),
                key=lambda h: h["version"])
        except Exception as e:  # noqa: BLE001 - recorded as Spark's answer
            entry["errors"]["history"] = err_text(e)
        # Spark refuses time travel to a commit older than delta.deletedFileRetentionDuration:
        # rows and the change feed are read from a second copy whose commits are recent.
        root = unpack(src, tmp / "r")
        recent(root, latest)
        path = str(root)
        for v in range(latest + 1):
            try:
                df = spark.read.format("delta").option("versionAsOf", v).load(path)
                entry["versions"][str(v)] = write_rows(df, here / "expected" / name / f"v{v}")
            except Exception as e:  # noqa: BLE001
                entry["errors"][f"v{v}"] = err_text(e)
        if cdf_enabled(root):
            for start in range(latest + 1):
                try:
                    df = (spark.read.format("delta").option("readChangeFeed", "true")
                          .option("startingVersion", start).option("endingVersion", latest).load(path))
                    # _commit_timestamp is the commit's time in DESCRIBE HISTORY: the test
                    # checks it against the history of the first copy.
                    entry["cdf_rows"] = write_rows(df.drop("_commit_timestamp"), here / "expected" / name / "cdf")
                    entry["cdf_start"] = start
                    break
                except Exception as e:  # noqa: BLE001
                    entry["errors"][f"cdf from {start}"] = err_text(e)
        if not entry["errors"]:
            del entry["errors"]
        expected["tables"][name] = entry
        shutil.rmtree(tmp)
    (here / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
