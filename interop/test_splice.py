"""Spliced files: a MERGE given its matches by position (as scd2_merge gives them) on a table
without deletion vectors rewrites each file it changes by copying the column chunks whose
values stay and encoding only the changed columns, row group by row group, under the old
footer with the chunks' new offsets (delta/parquet_splice.go).

Spark and delta-rs must read those files exactly like rewritten ones: the rows, the change
feed of the MERGE, and data skipping on the changed column (the file's stats must describe
its new values). The files spliced are ours (many row groups, every type, nested columns
copied byte for byte) and ones Spark wrote (parquet-mr, small row groups)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from support import assert_same_rows, rs_read, sample_rows, spark_frame, spark_read
from test_cdf_dml import CDF, assert_same_changes, rs_changes, spark_changes

ROWS = 2000
LAYOUTS = {"flat": [], "partitioned": ["part", "flag"]}
BIG_F = 1e12  # past every f the sample rows hold: a filter f > BIG_F / 2 hits updated rows only


def commit_actions(table: Path, version: int, kind: str) -> list[dict]:
    lines = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [a[kind] for a in map(json.loads, lines) if kind in a]


def row_groups(table: Path, rel: str) -> tuple[int, int]:
    """(rows, row groups) of a data file named by an add or remove path."""
    from urllib.parse import unquote

    md = pq.ParquetFile(table / unquote(rel)).metadata
    return md.num_rows, md.num_row_groups


def write_table(writer: str, path: Path, data: pa.Table, parts: list[str], deltatool, spark) -> pa.Table:
    """Writes data as the table's first version; returns the rows written."""
    if writer == "ours":
        # A row group per 100-row batch (per partition).
        batches = pa.Table.from_batches(data.to_batches(max_chunksize=100))
        deltatool.write(str(path), batches, partition_by=parts, properties=CDF, row_group_bytes=1)
        return data
    # Small row groups. Timestamps are Spark's default INT96: a splice copies their chunks.
    # (They stay before 2262 here: delta-rs reads INT96 as nanoseconds, which end there.
    # test_spark_to_ours reads Spark's INT96 up to 9999 with our reader.)
    ts = data.schema.get_field_index("ts")
    data = data.set_column(ts, "ts", data.column(ts).take([k % 1000 for k in range(data.num_rows)]))
    hc = spark.sparkContext._jsc.hadoopConfiguration()
    hc.set("parquet.block.size", "16384")
    try:
        w = spark_frame(spark, data).coalesce(1).write.format("delta").option("delta.enableChangeDataFeed", "true")
        if parts:
            w = w.partitionBy(*parts)
        w.save(str(path))
    finally:
        hc.unset("parquet.block.size")
    return data


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("writer", ["ours", "spark"])
def test_spliced_files_read_by_spark_and_delta_rs(writer, layout, deltatool, spark, table_dir):
    path = str(table_dir)
    data = sample_rows(0, ROWS, ntz=False)
    data = write_table(writer, table_dir, data, LAYOUTS[layout], deltatool, spark)
    ids = [k for k in range(ROWS) if k % 9 == 4]
    src = data.filter(pc.is_in(data.column("id"), pa.array(ids, pa.int64())))
    src = src.set_column(src.schema.get_field_index("s"), "s", pa.array([f"new-{k}" for k in ids], pa.string()))
    src = src.set_column(src.schema.get_field_index("f"), "f", pa.array([BIG_F + k for k in ids], pa.float32()))
    if writer == "spark":
        md = pq.ParquetFile(next(table_dir.rglob("*.parquet"))).metadata
        kinds = {md.schema.column(i).name: md.schema.column(i).physical_type for i in range(md.num_columns)}
        assert kinds["ts"] == "INT96", kinds
    v = deltatool.merge(path, src, "id", by_position=True)

    # Spliced, not rewritten: each file the MERGE replaced has a successor with its rows
    # and row groups (a rewrite writes the updated rows after the others, in one row group
    # per file here).
    removed = sorted(row_groups(table_dir, r["path"]) for r in commit_actions(table_dir, v, "remove"))
    added = sorted(row_groups(table_dir, a["path"]) for a in commit_actions(table_dir, v, "add"))
    assert removed and added == removed, f"removed (rows, row groups) {removed}, added {added}"
    assert max(g for _, g in added) > 1, f"no file with several row groups: {added}"

    sel = pc.is_in(data.column("id"), pa.array(ids, pa.int64()))
    want = data.set_column(data.schema.get_field_index("s"), "s",
                           pc.if_else(sel, pa.array([f"new-{k}" for k in range(ROWS)], pa.string()), data.column("s")))
    want = want.set_column(want.schema.get_field_index("f"), "f",
                           pc.if_else(sel, pa.array([BIG_F + k for k in range(ROWS)], pa.float32()), data.column("f")))
    assert_same_rows(spark_read(spark, path), want, what="Spark after the splice")
    assert_same_rows(rs_read(path), want, what="delta-rs after the splice")
    assert_same_rows(deltatool.read(path), want, what="ours after the splice")

    # Data skipping trusts the spliced files' stats: a filter only the new values pass.
    hits = spark.read.format("delta").load(path).where(f"f > {BIG_F / 2}").select("id").toArrow()
    assert sorted(hits.column("id").to_pylist()) == ids, "Spark's filter on the changed column"
    rs_hits = rs_read(path).filter(pc.greater(pc.field("f"), BIG_F / 2))
    assert rs_hits.num_rows == len(ids)

    ours = deltatool.changes(path, v, v)
    assert ours.num_rows == 2 * len(ids)
    assert sorted(set(ours.column("_change_type").to_pylist())) == ["update_postimage", "update_preimage"]
    assert_same_changes(spark_changes(spark, path, v, v), ours, what="Spark's change feed of the splice", timestamps=True)
    assert_same_changes(rs_changes(path, v, v), ours, what="delta-rs's change feed of the splice", timestamps=False)
