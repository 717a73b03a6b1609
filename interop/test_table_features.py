"""The table features Databricks puts on tables: V2 checkpoints, in-commit timestamps,
clustering (domain metadata) and row tracking (with column mapping, and our scd2_merge stage).

Theirs → ours: Spark (Delta 4.4) creates a table with delta.checkpointPolicy=v2 and
delta.enableInCommitTimestamps=true and writes to it (its checkpoints are UUID-named
V2 checkpoints); our reader returns Spark's rows at every version and Spark's history
timestamps (the in-commit timestamps). Then we append, DELETE, MERGE and checkpoint
(our V2 checkpoint with sidecars) on Spark's table: Spark and delta-rs read our
versions with our rows, Spark's history shows our in-commit timestamps, and time travel
by timestamp agrees between Spark and us, also after every commit file's modification
time was reset to one instant (as a copy does).

Ours → theirs: a table we create with both properties, written and checkpointed by us
only, read by Spark and delta-rs at every version; Spark then writes on top of our V2
checkpoint and we read its commit.

Clustering: Spark's CLUSTER BY table takes our writes with its domain intact. Row
tracking: our appends give the row ids Spark's give (Spark's _metadata.row_id).

delta-rs: deltalake 1.6.6's to_pyarrow_table() refuses the v2Checkpoint reader feature
("not yet supported by the deltalake reader"); its DataFusion engine (QueryBuilder)
reads these tables, V2 checkpoints and sidecars included, so rows are read through it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from support import assert_same_rows, spark_frame, spark_history, spark_read
from test_dv import rs_sql_read

FEATURES = {"delta.checkpointPolicy": "v2", "delta.enableInCommitTimestamps": "true", "delta.checkpointInterval": "2"}


def rows(ids, tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"{tag}{i}" for i in ids], pa.string())})


def commit_lines(table_dir: Path, version: int) -> list[dict]:
    with open(table_dir / "_delta_log" / f"{version:020d}.json") as f:
        return [json.loads(line) for line in f if line.strip()]


def ict(table_dir: Path, version: int) -> int:
    """The in-commit timestamp of a version; its commitInfo must be the first action."""
    first = commit_lines(table_dir, version)[0]
    assert "commitInfo" in first, f"v{version} starts with {list(first)}, not commitInfo"
    ts = first["commitInfo"].get("inCommitTimestamp")
    assert isinstance(ts, int), f"v{version} commitInfo has no inCommitTimestamp: {first['commitInfo']}"
    return ts


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def log_names(table_dir: Path) -> list[str]:
    log = table_dir / "_delta_log"
    names = sorted(os.listdir(log))
    if (log / "_sidecars").is_dir():
        names += [f"_sidecars/{n}" for n in sorted(os.listdir(log / "_sidecars"))]
    return names


def v2_checkpoints(table_dir: Path) -> list[str]:
    return [n for n in log_names(table_dir) if ".checkpoint." in n and not n.startswith("_")
            and n.count(".") == 3 and n.split(".")[2] not in ("parquet",)]


def assert_history_is_ict(spark, deltatool, path: str, table_dir: Path, latest: int):
    """Spark's DESCRIBE HISTORY and ours give every version its in-commit timestamp."""
    theirs = {h["version"]: h["timestamp"].replace(tzinfo=timezone.utc) for h in spark_history(spark, path)}
    ours = {h["version"]: h["timestamp"] for h in deltatool.history(path)}
    for v in range(latest + 1):
        want = ict(table_dir, v)
        got_spark = int(theirs[v].timestamp() * 1000)
        assert got_spark == want, f"Spark history v{v}: {theirs[v]}, want the ICT {iso(want)}"
        assert ours[v] == iso(want), f"our history v{v}: {ours[v]}, want the ICT {iso(want)}"


def assert_time_travel_agrees(spark, deltatool, path: str, table_dir: Path, latest: int):
    """As of each version's ICT (and 1 ms before the next), Spark and we read that version."""
    for v in range(latest + 1):
        at = [ict(table_dir, v)]
        if v < latest:
            at.append(ict(table_dir, v + 1) - 1)
        for ms in at:
            want = spark_read(spark, path, version=v)
            assert_same_rows(spark_read(spark, path, timestamp=iso(ms)), want, what=f"Spark as of {iso(ms)} (v{v})")
            assert_same_rows(deltatool.read(path, timestamp=iso(ms)), want, what=f"ours as of {iso(ms)} (v{v})")


