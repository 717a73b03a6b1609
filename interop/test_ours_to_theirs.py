"""Ours → theirs: tables our writer produces (deltatool write) are read by delta-rs and by Spark
with identical rows at every version and identical version numbers, and both show our
operations in their history.

The expected rows come from a model kept in Python (what was appended and overwritten), so
every engine, ours included, is checked against the truth rather than against each other."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
from deltalake import DeltaTable

from support import assert_same_rows, build_table, rs_read, spark_history, spark_read


def test_our_reader_every_version(built, deltatool):
    latest = max(built.versions)
    assert deltatool.version(built.path) == latest
    for v, want in built.versions.items():
        assert_same_rows(deltatool.read(built.path, version=v), want, what=f"ours v{v}")


def test_delta_rs_every_version(built):
    latest = max(built.versions)
    assert DeltaTable(built.path).version() == latest
    for v, want in built.versions.items():
        assert_same_rows(rs_read(built.path, v), want, what=f"delta-rs v{v}")


def test_spark_every_version(built, spark):
    latest = max(built.versions)
    for v, want in built.versions.items():
        assert_same_rows(spark_read(spark, built.path, version=v), want, what=f"Spark v{v}")
    assert_same_rows(spark_read(spark, built.path), built.versions[latest], what="Spark latest")


def test_history(built, spark, deltatool):
    want = [built.operations[v] for v in sorted(built.operations)]
    rs = sorted(DeltaTable(built.path).history(), key=lambda h: h["version"])
    assert [h["version"] for h in rs] == sorted(built.operations)
    assert [h["operation"] for h in rs] == want, "delta-rs history operations"
    sp = spark_history(spark, built.path)
    assert [h["version"] for h in sp] == sorted(built.operations)
    assert [h["operation"] for h in sp] == want, "Spark DESCRIBE HISTORY operations"
    ours = deltatool.history(built.path)
    assert [h["operation"] for h in ours] == want, "our history operations"
    writes = [h for h in sp if h["operation"] == "WRITE"]
    assert {h["operationParameters"]["mode"] for h in writes} == {"Append", "Overwrite"}
    for h in writes:
        assert int(h["operationMetrics"]["numOutputRows"]) > 0, h
        assert h["engineInfo"].startswith("orchestrator/"), h["engineInfo"]
    props = next(h for h in sp if h["operation"] == "SET TBLPROPERTIES")
    assert "delta.logRetentionDuration" in props["operationParameters"]["properties"]


def test_properties_visible(built, spark):
    conf = DeltaTable(built.path).metadata().configuration
    assert conf.get("delta.checkpointInterval") == "2"
    assert conf.get("delta.logRetentionDuration") == "interval 60 days"
    row = spark.sql(f"SHOW TBLPROPERTIES delta.`{built.path}` ('delta.logRetentionDuration')").collect()[0]
    assert row["value"] == "interval 60 days"
    parts = spark.sql(f"DESCRIBE DETAIL delta.`{built.path}`").collect()[0]["partitionColumns"]
    assert list(parts) == built.partition_by


def test_checkpoints_alone_suffice(built, spark, tmp_path):
    """Delete every commit JSON before the newest checkpoint from a copy of the table: the
    engines must then rebuild the latest state from our checkpoint Parquet file."""
    log = f"{built.path}/_delta_log"
    names = sorted(os.listdir(log))
    cps = sorted(int(n.split(".")[0]) for n in names if n.endswith(".checkpoint.parquet"))
    assert cps == [v for v in built.versions if v > 0 and v % 2 == 0], f"checkpoints {cps}"
    assert os.path.exists(f"{log}/_last_checkpoint")
    copy = tmp_path / "copy"
    shutil.copytree(built.path, copy)
    newest = cps[-1]
    for n in names:
        if n.endswith(".json") and int(n.split(".")[0]) < newest:
            os.remove(copy / "_delta_log" / n)
    latest = max(built.versions)
    want = built.versions[latest]
    assert_same_rows(rs_read(str(copy)), want, what="delta-rs from checkpoint")
    assert_same_rows(spark_read(spark, str(copy)), want, what="Spark from checkpoint")
    assert_same_rows(rs_read(str(copy), newest), built.versions[newest], what="delta-rs at the checkpoint")


def test_s3_minio(deltatool, s3):
    """Our writer on MinIO; delta-rs reads every version from the same bucket."""
    url = s3.url("ours")
    tool = deltatool.with_env(s3.deltatool_env)
    b = build_table(tool, url, ["part"])
    opts = s3.delta_rs_options
    assert DeltaTable(url, storage_options=opts).version() == max(b.versions)
    for v, want in b.versions.items():
        assert_same_rows(rs_read(url, v, opts), want, what=f"delta-rs on MinIO v{v}")
        assert_same_rows(tool.read(url, version=v), want, what=f"ours on MinIO v{v}")


def test_mixed_writers_on_one_table(deltatool, spark, tmp_path):
    """Our table accepts commits from Spark and delta-rs writers (their writer gates accept our
    protocol and metadata), and every engine reads every version of the mixed log the same."""
    from deltalake import write_deltalake

    from support import sample_rows, spark_frame

    path = str(tmp_path / "t")
    a, b, c, d = sample_rows(0, 10), sample_rows(10, 5), sample_rows(20, 5), sample_rows(30, 5)
    assert deltatool.write(path, a, partition_by=["part"]) == 1
    spark_frame(spark, b).write.format("delta").mode("append").save(path)  # v2
    write_deltalake(path, c, mode="append")  # v3
    assert deltatool.write(path, d) == 4
    want = {0: a.slice(0, 0), 1: a}
    for v, extra in ((2, b), (3, c), (4, d)):
        want[v] = pa.concat_tables([want[v - 1], extra])
    for v, rows in want.items():
        assert_same_rows(deltatool.read(path, version=v), rows, what=f"ours v{v}")
        assert_same_rows(rs_read(path, v), rows, what=f"delta-rs v{v}")
        assert_same_rows(spark_read(spark, path, version=v), rows, what=f"Spark v{v}")
    ops = [h["operation"] for h in spark_history(spark, path)]
    assert ops == ["CREATE TABLE", "WRITE", "WRITE", "WRITE", "WRITE"], ops
