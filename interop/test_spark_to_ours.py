"""Theirs → ours, Spark: tables written by Apache Spark with Delta (its default protocol,
checkpoints every 2 commits, UPDATE/DELETE/MERGE) are read by our reader at every version,
by version and by timestamp, with exactly Spark's rows."""

from __future__ import annotations

import datetime as dt

import pytest

from support import assert_same_rows, sample_rows, spark_ddl, spark_frame, spark_history, spark_read


def assert_every_version(spark, deltatool, path: str, *, expect_versions: int):
    hist = spark_history(spark, path)
    assert [h["version"] for h in hist] == list(range(expect_versions)), "Spark history versions"
    assert deltatool.version(path) == expect_versions - 1
    for v in range(expect_versions):
        assert_same_rows(deltatool.read(path, version=v), spark_read(spark, path, version=v), what=f"version {v}")
    assert_same_rows(deltatool.read(path), spark_read(spark, path), what="latest")


def test_spark_default_protocol_dml_and_checkpoints(spark, deltatool, table_dir):
    """Spark's defaults (no timestamp_ntz, so its legacy protocol), checkpointInterval=2 so that
    versions 2, 4 and 6 have checkpoints, and every DML statement."""
    path = str(table_dir)
    schema = sample_rows(0, 0, ntz=False).schema
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({spark_ddl(schema)}) USING delta "
        "TBLPROPERTIES ('delta.checkpointInterval' = '2')"
    )  # v0
    spark_frame(spark, sample_rows(0, 40, ntz=False)).write.format("delta").mode("append").save(path)  # v1
    spark.sql(f"UPDATE delta.`{path}` SET s = 'updated', l = l + 1 WHERE id % 3 = 0")  # v2
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 4 = 0")  # v3
    spark_frame(spark, sample_rows(30, 20, ntz=False)).createOrReplaceTempView("merge_src")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING merge_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.s = 'merged', t.i = s.i "
        "WHEN NOT MATCHED THEN INSERT *"
    )  # v4
    spark_frame(spark, sample_rows(100, 15, ntz=False)).write.format("delta").mode("overwrite").save(path)  # v5
    spark_frame(spark, sample_rows(200, 5, ntz=False)).write.format("delta").mode("append").save(path)  # v6
    log = table_dir / "_delta_log"
    for v in (2, 4, 6):
        assert (log / f"{v:020d}.checkpoint.parquet").exists(), f"Spark wrote no checkpoint at {v}"
    assert_every_version(spark, deltatool, path, expect_versions=7)


def test_spark_partitioned_ntz_replace_where(spark, deltatool, table_dir):
    """Every type incl. timestamp_ntz (table features), partitioned by a string with nulls,
    an overwrite with replaceWhere and a partition DELETE."""
    path = str(table_dir)
    w = lambda data: spark_frame(spark, data).write.format("delta")  # noqa: E731
    w(sample_rows(0, 40)).partitionBy("part").option("delta.checkpointInterval", "2").save(path)  # v0
    w(sample_rows(40, 20)).mode("append").save(path)  # v1
    w(sample_rows(60, 10, parts=["a"])).mode("overwrite").option("replaceWhere", "part = 'a'").save(path)  # v2
    spark.sql(f"DELETE FROM delta.`{path}` WHERE part IS NULL")  # v3
    w(sample_rows(80, 8, parts=[None])).mode("append").save(path)  # v4
    assert any(p.name.startswith("part=__HIVE_DEFAULT_PARTITION__") for p in table_dir.iterdir())
    assert_every_version(spark, deltatool, path, expect_versions=5)


def test_time_travel_by_timestamp(spark, deltatool, table_dir):
    """Timestamps from Spark's history (monotonised file times) pick the same version in our
    reader as in Spark's timestampAsOf."""
    path = str(table_dir)
    for k in range(4):
        mode = "overwrite" if k == 2 else "append"
        spark_frame(spark, sample_rows(k * 10, 10, ntz=False)).write.format("delta").mode(mode).save(path)
    for h in spark_history(spark, path):
        ts = h["timestamp"]  # naive datetime in the session zone, UTC
        stamp = ts.replace(tzinfo=dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        want = spark_read(spark, path, timestamp=ts.isoformat(sep=" ", timespec="milliseconds"))
        assert_same_rows(deltatool.read(path, timestamp=stamp), want, what=f"as of {stamp} (version {h['version']})")
        assert_same_rows(want, spark_read(spark, path, version=h["version"]), what="Spark's own time travel")


def test_spark_int96_timestamps_past_nanoseconds(spark, deltatool, table_dir):
    """Spark stores timestamps as INT96 by default. An SCD2 dimension's open versions end on
    9999-12-31, past the nanosecond range (1677..2262) pqarrow reads INT96 into: our reader
    reads them as microseconds, as Spark does, before and after a MERGE of ours."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(table_dir)
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, valid_to TIMESTAMP) USING delta")
    spark.sql(
        f"INSERT INTO delta.`{path}` VALUES (1, TIMESTAMP'9999-12-31 00:00:00'), "
        "(2, TIMESTAMP'1600-01-01 12:00:00.000001'), (3, NULL), (4, TIMESTAMP'2024-02-29 12:34:56.789012')"
    )
    files = list(table_dir.rglob("*.parquet"))
    assert files and all(
        pq.ParquetFile(f).metadata.schema.column(1).physical_type == "INT96" for f in files
    ), "Spark did not write INT96"
    want = spark_read(spark, path)
    assert want.column("valid_to").to_pylist()[0] is not None
    assert_same_rows(deltatool.read(path), want, what="ours reading Spark's INT96")
    # A MERGE of ours updates a row: every version, ours and Spark's, reads the same.
    src = pa.table({"id": pa.array([4], pa.int64()), "valid_to": pa.array([dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc)], pa.timestamp("us", tz="UTC"))})
    v = deltatool.merge(path, src, "id")
    assert_same_rows(deltatool.read(path, version=v), spark_read(spark, path, version=v), what="after our MERGE")
    assert sorted(r["valid_to"].year for r in deltatool.read(path).to_pylist() if r["valid_to"]) == [1600, 9999, 9999]