def reset_commit_mtimes(table_dir: Path):
    """Every commit file gets one modification time, as after a copy."""
    instant = datetime(2031, 1, 1, tzinfo=timezone.utc).timestamp()
    for n in os.listdir(table_dir / "_delta_log"):
        if n.endswith(".json"):
            os.utime(table_dir / "_delta_log" / n, (instant, instant))


def test_spark_v2_checkpoint_ict_table_both_ways(spark, deltatool, table_dir):
    path = str(table_dir)
    props = ", ".join(f"'{k}' = '{v}'" for k, v in FEATURES.items())
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING) USING delta TBLPROPERTIES ({props})")
    for i in range(4):
        spark.sql(f"INSERT INTO delta.`{path}` VALUES ({i * 10}, 's{i * 10}'), ({i * 10 + 1}, 's{i * 10 + 1}')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 11")
    spark_latest = deltatool.version(path)
    assert spark_latest == 5
    assert v2_checkpoints(table_dir), f"Spark wrote no UUID-named V2 checkpoint: {log_names(table_dir)}"
    protocol = next(a["protocol"] for a in commit_lines(table_dir, 0) if "protocol" in a)
    assert "v2Checkpoint" in protocol.get("readerFeatures", []) and "inCommitTimestamp" in protocol["writerFeatures"], protocol

    # Spark's versions, read by us (from Spark's V2 checkpoints where they exist).
    for v in range(spark_latest + 1):
        assert_same_rows(deltatool.read(path, version=v), spark_read(spark, path, version=v), what=f"Spark's v{v} read by us")

    # Our writes on Spark's table.
    ours = [
        deltatool.write(path, rows([100, 101], "o")),
        deltatool.delete(path, "id = 100"),
        deltatool.merge(path, rows([0, 200], "m"), "id"),
    ]
    ours.append(deltatool.write(path, rows([300], "o")))
    assert ours == list(range(spark_latest + 1, spark_latest + 5)), ours
    latest = ours[-1]
    for v in ours:
        ts = ict(table_dir, v)
        assert ts > ict(table_dir, v - 1), f"our v{v} ICT {ts} is not after v{v - 1}'s"
    assert deltatool.checkpoint(path) == latest
    lc = json.loads((table_dir / "_delta_log" / "_last_checkpoint").read_text())
    assert lc["version"] == latest and lc.get("v2Checkpoint"), lc
    ours_cp = lc["v2Checkpoint"]["path"]
    assert ours_cp.startswith(f"{latest:020d}.checkpoint.") and ours_cp.endswith(".parquet"), ours_cp
    for sc in lc["v2Checkpoint"]["sidecarFiles"]:
        assert (table_dir / "_delta_log" / "_sidecars" / sc["path"]).is_file(), sc

    for v in range(latest + 1):
        want = deltatool.read(path, version=v)
        assert_same_rows(spark_read(spark, path, version=v), want, what=f"v{v} read by Spark")
    want = deltatool.read(path)
    assert sorted(want.column("id").to_pylist()) == [0, 1, 10, 20, 21, 30, 31, 101, 200, 300]
    assert_same_rows(rs_sql_read(path), want, what="latest read by delta-rs")
    assert_history_is_ict(spark, deltatool, path, table_dir, latest)
    assert_time_travel_agrees(spark, deltatool, path, table_dir, latest)

    # A copy loses the commit files' times: timestamps still resolve by ICT.
    copy = table_dir.parent / "copy"
    shutil.copytree(table_dir, copy)
    reset_commit_mtimes(copy)
    assert_time_travel_agrees(spark, deltatool, str(copy), copy, latest)

    # Only our checkpoint: the JSON commits before it gone, every reader rebuilds the table.
    for v in range(latest):
        (copy / "_delta_log" / f"{v:020d}.json").unlink()
    for n in v2_checkpoints(copy):
        if not n.startswith(f"{latest:020d}."):
            (copy / "_delta_log" / n).unlink()
    assert_same_rows(spark_read(spark, str(copy)), want, what="Spark from our checkpoint alone")
    assert_same_rows(deltatool.read(str(copy)), want, what="ours from our checkpoint alone")
    assert_same_rows(rs_sql_read(str(copy)), want, what="delta-rs from our checkpoint alone")


