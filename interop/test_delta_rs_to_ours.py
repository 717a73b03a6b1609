"""Theirs → ours, delta-rs: tables written by deltalake (Python delta-rs) are read by our reader
(deltatool read) at every version, and the rows equal delta-rs's own read of that version."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from support import assert_same_rows, rs_read, sample_rows


def assert_every_version(deltatool, path: str, storage_options=None, *, expect_versions: int):
    """Our reader equals delta-rs at each version 0..latest; both agree on the latest version."""
    latest = DeltaTable(path, storage_options=storage_options).version()
    assert latest == expect_versions - 1, f"delta-rs latest version: got {latest}, want {expect_versions - 1}"
    assert deltatool.version(path) == latest
    for v in range(latest + 1):
        want = rs_read(path, v, storage_options)
        got = deltatool.read(path, version=v)
        assert_same_rows(got, want, what=f"version {v}")
    assert_same_rows(deltatool.read(path), rs_read(path, None, storage_options), what="latest")


def test_appends_overwrite_and_checkpoint(deltatool, table_dir):
    """Legacy protocol (no timestamp_ntz): appends, an overwrite, a checkpoint, more appends."""
    path = str(table_dir)
    write_deltalake(path, sample_rows(0, 30, ntz=False))  # v0
    write_deltalake(path, sample_rows(30, 20, ntz=False), mode="append")  # v1
    write_deltalake(path, sample_rows(100, 25, ntz=False), mode="overwrite")  # v2
    write_deltalake(path, sample_rows(200, 10, ntz=False), mode="append")  # v3
    DeltaTable(path).create_checkpoint()
    assert (table_dir / "_delta_log" / "00000000000000000003.checkpoint.parquet").exists()
    write_deltalake(path, sample_rows(300, 5, ntz=False), mode="append")  # v4
    proto = DeltaTable(path).protocol()
    assert (proto.min_reader_version, proto.min_writer_version) == (1, 2)
    assert_every_version(deltatool, path, expect_versions=5)


def test_partitioned_all_types_with_null_partition(deltatool, table_dir):
    """Every type incl. timestamp_ntz (reader 3 / writer 7), partitioned with a null partition,
    a predicate overwrite (replaceWhere) and a checkpoint."""
    path = str(table_dir)
    write_deltalake(path, sample_rows(0, 40), partition_by=["part"])  # v0
    write_deltalake(path, sample_rows(40, 40), mode="append")  # v1
    write_deltalake(path, sample_rows(80, 8, parts=["a"]), mode="overwrite", predicate="part = 'a'")  # v2
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, sample_rows(90, 12, parts=[None, "b"]), mode="append")  # v3
    proto = DeltaTable(path).protocol()
    assert proto.min_reader_version == 3 and "timestampNtz" in (proto.reader_features or [])
    assert any(p.name.startswith("part=__HIVE_DEFAULT_PARTITION__") for p in table_dir.iterdir())
    assert_every_version(deltatool, path, expect_versions=4)


def test_delete_update_merge(deltatool, table_dir):
    """Row-level operations rewrite files (delta-rs writes no deletion vectors)."""
    path = str(table_dir)
    write_deltalake(path, sample_rows(0, 60, ntz=False), partition_by=["part"])  # v0
    dt = DeltaTable(path)
    dt.delete("id % 7 = 0")  # v1
    dt.update(updates={"s": "'updated'", "l": "l + 1"}, predicate="id % 5 = 1")  # v2
    src = sample_rows(50, 20, ntz=False)
    (
        dt.merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(updates={"s": "'merged'", "i": "s.i"})
        .when_not_matched_insert_all()
        .execute()
    )  # v3
    dt.delete("part IS NULL")  # v4
    assert_every_version(deltatool, path, expect_versions=5)
    final = deltatool.read(path)
    assert final.num_rows == rs_read(path).num_rows > 0
    assert "merged" in final.column("s").to_pylist()


def test_empty_table_and_schema(deltatool, table_dir):
    """A table created empty has version 0 with no files: our reader returns the schema."""
    path = str(table_dir)
    empty = sample_rows(0, 0, ntz=False)
    DeltaTable.create(path, schema=empty.schema, partition_by=["part"])
    got = deltatool.read(path, version=0)
    assert got.num_rows == 0
    assert got.column_names == empty.column_names
    write_deltalake(path, sample_rows(0, 3, ntz=False), mode="append")
    assert_every_version(deltatool, path, expect_versions=2)


def test_s3_minio(deltatool, s3):
    """delta-rs writes to MinIO; our reader reads the same URL at every version."""
    url = s3.url("rs_table")
    opts = s3.delta_rs_options
    write_deltalake(url, sample_rows(0, 20), partition_by=["part"], storage_options=opts)
    write_deltalake(url, sample_rows(20, 20), mode="append", storage_options=opts)
    write_deltalake(url, sample_rows(100, 10), mode="overwrite", storage_options=opts)
    DeltaTable(url, storage_options=opts).create_checkpoint()
    write_deltalake(url, sample_rows(200, 5), mode="append", storage_options=opts)
    assert_every_version(deltatool.with_env(s3.deltatool_env), url, opts, expect_versions=4)
