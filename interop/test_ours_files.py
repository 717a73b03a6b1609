"""Ours → independent readers: the Parquet files and per-file stats our writer produces.

- Physical layout as Spark writes it: snappy, INT64 microsecond timestamps (UTC-adjusted for
  timestamp, not for timestamp_ntz), decimals of precision <= 18 as INT32/INT64, no INT96.
- Stats bound the data: numRecords and nullCount are exact, every min/max bounds the
  column's values (timestamps truncated to milliseconds). Spark skips files by these, so a
  wrong bound silently drops rows: Spark's filtered reads with and without data skipping
  must agree.
- DuckDB, reading only the files the JSON log lists (a log replay written here), sees the
  rows of the model.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import os
import struct
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from support import assert_same_rows


def live_files(path: str) -> list[dict]:
    """Replays the JSON commits (no checkpoint) into the live add actions."""
    log = os.path.join(path, "_delta_log")
    live: dict[str, dict] = {}
    for name in sorted(n for n in os.listdir(log) if n.endswith(".json")):
        with open(os.path.join(log, name)) as fh:
            for line in fh:
                action = json.loads(line)
                if "add" in action:
                    live[action["add"]["path"]] = action["add"]
                elif "remove" in action:
                    live.pop(action["remove"]["path"], None)
    return [live[p] for p in sorted(live)]


def local(path: str, add: dict) -> str:
    return os.path.join(path, unquote(add["path"]))


def test_parquet_physical_types(built):
    files = live_files(built.path)
    assert files
    for add in files:
        f = pq.ParquetFile(local(built.path, add))
        cols = {f.schema.column(i).path: f.schema.column(i) for i in range(len(f.schema))}
        assert cols["dec_small"].physical_type == "INT64", "decimal(10,2) must be INT64 as Spark writes it"
        assert cols["dec_big"].physical_type == "FIXED_LEN_BYTE_ARRAY"
        for name, utc in (("ts", True), ("ntz", False)):
            c = cols[name]
            assert c.physical_type == "INT64", f"{name}: {c.physical_type} (INT96 is legacy)"
            lt = c.logical_type.to_json()
            assert json.loads(lt) == {"Type": "Timestamp", "isAdjustedToUTC": utc, "timeUnit": "microseconds",
                                      "is_from_converted_type": False, "force_set_converted_type": False} or (
                f'"isAdjustedToUTC": {str(utc).lower()}' in lt and "microseconds" in lt
            ), f"{name}: {lt}"
        md = f.metadata
        for rg in range(md.num_row_groups):
            for c in range(md.num_columns):
                assert md.row_group(rg).column(c).compression == "SNAPPY"
        for part in built.partition_by:
            assert part not in {p.split(".")[0] for p in cols}, f"partition column {part} stored in the file"


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _bounds_ok(name: str, lo, hi, values: list, float_bits: int = 64) -> str | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if isinstance(vals[0], dt.datetime):
        def parse(s):
            t = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
            return t
        lo, hi = parse(lo), parse(hi)
        if vals[0].tzinfo is None:
            lo, hi = lo.replace(tzinfo=None), hi.replace(tzinfo=None)
        true_hi = max(vals).replace(microsecond=max(vals).microsecond // 1000 * 1000)
        ok = lo <= min(vals) and hi >= true_hi
    elif isinstance(vals[0], dt.date):
        ok = dt.date.fromisoformat(lo) <= min(vals) and dt.date.fromisoformat(hi) >= max(vals)
    elif isinstance(vals[0], decimal.Decimal):
        ok = decimal.Decimal(lo) <= min(vals) and decimal.Decimal(hi) >= max(vals)
    elif isinstance(vals[0], str):
        ok = lo <= min(vals) and (hi >= max(vals) or max(vals).startswith(hi[: len(hi) - 1]))
    elif isinstance(vals[0], float) and float_bits == 32:
        # float stats are written with the float's shortest decimal form, which is only
        # exact once read back as a float32 (as Spark does).
        ok = _f32(float(lo)) <= min(vals) and _f32(float(hi)) >= max(vals)
    elif isinstance(vals[0], float):
        ok = float(lo) <= min(vals) and float(hi) >= max(vals)
    else:
        ok = lo <= min(vals) and hi >= max(vals)
    return None if ok else f"{name}: stats [{lo}, {hi}] do not bound [{min(vals)}, {max(vals)}]"


def test_stats_bound_the_data(built):
    problems = []
    for add in live_files(built.path):
        assert add.get("stats"), f"{add['path']}: no stats"
        stats = json.loads(add["stats"], parse_float=decimal.Decimal)
        t = pq.ParquetFile(local(built.path, add)).read()  # no hive partition discovery
        assert stats["numRecords"] == t.num_rows, add["path"]
        for name in t.column_names:
            col = t.column(name)
            nc = stats["nullCount"].get(name)
            if isinstance(nc, dict):  # struct: per-field counts
                for field, n in nc.items():
                    got = pc.struct_field(col, field).null_count
                    if n != got:
                        problems.append(f"{add['path']} {name}.{field}: nullCount {n}, actual {got}")
            elif nc is not None and nc != col.null_count:
                problems.append(f"{add['path']} {name}: nullCount {nc}, actual {col.null_count}")
            lo, hi = stats.get("minValues", {}).get(name), stats.get("maxValues", {}).get(name)
            if lo is not None and not isinstance(lo, dict):
                bits = 32 if col.type == pa.float32() else 64
                msg = _bounds_ok(name, lo, hi, col.to_pylist(), bits)
                if msg:
                    problems.append(f"{add['path']} {msg}")
    assert not problems, "\n".join(problems)


# (Spark predicate, the same in DuckDB SQL) over columns of every stats-bearing type.
SKIPPING_PREDICATES = [
    ("id >= 2005 AND id < 3002", None),
    ("l = -9223372036854775808", None),
    ("i = 2147483647 OR sh < 0", None),
    ("s = 'alpha' OR s > 'x'", None),
    ("d > 1e299 OR f < 0", None),
    ("dt >= DATE'2001-01-01'", None),
    ("ts < TIMESTAMP'1971-01-01 00:00:00'", None),
    ("ntz > TIMESTAMP_NTZ'2025-06-01 00:00:00'", "ntz > TIMESTAMP'2025-06-01 00:00:00'"),
    ("dec_small < 0 AND dec_big > 0", None),
    ("st.a = 1003 OR i IS NULL", None),
    ("part IS NULL OR part = 'z'", None),
]


def test_spark_data_skipping_agrees(built, spark):
    """Spark, skipping files by our stats and partition values, returns every matching row of
    the model (DuckDB evaluates the same predicate over the model)."""
    latest = built.versions[max(built.versions)]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("model", latest)
    df = spark.read.format("delta").load(built.path)
    # One Spark job for all predicates: a union of filtered scans, each skipping files on its
    # own. Which rows come back is the question, so the ids are enough.
    tagged = [df.where(p).select("id", F.lit(i).alias("q")) for i, (p, _) in enumerate(SKIPPING_PREDICATES)]
    got_all = functools.reduce(lambda a, b: a.unionByName(b), tagged).toArrow()
    total = 0
    for i, (spark_pred, duck_pred) in enumerate(SKIPPING_PREDICATES):
        want = con.sql(f"SELECT id FROM model WHERE {duck_pred or spark_pred} ORDER BY id").fetchall()
        got = sorted(got_all.filter(pc.equal(got_all["q"], i))["id"].to_pylist())
        assert got == [r[0] for r in want], f"WHERE {spark_pred}: got ids {got}, want {[r[0] for r in want]}"
        total += len(want)
    assert total > 0


def test_duckdb_reads_the_listed_files(built):
    """An independent Parquet reader over the files of a log replay sees the model's rows."""
    latest = built.versions[max(built.versions)]
    parts = []
    con = duckdb.connect()
    for add in live_files(built.path):
        t = con.sql(f"SELECT * FROM read_parquet('{local(built.path, add)}', hive_partitioning = false)").fetch_arrow_table()
        for col in built.partition_by:
            raw = add["partitionValues"][col]
            typ = latest.schema.field(col).type
            t = t.append_column(col, pa.array([raw] * t.num_rows, pa.string()).cast(typ))
        parts.append(t)
    got = pa.concat_tables(parts, promote_options="permissive")
    assert_same_rows(got.select(latest.column_names), latest, what="DuckDB")
