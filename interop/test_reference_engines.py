"""Sanity of the harness itself: the two reference engines agree with each other on the sample
data, so a difference found elsewhere is ours, not the harness's or the comparison's."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from support import ALL_TYPES_SCHEMA, assert_same_rows, rs_read, sample_rows, spark_frame, spark_read


def nullable(t: pa.Table) -> pa.Table:
    # delta-rs 1.6 lists a NOT NULL column's "invariants" feature on writer-7 tables only
    # implicitly, and Spark then refuses the table (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH),
    # so the delta-rs side of this check uses a schema without NOT NULL.
    return t.cast(pa.schema([f.with_nullable(True) for f in t.schema]))


def test_sample_covers_every_type_and_nulls():
    t = sample_rows(0, 20)
    assert t.schema == ALL_TYPES_SCHEMA
    for name in t.column_names:
        if name not in ("id", "part"):
            assert t.column(name).null_count > 0, f"column {name} has no null"
    assert None in t.column("part").to_pylist()


def test_delta_rs_writes_spark_reads(spark, tmp_path):
    path = str(tmp_path / "t")
    data = nullable(sample_rows(0, 30))
    write_deltalake(path, data, partition_by=["part"])
    assert_same_rows(rs_read(path), data, what="delta-rs")
    assert_same_rows(spark_read(spark, path), data, what="Spark")


def test_spark_writes_delta_rs_reads(spark, tmp_path):
    path = str(tmp_path / "t")
    data = sample_rows(0, 30)
    spark_frame(spark, data).write.format("delta").partitionBy("part").save(path)
    assert_same_rows(spark_read(spark, path), data, what="Spark")
    assert_same_rows(rs_read(path), data, what="delta-rs")
    assert DeltaTable(path).version() == 0