def test_ours_v2_checkpoint_ict_table_read_by_spark_and_delta_rs(spark, deltatool, table_dir):
    path = str(table_dir)
    first = deltatool.write(path, rows(range(0, 5), "a"), properties=FEATURES)
    assert first == 1
    for start in (5, 10, 15):
        deltatool.write(path, rows(range(start, start + 5), "a"))
    deltatool.delete(path, "id < 3")
    latest = deltatool.version(path)
    assert latest == 5
    names = log_names(table_dir)
    assert v2_checkpoints(table_dir) and any(n.startswith("_sidecars/") for n in names), names
    assert not any(n.endswith(".checkpoint.parquet") for n in names), f"a classic checkpoint beside the V2 ones: {names}"
    for v in range(latest + 1):
        want = deltatool.read(path, version=v)
        assert_same_rows(spark_read(spark, path, version=v), want, what=f"our v{v} read by Spark")
        assert_same_rows(rs_sql_read(path, version=v), want, what=f"our v{v} read by delta-rs")
    assert_history_is_ict(spark, deltatool, path, table_dir, latest)

    # Spark writes on top of our V2 checkpoint; we read its commit and its ICT.
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (99, 'spark')")
    assert deltatool.version(path) == latest + 1
    assert ict(table_dir, latest + 1) > ict(table_dir, latest)
    assert_same_rows(deltatool.read(path), spark_read(spark, path), what="Spark's write on our table, read by us")
    assert_history_is_ict(spark, deltatool, path, table_dir, latest + 1)


def test_spark_clustered_table_written_by_us(spark, deltatool, table_dir):
    """Spark's CLUSTER BY table takes our append, DELETE, MERGE and checkpoint: Spark reads
    our rows, still reports its clustering columns (the delta.clustering domain is intact)
    and clusters our files with OPTIMIZE afterwards."""
    path = str(table_dir)
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING) USING delta CLUSTER BY (id) "
              "TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a'), (2, 'b')")
    protocol = next(a["protocol"] for a in commit_lines(table_dir, 0) if "protocol" in a)
    assert {"clustering", "domainMetadata"} <= set(protocol["writerFeatures"]), protocol
    deltatool.write(path, rows([3, 4], "o"))
    deltatool.delete(path, "id = 1")
    deltatool.merge(path, rows([2, 5], "m"), "id")
    latest = deltatool.version(path)
    assert (table_dir / "_delta_log" / f"{3:020d}.checkpoint.parquet").is_file(), log_names(table_dir)
    for v in range(latest + 1):
        want = deltatool.read(path, version=v)
        assert_same_rows(spark_read(spark, path, version=v), want, what=f"v{v} read by Spark")
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0].asDict()
    assert detail["clusteringColumns"] == ["id"], detail
    for v in range(2, latest + 1):
        for a in commit_lines(table_dir, v):
            assert "domainMetadata" not in a, f"our v{v} wrote a domain: {a}"
            if "add" in a and a["add"]["dataChange"]:
                stats = json.loads(a["add"]["stats"])
                assert "id" in stats["minValues"] and "id" in stats["nullCount"], a["add"]
    spark.sql(f"OPTIMIZE delta.`{path}`")
    assert_same_rows(deltatool.read(path), spark_read(spark, path), what="after Spark's OPTIMIZE, read by us")
    assert sorted(deltatool.read(path).column("id").to_pylist()) == [2, 3, 4, 5]


def row_ids(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT id, _metadata.row_id, _metadata.row_commit_version FROM delta.`{path}`").collect())


def test_row_tracking_ids_equal_sparks(spark, deltatool, tmp_path):
    """On twin row-tracking tables, our append gives the rows the row ids and row commit
    versions Spark's own append gives (Spark's _metadata.row_id and row_commit_version);
    our copy-on-write DELETE keeps the ids of the rows it copies and says it preserved
    them, and Spark's next insert continues past our high-water mark; our MERGE keeps
    them too. A table we create with
    delta.enableRowTracking is read the same way."""
    theirs, ours = tmp_path / "spark", tmp_path / "ours"
    for p in (theirs, ours):
        spark.sql(f"CREATE TABLE delta.`{p}` (id BIGINT, name STRING) USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
        spark.sql(f"INSERT INTO delta.`{p}` VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    batch = rows([10, 11, 12], "x")
    spark_frame(spark, batch).coalesce(1).write.format("delta").mode("append").save(str(theirs))
    v = deltatool.write(str(ours), batch)
    assert v == 2
    assert row_ids(spark, str(ours)) == row_ids(spark, str(theirs))
    assert [r[1:] for r in row_ids(spark, str(ours)) if r[0] >= 10] == [(3, 2), (4, 2), (5, 2)]
    hwm = next(a["domainMetadata"] for a in commit_lines(ours, 2) if "domainMetadata" in a)
    assert hwm["domain"] == "delta.rowTracking" and json.loads(hwm["configuration"])["rowIdHighWaterMark"] == 5

    before = row_ids(spark, str(ours))
    deltatool.delete(str(ours), "id = 11")
    info = commit_lines(ours, 3)[0]["commitInfo"]
    assert info["tags"] == {"delta.rowTracking.preserved": "true"}, info
    ids = row_ids(spark, str(ours))
    assert ids == [r for r in before if r[0] != 11]
    assert len({r[1] for r in ids}) == len(ids), f"row ids not unique: {ids}"
    spark.sql(f"INSERT INTO delta.`{ours}` VALUES (20, 'spark')")
    after = dict((r[0], r[1]) for r in row_ids(spark, str(ours)))
    assert after[20] > max(r[1] for r in ids), after
    v = deltatool.merge(str(ours), rows([2, 30], "merged"), "id")
    info = commit_lines(ours, v)[0]["commitInfo"]
    assert info["tags"] == {"delta.rowTracking.preserved": "true"}, info
    merged = row_ids(spark, str(ours))
    assert [r[0] for r in merged] == [1, 2, 3, 10, 12, 20, 30]
    assert len({r[1] for r in merged}) == len(merged), f"row ids not unique after our MERGE: {merged}"
    assert [r[:2] for r in merged if r[0] != 30] == [(k, after[k]) for k in [1, 2, 3, 10, 12, 20]], merged
    assert dict((r[0], r[2]) for r in merged)[30] == v, merged
    assert_same_rows(deltatool.read(str(ours)), spark_read(spark, str(ours)), what="row-tracking table")
    assert_same_rows(rs_sql_read(str(ours)), spark_read(spark, str(ours)), what="row-tracking table read by delta-rs")

    mine = tmp_path / "mine"
    deltatool.write(str(mine), rows([1, 2, 3], "m"), properties={"delta.enableRowTracking": "true"})
    deltatool.write(str(mine), rows([4], "m"))
    assert row_ids(spark, str(mine)) == [(1, 0, 1), (2, 1, 1), (3, 2, 1), (4, 3, 2)]


# Column mapping by name: both rewrites and both merges, in two runs (Spark's side is
# the slow part of each).
@pytest.mark.parametrize("dv,by_position,mapping", [
    pytest.param(False, False, "none", id="copy-on-write-merge-by-key"),
    pytest.param(False, True, "none", id="copy-on-write-merge-by-position"),
    pytest.param(True, False, "none", id="deletion-vectors-merge-by-key"),
    pytest.param(True, True, "none", id="deletion-vectors-merge-by-position"),
    pytest.param(False, True, "name", id="column-mapping-copy-on-write-merge-by-position"),
    pytest.param(True, False, "name", id="column-mapping-deletion-vectors-merge-by-key"),
])
def test_row_tracking_dml_keeps_sparks_row_ids(spark, deltatool, tmp_path, dv, by_position, mapping):
    """On twin row-tracking tables Spark created (two inserts; also with column mapping
    by name, as Unity Catalog managed tables often have), the same DELETE, UPDATEs
    and MERGE (by key, or by position as our keyed stages merge) done by us on one and by
    Spark on the other leave every row with the same (id, _metadata.row_id,
    _metadata.row_commit_version) as Spark reads them: kept rows keep both, updated rows
    keep their row id and get the commit's version; inserted rows get the same version
    and distinct fresh ids. The
    materialized columns are no data columns, to Spark or to us; Spark's UPDATE and
    INSERT after ours keep the ids as on its own table (but for the fresh ones), and our
    UPDATE after Spark's reads the ids Spark materialized."""
    theirs, ours = tmp_path / "spark", tmp_path / "ours"
    for p in (theirs, ours):
        spark.sql(f"CREATE TABLE delta.`{p}` (id BIGINT, name STRING) USING delta TBLPROPERTIES "
                  f"('delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = '{str(dv).lower()}', "
                  f"'delta.columnMapping.mode' = '{mapping}')")
        spark.sql(f"INSERT INTO delta.`{p}` VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        spark.sql(f"INSERT INTO delta.`{p}` VALUES (4, 'd'), (5, 'e')")
    assert row_ids(spark, str(ours)) == row_ids(spark, str(theirs))

    steps = [("DELETE", "id = 2", {}), ("UPDATE", "id = 3", {"name": "'C'"}),
             ("UPDATE", "id = 1 OR id = 4", {"name": "'X'"}), ("DELETE", "id = 4", {})]
    for op, where, set_ in steps:
        if op == "DELETE":
            spark.sql(f"DELETE FROM delta.`{theirs}` WHERE {where}")
            v = deltatool.delete(str(ours), where)
        else:
            assigns = ", ".join(f"{k} = {e}" for k, e in set_.items())
            spark.sql(f"UPDATE delta.`{theirs}` SET {assigns} WHERE {where}")
            v = deltatool.update(str(ours), where, **set_)
        info = commit_lines(ours, v)[0]["commitInfo"]
        assert info["tags"] == {"delta.rowTracking.preserved": "true"}, (op, where, info)
        assert row_ids(spark, str(ours)) == row_ids(spark, str(theirs)), (op, where)
        assert_same_rows(deltatool.read(str(ours)), spark_read(spark, str(theirs)), what=f"after {op} {where}")
        assert spark.read.format("delta").load(str(ours)).columns == ["id", "name"]
        assert deltatool.read(str(ours)).column_names == ["id", "name"]

    # MERGE (update 3 and 5, insert 7 and 8): the kept and updated rows as Spark gives
    # them; the inserted rows get Spark's commit version and distinct fresh ids past
    # every earlier one (which fresh ids depends on how the new files are laid out, so
    # only that is compared).
    src = rows([3, 5, 7, 8], "m")
    before = row_ids(spark, str(ours))
    spark_frame(spark, src).createOrReplaceTempView("rt_src")
    spark.sql(f"MERGE INTO delta.`{theirs}` t USING rt_src s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    v = deltatool.merge(str(ours), src, "id", by_position=by_position)
    assert commit_lines(ours, v)[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    got, want = row_ids(spark, str(ours)), row_ids(spark, str(theirs))
    assert [r for r in got if r[0] < 7] == [r for r in want if r[0] < 7]
    assert [(r[0], r[2]) for r in got if r[0] >= 7] == [(r[0], r[2]) for r in want if r[0] >= 7]
    fresh = sorted(r[1] for r in got if r[0] >= 7)
    assert fresh[0] > max(r[1] for r in before) and len(set(fresh)) == 2, got
    assert_same_rows(deltatool.read(str(ours)), spark_read(spark, str(theirs)), what="after MERGE")

    for p in (theirs, ours):
        spark.sql(f"UPDATE delta.`{p}` SET name = 'Y' WHERE id = 1")
        spark.sql(f"INSERT INTO delta.`{p}` VALUES (6, 'f')")
    got, want = row_ids(spark, str(ours)), row_ids(spark, str(theirs))
    assert [r for r in got if r[0] < 6] == [r for r in want if r[0] < 6]
    assert [(r[0], r[2]) for r in got] == [(r[0], r[2]) for r in want]
    assert len({r[1] for r in got}) == len(got) and dict(r[:2] for r in got)[6] > max(fresh), got
    assert_same_rows(deltatool.read(str(ours)), spark_read(spark, str(theirs)), what="after Spark's writes")

    # Row 1's id is now in the materialized column of a file Spark wrote: our UPDATE
    # reads it from there (under column mapping too) as Spark's does.
    spark.sql(f"UPDATE delta.`{theirs}` SET name = 'W' WHERE id = 1")
    v = deltatool.update(str(ours), "id = 1", name="'W'")
    assert commit_lines(ours, v)[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    got, want = row_ids(spark, str(ours)), row_ids(spark, str(theirs))
    assert [r for r in got if r[0] < 6] == [r for r in want if r[0] < 6]


def test_our_clustered_table_read_and_optimized_by_spark(spark, deltatool, table_dir):
    """A table we create clustered is a clustered table to Spark: it reports our
    clustering columns, reads our rows, OPTIMIZEs (clusters) our files and inserts."""
    path = str(table_dir)
    deltatool.write(path, rows([5, 1, 3], "a"), cluster_by=["id"])
    deltatool.write(path, rows([4, 2], "b"))
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0].asDict()
    assert detail["clusteringColumns"] == ["id"], detail
    assert_same_rows(spark_read(spark, path), deltatool.read(path), what="our clustered table read by Spark")
    assert_same_rows(rs_sql_read(path), deltatool.read(path), what="our clustered table read by delta-rs")
    spark.sql(f"OPTIMIZE delta.`{path}`")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (6, 'spark')")
    assert sorted(deltatool.read(path).column("id").to_pylist()) == [1, 2, 3, 4, 5, 6]
    assert_same_rows(deltatool.read(path), spark_read(spark, path), what="after Spark's OPTIMIZE and INSERT")


@pytest.fixture(scope="module")
def orchestrator_bin(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("orch-bin") / "orchestrator"
    proc = subprocess.run(["go", "build", "-o", str(out), "./cmd/orchestrator"],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"go build ./cmd/orchestrator failed:\n{proc.stderr}")
    return out


SCD2_PIPELINE = """pipeline: rowtrack-scd2
warehouse: {warehouse}
tables:
  staging.customers:
    columns:
      - {{name: customer_id, type: string, nullable: false}}
      - {{name: city, type: string}}
      - {{name: updated_at, type: timestamp}}
      - {{name: source_file, type: string}}
      - {{name: load_timestamp, type: timestamp}}
    properties:
      delta.enableChangeDataFeed: true
  dim.customer:
    columns:
      - {{name: customer_id, type: string, nullable: false}}
      - {{name: city, type: string}}
      - {{name: valid_from, type: timestamp}}
      - {{name: valid_to, type: timestamp}}
      - {{name: is_current, type: boolean}}
stages:
  - name: load
    kind: ingest
    source: landing/*.csv
    target: staging.customers
  - name: history
    kind: scd2_merge
    depends_on: [load]
    source: staging.customers
    source_changes: true
    target: dim.customer
    keys: [customer_id]
    track: [city]
    sequence_by: updated_at
"""


def dim_row_ids(spark, path: str) -> dict[tuple, tuple]:
    """(customer_id, city) → (_metadata.row_id, _metadata.row_commit_version)."""
    return {(r[0], r[1]): (r[2], r[3]) for r in spark.sql(
        f"SELECT customer_id, city, _metadata.row_id, _metadata.row_commit_version FROM delta.`{path}`").collect()}


@pytest.mark.parametrize("dv,mapping,cluster", [
    pytest.param(False, "none", False, id="copy-on-write"),
    pytest.param(True, "name", False, id="deletion-vectors-column-mapping"),
    pytest.param(True, "none", True, id="clustered-v2-checkpoints-ict"),
])
def test_our_scd2_stage_on_sparks_row_tracking_table(spark, orchestrator_bin, tmp_path, dv, mapping, cluster):
    """Our scd2_merge stage (the binary, a pipeline) loads a dimension Spark created with
    row tracking (with deletion vectors and column mapping by name, as on Unity Catalog,
    or neither; or liquid-clustered with V2 checkpoints and in-commit timestamps, as
    Databricks makes new tables). Spark reads our second load's closes and new versions:
    a closed version keeps its row id and gets our commit's row commit version, an
    untouched one keeps both, new versions get distinct fresh ids past every earlier one;
    the commit says it preserved the ids. Spark's UPDATE and INSERT after ours keep and
    continue them. On the clustered table our commits carry increasing in-commit
    timestamps, our checkpoints are V2, and Spark still reports its clustering column."""
    work = tmp_path / "pipeline"
    (work / "landing").mkdir(parents=True)
    warehouse = work / "warehouse"
    dim = warehouse / "dim" / "customer"
    extra = "".join(f", '{k}' = '{v}'" for k, v in FEATURES.items()) if cluster else ""
    spark.sql(f"CREATE TABLE delta.`{dim}` (customer_id STRING NOT NULL, city STRING, valid_from TIMESTAMP, "
              f"valid_to TIMESTAMP, is_current BOOLEAN) USING delta {'CLUSTER BY (customer_id) ' if cluster else ''}"
              f"TBLPROPERTIES ('delta.enableRowTracking' = 'true', "
              f"'delta.enableDeletionVectors' = '{str(dv).lower()}', 'delta.columnMapping.mode' = '{mapping}'{extra})")
    (work / "pipeline.yaml").write_text(SCD2_PIPELINE.format(warehouse=warehouse))
    env = {k: v for k, v in os.environ.items() if k != "ORCH_WAREHOUSE"}

    def load(name: str, lines: list[str]) -> int:
        (work / "landing" / name).write_text("customer_id,city,updated_at\n" + "\n".join(lines) + "\n")
        run = subprocess.run([str(orchestrator_bin), "run", str(work / "pipeline.yaml")], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
        return max(int(p.stem) for p in (dim / "_delta_log").glob("*.json"))

    load("1.csv", ["C1,Seattle,2026-01-01T00:00:00Z", "C2,Boston,2026-01-01T00:00:00Z"])
    before = dim_row_ids(spark, str(dim))
    assert set(before) == {("C1", "Seattle"), ("C2", "Boston")}
    assert len({r[0] for r in before.values()}) == 2, before

    v = load("2.csv", ["C1,Portland,2026-02-01T00:00:00Z", "C3,London,2026-02-01T00:00:00Z"])
    info = commit_lines(dim, v)[0]["commitInfo"]
    assert info["tags"] == {"delta.rowTracking.preserved": "true"}, info
    after = dim_row_ids(spark, str(dim))
    assert after[("C1", "Seattle")] == (before[("C1", "Seattle")][0], v), after  # closed
    assert after[("C2", "Boston")] == before[("C2", "Boston")], after  # untouched
    new = [after[("C1", "Portland")], after[("C3", "London")]]
    assert [r[1] for r in new] == [v, v], after
    assert min(r[0] for r in new) > max(r[0] for r in before.values()) and new[0][0] != new[1][0], after
    closed = spark.sql(f"SELECT is_current, CAST(valid_to AS STRING) FROM delta.`{dim}` "
                       "WHERE customer_id = 'C1' AND city = 'Seattle'").collect()
    assert [tuple(r) for r in closed] == [(False, "2026-02-01 00:00:00")], closed
    assert spark.read.format("delta").load(str(dim)).columns == ["customer_id", "city", "valid_from", "valid_to", "is_current"]
    if cluster:
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{dim}`").collect()[0].asDict()
        assert detail["clusteringColumns"] == ["customer_id"], detail
        for w in range(1, v + 1):
            assert ict(dim, w) > ict(dim, w - 1), f"v{w}'s in-commit timestamp is not after v{w - 1}'s"
        assert v2_checkpoints(dim), f"no V2 checkpoint: {log_names(dim)}"
        assert not any(n.endswith(".checkpoint.parquet") for n in log_names(dim)), log_names(dim)

    spark.sql(f"UPDATE delta.`{dim}` SET city = 'BOSTON' WHERE customer_id = 'C2'")
    spark.sql(f"INSERT INTO delta.`{dim}` VALUES ('C9', 'Oslo', NULL, NULL, true)")
    last = dim_row_ids(spark, str(dim))
    assert last[("C2", "BOSTON")][0] == before[("C2", "Boston")][0], last
    assert {k: r for k, r in last.items() if k[0] in ("C1", "C3")} == {k: r for k, r in after.items() if k[0] in ("C1", "C3")}
    assert last[("C9", "Oslo")][0] > max(r[0] for r in after.values()), last
    assert len({r[0] for r in last.values()}) == len(last), last
