"""Deletion vectors (DVs) both ways.

Ours → theirs: a table our writer creates with delta.enableDeletionVectors (and change
data feed) gets DELETE, UPDATE and MERGE through deltatool; they mark rows in DV files
(storage type "u", deletion_vector_<uuid>.bin in the table root, offset 1) and re-add the
same data files instead of rewriting them. The log is checked for exactly that, then
Spark and delta-rs read every version with the rows a Python model of the operations
predicts, their change feeds equal ours, and a checkpoint we write (deletionVector
struct in the add column) alone lets Spark and delta-rs rebuild the table. Also: a
table that gets the property through SET TBLPROPERTIES (protocol upgrade); a DELETE that
empties a file with a vector, RESTORE across vectors, VACUUM keeping exactly the live
vector files and an overwrite of files with vectors; the same DML on MinIO.

Theirs → ours: Spark's DELETE, UPDATE and MERGE on a table with DVs write DV files and
checkpoints carrying them; our reader returns Spark's rows at every version, our change
feed equals Spark's, and our DELETE on top of Spark's vectors (which must keep Spark's
deleted rows deleted) is read back by Spark.

delta-rs: deltalake 1.6.6's DeltaTable.to_pyarrow_table()/to_pyarrow_dataset() refuse
tables with the deletionVectors reader feature ("reader features {'deletionVectors'} ...
not yet supported by the deltalake reader"), so rows are read through its DataFusion
engine (QueryBuilder), which applies the vectors; DeltaTable.load_cdf works unchanged."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from support import DeltaTool, assert_same_rows, sample_rows, spark_ddl, spark_frame, spark_read
from test_cdf_dml import assert_same_changes, change_counts, rs_changes, spark_changes

DV_CDF = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
LAYOUTS = {"flat": [], "partitioned": ["part"]}

# ---------------------------------------------------------------- the log


def commit_actions(table_dir: Path, version: int) -> list[dict]:
    with open(table_dir / "_delta_log" / f"{version:020d}.json") as f:
        return [json.loads(line) for line in f if line.strip()]


def actions_of(table_dir: Path, version: int, kind: str) -> list[dict]:
    return [a[kind] for a in commit_actions(table_dir, version) if kind in a]


def protocol_of(table_dir: Path) -> dict:
    """The newest protocol action in the JSON commits."""
    versions = sorted(int(n.split(".")[0]) for n in os.listdir(table_dir / "_delta_log") if n.endswith(".json"))
    for v in reversed(versions):
        for p in actions_of(table_dir, v, "protocol"):
            return p
    raise AssertionError("no protocol action")


def marked_rows(table_dir: Path, version: int) -> int:
    """Rows a commit newly marks deleted in existing data files: for each add with a DV,
    its cardinality minus that of the vector its remove (same path) carried."""
    before = {r["path"]: (r.get("deletionVector") or {}).get("cardinality", 0)
              for r in actions_of(table_dir, version, "remove")}
    return sum(a["deletionVector"]["cardinality"] - before.get(a["path"], 0)
               for a in actions_of(table_dir, version, "add") if a.get("deletionVector"))


def dv_id(dv: dict | None) -> str | None:
    """A vector's unique id (PROTOCOL.md): storage type, path or inline vector, @offset."""
    if not dv:
        return None
    return dv["storageType"] + dv["pathOrInlineDv"] + (f"@{dv['offset']}" if dv.get("offset") is not None else "")


def live_adds(table_dir: Path, upto: int) -> dict[str, dict | None]:
    """The live files after version upto, replayed from the JSON commits as the protocol
    does, keyed by (path, vector id), so that a commit may remove (p, old vector) and add
    (p, new vector) in either order: path -> its deletionVector (None: none)."""
    live: dict[tuple[str, str | None], dict | None] = {}
    for v in range(upto + 1):
        for a in commit_actions(table_dir, v):
            if "remove" in a:
                live.pop((a["remove"]["path"], dv_id(a["remove"].get("deletionVector"))), None)
            if "add" in a:
                live[(a["add"]["path"], dv_id(a["add"].get("deletionVector")))] = a["add"].get("deletionVector")
    paths = [p for p, _ in live]
    assert len(paths) == len(set(paths)), f"a path is live twice after v{upto}: {sorted(live)}"
    return {p: dv for (p, _), dv in live.items()}


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_decode(s: str) -> bytes:
    out = bytearray()
    for i in range(0, len(s), 5):
        v = 0
        for ch in s[i:i + 5]:
            v = v * 85 + _Z85.index(ch)
        out += v.to_bytes(4, "big")
    return bytes(out)


def dv_file(table_dir: Path, dv: dict) -> Path:
    """The file of a storage type "u" descriptor: [prefix] + Z85(UUID), PROTOCOL.md."""
    assert dv["storageType"] == "u", dv
    p = dv["pathOrInlineDv"]
    prefix, enc = p[:-20], p[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(enc))}.bin"
    return table_dir / prefix / name if prefix else table_dir / name


def assert_dv_feature(table_dir: Path) -> None:
    p = protocol_of(table_dir)
    assert (p["minReaderVersion"], p["minWriterVersion"]) == (3, 7), p
    assert "deletionVectors" in p["readerFeatures"] and "deletionVectors" in p["writerFeatures"], p


# ---------------------------------------------------------------- delta-rs


def rs_sql_read(path: str, version: int | None = None, storage_options: dict | None = None) -> pa.Table:
    """delta-rs's rows of a DV table: through DataFusion (QueryBuilder), which applies the
    vectors; to_pyarrow_table() refuses the deletionVectors reader feature in 1.6.6."""
    dt = DeltaTable(path, version=version, storage_options=storage_options)
    return pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())


# ---------------------------------------------------------------- the model


def model_delete(state: pa.Table, ids) -> pa.Table:
    return state.filter(pc.invert(pc.is_in(state.column("id"), pa.array(list(ids), pa.int64()))))


def model_update(state: pa.Table, ids, **values) -> pa.Table:
    mask = pc.is_in(state.column("id"), pa.array(list(ids), pa.int64()))
    for name, v in values.items():
        i = state.schema.get_field_index(name)
        col = state.column(i)
        state = state.set_column(i, name, pc.if_else(mask, pa.scalar(v, col.type), col))
    return state


def model_merge(state: pa.Table, src: pa.Table, drop: set[int]) -> pa.Table:
    """ON id, WHEN MATCHED AND id in drop THEN DELETE, WHEN MATCHED THEN UPDATE SET *,
    WHEN NOT MATCHED THEN INSERT *."""
    live = set(state.column("id").to_pylist())
    src_ids = src.column("id").to_pylist()
    keep = [not (k in live and k in drop) for k in src_ids]
    return pa.concat_tables([model_delete(state, src_ids), src.filter(pa.array(keep))])


def ids_where(state: pa.Table, pred) -> list[int]:
    return [k for k in state.column("id").to_pylist() if pred(k)]


def with_s(t: pa.Table, values: list) -> pa.Table:
    return t.set_column(t.schema.get_field_index("s"), "s", pa.array(values, pa.string()))


# ---------------------------------------------------------------- ours → theirs


@dataclass
class OursDV:
    """A DV table our writer built: expected rows and change counts per version, and the
    rows each DML commit must mark in vectors of existing files."""

    path: str
    partition_by: list[str]
    versions: dict[int, pa.Table] = field(default_factory=dict)
    changes: Counter = field(default_factory=Counter)
    marked: dict[int, int] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return Path(self.path)

    @property
    def latest(self) -> int:
        return max(self.versions)


def build_ours_dv(tool: DeltaTool, path: str, partition_by: list[str]) -> OursDV:
    b = OursDV(path, partition_by)
    empty = sample_rows(0, 0)

    def commit(v: int, state: pa.Table, marked: int | None = None, **changes: int):
        assert v == b.latest + 1 if b.versions else v == 0, f"version {v} after {sorted(b.versions)}"
        b.versions[v] = state
        if marked is not None:
            b.marked[v] = marked
        for kind, n in changes.items():
            b.changes[(v, kind)] = n
        return state

    s = commit(tool.create(path, empty.schema, partition_by=partition_by, properties=DV_CDF), empty)
    s = commit(tool.append(path, sample_rows(0, 40)), sample_rows(0, 40), insert=40)
    s = commit(tool.append(path, sample_rows(40, 20)), pa.concat_tables([s, sample_rows(40, 20)]), insert=20)

    # DELETE rows of both appends' files: first vectors.
    gone = [1, 2, 17, 23, 44, 58]
    s = commit(tool.delete(path, f"id IN ({', '.join(map(str, gone))})"), model_delete(s, gone), marked=6, delete=6)

    # UPDATE: old rows marked (19, 44 is gone), new versions written to new files.
    upd = ids_where(s, lambda k: 30 <= k <= 49)
    assert len(upd) == 19
    s = commit(tool.update(path, "id BETWEEN 30 AND 49", s="'updated'", l="7"),
               model_update(s, upd, s="updated", l=7), marked=19,
               update_preimage=19, update_postimage=19)

    # MERGE: ids 10..19 match except 17 (deleted above, so inserted again), 12 and 13 are
    # deleted by the clause, 100..104 are new.
    src = pa.concat_tables([sample_rows(10, 10), sample_rows(100, 5)])
    src = with_s(src, ["drop" if k in (12, 13) else "merged" for k in src.column("id").to_pylist()])
    s = commit(tool.merge(path, src, "id", delete_when="source.s = 'drop'"), model_merge(s, src, {12, 13}),
               marked=9, update_preimage=7, update_postimage=7, delete=2, insert=6)

    # DELETE again: 3 and 5 sit in files that have vectors already (the vectors grow), 31
    # and 45 in the UPDATE's new files, 101 in the MERGE's.
    gone = [3, 5, 31, 45, 101]
    s = commit(tool.delete(path, f"id IN ({', '.join(map(str, gone))})"), model_delete(s, gone), marked=5, delete=5)

    # UPDATE rows whose files have vectors already.
    upd = ids_where(s, lambda k: k < 10)
    assert upd == [0, 4, 6, 7, 8, 9]
    s = commit(tool.update(path, "id < 10", s="'again'", flag="true"),
               model_update(s, upd, s="again", flag=True), marked=6,
               update_preimage=6, update_postimage=6)
    return b


@pytest.fixture(scope="module", params=list(LAYOUTS))
def ours_dv(request, deltatool_bin, tmp_path_factory) -> OursDV:
    work = tmp_path_factory.mktemp(f"ours-dv-{request.param}")
    return build_ours_dv(DeltaTool(deltatool_bin, work), str(work / "table"), LAYOUTS[request.param])


def test_our_dml_writes_deletion_vectors(ours_dv):
    """The DV path was really taken: protocol (3,7) with the feature; every DML commit
    re-adds data files that existing adds named, with a "u" vector at offset 1 whose
    file exists, and marks exactly the rows the statement removed or rewrote."""
    d = ours_dv.dir
    assert_dv_feature(d)
    conf = actions_of(d, 0, "metaData")[0]["configuration"]
    assert conf["delta.enableDeletionVectors"] == "true" and conf["delta.enableChangeDataFeed"] == "true"
    added_before: set[str] = set()
    for v in range(ours_dv.latest + 1):
        adds = actions_of(d, v, "add")
        with_dv = [a for a in adds if a.get("deletionVector")]
        if v in ours_dv.marked:
            assert with_dv, f"v{v}: no add has a deletionVector"
            assert marked_rows(d, v) == ours_dv.marked[v], f"v{v}: rows marked in vectors"
            removed = {r["path"] for r in actions_of(d, v, "remove")}
            for a in with_dv:
                dv = a["deletionVector"]
                assert a["path"] in added_before and a["path"] in removed, f"v{v}: {a['path']} is not a re-added file"
                assert dv["storageType"] == "u" and dv["offset"] == 1 and dv["cardinality"] > 0, dv
                assert dv_file(d, dv).is_file(), f"v{v}: {dv_file(d, dv)} missing"
                assert json.loads(a["stats"])["tightBounds"] is False, a["stats"]
            # Changed rows went to cdc files, as without vectors.
            assert actions_of(d, v, "cdc"), f"v{v}: no cdc file"
        else:
            assert not with_dv, f"v{v}: unexpected vectors"
        added_before |= {a["path"] for a in adds}
    n_dv_files = len([n for n in os.listdir(d) if n.startswith("deletion_vector_") and n.endswith(".bin")])
    assert n_dv_files >= len(ours_dv.marked)


def test_our_reader_reads_our_dvs(ours_dv, deltatool):
    assert deltatool.version(ours_dv.path) == ours_dv.latest
    for v, want in ours_dv.versions.items():
        assert_same_rows(deltatool.read(ours_dv.path, version=v), want, what=f"ours v{v}")


def test_spark_reads_our_dvs_every_version(ours_dv, spark):
    """Rows at every version (VERSION AS OF) and the latest; count(*), which Spark may
    answer from the log (numRecords less the vectors' cardinality); and a filter over our
    loosened stats (data skipping must not drop files with vectors wrongly)."""
    for v, want in ours_dv.versions.items():
        assert_same_rows(spark_read(spark, ours_dv.path, version=v), want, what=f"Spark v{v}")
        n = spark.sql(f"SELECT count(*) AS n FROM delta.`{ours_dv.path}` VERSION AS OF {v}").collect()[0]["n"]
        assert n == want.num_rows, f"Spark count(*) v{v}"
    latest = ours_dv.versions[ours_dv.latest]
    assert_same_rows(spark_read(spark, ours_dv.path), latest, what="Spark latest")
    n = spark.sql(f"SELECT count(*) AS n FROM delta.`{ours_dv.path}` WHERE s = 'updated'").collect()[0]["n"]
    assert n == 17, "Spark: rows left with UPDATE's value"  # 30..49 less 44 (v3), 31 and 45 (v6)
    got = spark.sql(f"SELECT id, s FROM delta.`{ours_dv.path}` WHERE id IN (1, 3, 10, 12, 17, 31, 32) ORDER BY id").collect()
    assert [(r["id"], r["s"]) for r in got] == [(10, "merged"), (17, "merged"), (32, "updated")]


def test_delta_rs_reads_our_dvs_every_version(ours_dv):
    assert DeltaTable(ours_dv.path).version() == ours_dv.latest
    for v, want in ours_dv.versions.items():
        assert_same_rows(rs_sql_read(ours_dv.path, v), want, what=f"delta-rs v{v}")


def test_our_dv_change_feed_read_by_spark_and_delta_rs(ours_dv, deltatool, spark):
    """Our feed over the DV commits has exactly the expected change rows, and Spark's
    table_changes and delta-rs's load_cdf return the same, over the whole range and a
    sub-range."""
    ours = deltatool.changes(ours_dv.path, 0)
    assert change_counts(ours) == ours_dv.changes, "our change feed"
    post = ours.filter(pc.equal(ours.column("_change_type"), "update_postimage"))
    assert set(zip(post.column("_commit_version").to_pylist(), post.column("s").to_pylist())) == {
        (4, "updated"), (5, "merged"), (7, "again")}
    assert_same_changes(spark_changes(spark, ours_dv.path, 0), ours, what="Spark table_changes 0..", timestamps=True)
    assert_same_changes(rs_changes(ours_dv.path, 0), ours, what="delta-rs load_cdf 0..", timestamps=False)
    sub = deltatool.changes(ours_dv.path, 3, 6)
    assert set(sub.column("_commit_version").to_pylist()) == {3, 4, 5, 6}
    assert_same_changes(spark_changes(spark, ours_dv.path, 3, 6), sub, what="Spark 3..6", timestamps=True)
    assert_same_changes(rs_changes(ours_dv.path, 3, 6), sub, what="delta-rs 3..6", timestamps=False)


def test_our_checkpoint_carries_dvs(ours_dv, deltatool, spark, tmp_path):
    """On a copy: our checkpoint has the live adds' deletionVector structs (the same
    descriptors as the JSON log); with the commits before it deleted, Spark, delta-rs and
    ours rebuild the latest rows from it, and a DELETE after it (which must load the
    vectors the checkpoint names and extend them) is read right by all three."""
    d = tmp_path / "copy"
    shutil.copytree(ours_dv.dir, d)
    path = str(d)
    cp = deltatool.checkpoint(path)
    assert cp == ours_dv.latest
    cp_file = d / "_delta_log" / f"{cp:020d}.checkpoint.parquet"
    assert cp_file.is_file() and (d / "_delta_log" / "_last_checkpoint").is_file()

    live = live_adds(d, cp)  # what the JSON log says is live
    adds = [a for a in pq.read_table(cp_file, columns=["add"]).column("add").to_pylist() if a is not None]
    assert "deletionVector" in [f.name for f in pq.read_schema(cp_file).field("add").type]

    def norm(dv):
        return None if dv is None else {k: dv[k] for k in ("storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality")}

    got = {unquote(a["path"]): norm(a["deletionVector"]) for a in adds}
    want = {unquote(p): norm(dv) for p, dv in live.items()}
    assert got == want, "checkpoint adds and their vectors"
    assert sum(dv is not None for dv in got.values()) >= 2

    for n in os.listdir(d / "_delta_log"):
        if n.endswith(".json") and int(n.split(".")[0]) < cp:
            os.remove(d / "_delta_log" / n)
    want_rows = ours_dv.versions[cp]
    assert_same_rows(spark_read(spark, path), want_rows, what="Spark from our checkpoint")
    assert_same_rows(rs_sql_read(path), want_rows, what="delta-rs from our checkpoint")
    assert_same_rows(deltatool.read(path), want_rows, what="ours from our checkpoint")

    # 0 and 46 are in files whose vectors the checkpoint holds.
    gone = [0, 46]
    assert deltatool.delete(path, "id IN (0, 46)") == cp + 1
    assert marked_rows(d, cp + 1) == 2
    after = model_delete(want_rows, gone)
    assert_same_rows(spark_read(spark, path), after, what="Spark after a DELETE on our checkpoint")
    assert_same_rows(spark_read(spark, path, version=cp), want_rows, what="Spark at the checkpoint")
    assert_same_rows(rs_sql_read(path), after, what="delta-rs after a DELETE on our checkpoint")
    assert_same_rows(deltatool.read(path), after, what="ours after a DELETE on our checkpoint")
    ours = deltatool.changes(path, cp + 1)
    assert change_counts(ours) == Counter({(cp + 1, "delete"): 2})
    assert_same_changes(spark_changes(spark, path, cp + 1), ours, what="Spark feed after the checkpoint", timestamps=True)


def test_set_property_enables_dvs_read_by_theirs(deltatool, spark, table_dir):
    """A legacy-protocol table (1,2) gets delta.enableDeletionVectors through SET
    TBLPROPERTIES: the protocol moves to (3,7) with the feature, the next DELETE and
    UPDATE write vectors, and Spark and delta-rs read every version."""
    path = str(table_dir)
    rows = sample_rows(0, 30, ntz=False)
    assert deltatool.write(path, rows) == 1
    p = protocol_of(table_dir)
    assert (p["minReaderVersion"], p["minWriterVersion"]) == (1, 2), p
    want = {0: rows.slice(0, 0), 1: rows}
    assert deltatool.set_properties(path, {"delta.enableDeletionVectors": "true"}) == 2
    assert_dv_feature(table_dir)
    want[2] = rows
    assert deltatool.delete(path, "id IN (4, 9, 21)") == 3
    want[3] = model_delete(want[2], [4, 9, 21])
    assert marked_rows(table_dir, 3) == 3
    assert deltatool.update(path, "id >= 25", s="'late'") == 4
    want[4] = model_update(want[3], range(25, 30), s="late")
    assert marked_rows(table_dir, 4) == 5
    for v, rows_v in want.items():
        assert_same_rows(deltatool.read(path, version=v), rows_v, what=f"ours v{v}")
        assert_same_rows(spark_read(spark, path, version=v), rows_v, what=f"Spark v{v}")
    assert_same_rows(rs_sql_read(path), want[4], what="delta-rs latest")
    assert_same_rows(rs_sql_read(path, 1), want[1], what="delta-rs v1 (before the upgrade)")


def test_restore_vacuum_overwrite_with_our_dvs(deltatool, spark, table_dir):
    """DML that empties a file with a vector (remove only), RESTORE to a version where a
    file had another vector (the same path re-added with the older vector), VACUUM RETAIN
    0 (keeps exactly the live vectors' files) and an overwrite of files with vectors (no
    cdc files: the feed comes from the removes, less their deleted rows). Spark, delta-rs
    and ours read the rows; Spark's feed equals ours."""
    path = str(table_dir)
    base = sample_rows(0, 20)
    assert deltatool.create(path, base.schema, partition_by=["part"], properties=DV_CDF) == 0
    assert deltatool.append(path, base) == 1
    assert deltatool.delete(path, "id IN (1, 2, 3)") == 2
    v2 = model_delete(base, [1, 2, 3])
    assert deltatool.update(path, "id IN (5, 6)", s="'u'") == 3
    # Partition b holds 1, 5, 9, 13, 17: 1 is deleted and 5 updated elsewhere, so this
    # DELETE leaves its file no row and only removes it.
    assert deltatool.delete(path, "id IN (9, 13, 17)") == 4
    (gone,) = [r for r in actions_of(table_dir, 4, "remove") if r["path"].startswith("part=b/")]
    assert gone["deletionVector"]["cardinality"] == 2
    assert not [a for a in actions_of(table_dir, 4, "add") if a["path"] == gone["path"]]

    assert deltatool.restore(path, 2) == 5
    at2, at5 = live_adds(table_dir, 2), live_adds(table_dir, 5)
    assert at5 == at2, "RESTORE brings back version 2's files with version 2's vectors"
    readded = {a["path"]: a["deletionVector"] for a in actions_of(table_dir, 5, "add")}
    replaced = {r["path"]: r.get("deletionVector") for r in actions_of(table_dir, 5, "remove")}
    assert any(p in replaced and replaced[p] and replaced[p] != dv for p, dv in readded.items()), (
        "no file re-added with an older vector")
    for what, rows in (("ours", deltatool.read(path)), ("Spark", spark_read(spark, path)), ("delta-rs", rs_sql_read(path))):
        assert_same_rows(rows, v2, what=f"{what} after RESTORE")
    ours = deltatool.changes(path, 0)
    # RESTORE's feed: the UPDATE's rows go, and only the rows the older vectors keep and
    # the newer ones deleted come back (b's 5, 9, 13, 17; c d's 6).
    assert change_counts(ours) == Counter({
        (1, "insert"): 20, (2, "delete"): 3, (3, "update_preimage"): 2, (3, "update_postimage"): 2,
        (4, "delete"): 3, (5, "delete"): 2, (5, "insert"): 5})
    assert_same_changes(spark_changes(spark, path, 0), ours, what="Spark feed through RESTORE", timestamps=True)

    res = deltatool.vacuum(path, retain="0s", force=True)
    assert any(f.startswith("deletion_vector_") for f in res["filesDeleted"]), res
    on_disk = {n for n in os.listdir(table_dir) if n.startswith("deletion_vector_")}
    assert on_disk == {dv_file(table_dir, dv).name for dv in at5.values() if dv}, "VACUUM: DV files left"
    assert on_disk, "no live vector"
    after_vacuum = deltatool.version(path)
    assert after_vacuum == 7
    assert_same_rows(spark_read(spark, path), v2, what="Spark after VACUUM")
    assert_same_rows(spark_read(spark, path, version=2), v2, what="Spark v2 after VACUUM")
    assert_same_rows(rs_sql_read(path), v2, what="delta-rs after VACUUM")
    assert_same_rows(deltatool.read(path, version=5), v2, what="ours v5 after VACUUM")

    new = sample_rows(100, 4)
    assert deltatool.write(path, new, mode="overwrite") == 8
    assert_same_rows(spark_read(spark, path), new, what="Spark after overwrite")
    ours = deltatool.changes(path, 8)
    assert change_counts(ours) == Counter({(8, "delete"): v2.num_rows, (8, "insert"): 4})
    assert sorted(ours.filter(pc.equal(ours.column("_change_type"), "delete")).column("id").to_pylist()) == sorted(
        v2.column("id").to_pylist())
    assert_same_changes(spark_changes(spark, path, 8), ours, what="Spark feed of the overwrite", timestamps=True)
    # Not compared: delta-rs's load_cdf here. deltalake 1.6.6 applies a remove's vector
    # inverted in commits without cdc files (it returns the rows the vector deleted, not
    # the others), on tables Spark writes too: DELETE id IN (1, 2, 3) then an overwrite
    # gives delete rows 1, 2, 3 where Spark gives 0, 4..9.


def s3_fs(s3):
    from pyarrow import fs

    scheme, host = s3.endpoint.split("://", 1)
    return fs.S3FileSystem(access_key=s3.access_key, secret_key=s3.secret_key, endpoint_override=host,
                           scheme=scheme, region="us-east-1")


def test_our_dvs_on_minio(deltatool, s3):
    """The same DML on MinIO (vectors written to and read from the bucket with range
    reads): delta-rs reads every version from the bucket, and its feed equals ours."""
    url = s3.url("dv")
    tool = deltatool.with_env(s3.deltatool_env)
    assert tool.create(url, sample_rows(0, 0).schema, partition_by=["part"], properties=DV_CDF) == 0
    want = {0: sample_rows(0, 0), 1: sample_rows(0, 20)}
    assert tool.append(url, sample_rows(0, 20)) == 1
    assert tool.delete(url, "id IN (3, 8, 15)") == 2
    want[2] = model_delete(want[1], [3, 8, 15])
    assert tool.update(url, "id < 6", s="'updated'") == 3
    want[3] = model_update(want[2], [0, 1, 2, 4, 5], s="updated")
    assert tool.delete(url, "id IN (1, 12)") == 4  # 1 in the UPDATE's new files, 12 in a vector's file
    want[4] = model_delete(want[3], [1, 12])
    opts = s3.delta_rs_options
    for v, rows in want.items():
        assert_same_rows(tool.read(url, version=v), rows, what=f"ours on MinIO v{v}")
        assert_same_rows(rs_sql_read(url, v, opts), rows, what=f"delta-rs on MinIO v{v}")
    # The DV path on the bucket: the commits' adds carry "u" vectors whose files exist.
    fs, prefix = s3_fs(s3), f"{s3.bucket}/{s3.prefix}/dv"
    for v, n in ((2, 3), (3, 5), (4, 2)):
        with fs.open_input_stream(f"{prefix}/_delta_log/{v:020d}.json") as f:
            actions = [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]
        before = {a["remove"]["path"]: (a["remove"].get("deletionVector") or {}).get("cardinality", 0)
                  for a in actions if "remove" in a}
        dvs = [(a["add"]["path"], a["add"]["deletionVector"]) for a in actions if a.get("add", {}).get("deletionVector")]
        assert sum(dv["cardinality"] - before.get(p, 0) for p, dv in dvs) == n, f"MinIO v{v}: rows marked"
        for _, dv in dvs:
            name = dv_file(Path(prefix), dv).name
            assert fs.get_file_info(f"{prefix}/{name}").size > 0, f"MinIO v{v}: {name} missing"
    ours = tool.changes(url, 0)
    assert change_counts(ours) == Counter({(1, "insert"): 20, (2, "delete"): 3, (3, "update_preimage"): 5,
                                           (3, "update_postimage"): 5, (4, "delete"): 2})
    assert_same_changes(rs_changes(url, 0, storage_options=opts), ours, what="delta-rs load_cdf on MinIO", timestamps=False)


# ---------------------------------------------------------------- theirs → ours


def test_spark_dvs_read_by_ours(spark, deltatool, table_dir):
    """Spark's DELETE, UPDATE and MERGE on a DV table (partitioned, every type, CDF,
    checkpoints every 2 commits) write vectors; ours reads every version with Spark's
    rows and our feed equals Spark's. Then our DELETE on Spark's vectors: Spark's deleted
    rows stay deleted, and Spark reads our commit and feed."""
    path = str(table_dir)
    schema = sample_rows(0, 0).schema
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({spark_ddl(schema)}) USING delta PARTITIONED BY (part) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableChangeDataFeed' = 'true', "
        "'delta.checkpointInterval' = '2')"
    )  # v0
    spark_frame(spark, sample_rows(0, 40)).write.format("delta").mode("append").save(path)  # v1
    spark_frame(spark, sample_rows(40, 20)).write.format("delta").mode("append").save(path)  # v2
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (1, 2, 17, 23, 44, 58)")  # v3
    spark.sql(f"UPDATE delta.`{path}` SET s = 'updated', l = l + 1 WHERE id % 3 = 0")  # v4
    spark_frame(spark, pa.concat_tables([sample_rows(30, 20), sample_rows(300, 4)])).createOrReplaceTempView("dv_merge_src")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING dv_merge_src s ON t.id = s.id "
        "WHEN MATCHED AND s.id % 5 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.s = 'merged', t.i = s.i "
        "WHEN NOT MATCHED THEN INSERT *"
    )  # v5
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (4, 5, 7, 301)")  # v6: vectors grow
    spark_frame(spark, sample_rows(200, 5)).write.format("delta").mode("append").save(path)  # v7

    assert_dv_feature(table_dir)
    for v in (3, 4, 5, 6):
        assert any(a.get("deletionVector") for a in actions_of(table_dir, v, "add")), f"Spark v{v} wrote no vector"
    assert marked_rows(table_dir, 3) == 6
    log = table_dir / "_delta_log"
    for v in (2, 4, 6):
        assert (log / f"{v:020d}.checkpoint.parquet").exists(), f"Spark wrote no checkpoint at {v}"
    cp_adds = pq.read_table(log / f"{6:020d}.checkpoint.parquet", columns=["add"]).column("add").to_pylist()
    assert any(a and a.get("deletionVector") for a in cp_adds), "Spark's checkpoint 6 has no vector"

    latest = 7
    assert deltatool.version(path) == latest
    spark_rows = {}
    for v in range(latest + 1):
        spark_rows[v] = spark_read(spark, path, version=v)
        assert_same_rows(deltatool.read(path, version=v), spark_rows[v], what=f"ours over Spark v{v}")
    # Spark's own result, so that both engines agreeing on wrong rows would fail too.
    ids = set(spark_rows[latest].column("id").to_pylist())
    # 44, deleted at v3, is not matched by the MERGE and so inserted again.
    assert ids == (set(range(60)) - {1, 2, 17, 23, 58, 30, 35, 40, 45, 4, 5, 7}) | {300, 302, 303} | set(range(200, 205))

    want = spark_changes(spark, path, 0)
    kinds = set(zip(want.column("_commit_version").to_pylist(), want.column("_change_type").to_pylist()))
    assert {(3, "delete"), (4, "update_postimage"), (5, "delete"), (5, "update_preimage"), (5, "insert"), (6, "delete")} <= kinds
    assert_same_changes(deltatool.changes(path, 0), want, what="ours over Spark's feed 0..", timestamps=True)
    assert_same_changes(deltatool.changes(path, 3, 6), spark_changes(spark, path, 3, 6),
                        what="ours over Spark's feed 3..6", timestamps=True)

    # Our DELETE on files with Spark's vectors: 8 and 10 sit in v1's files (8 next to
    # Spark's deleted 4), 52 in a v2 file, 0 in Spark's UPDATE files, 41 in its MERGE's.
    gone = {0, 8, 10, 41, 52}
    assert deltatool.delete(path, "id IN (0, 8, 10, 41, 52)") == latest + 1
    assert marked_rows(table_dir, latest + 1) == 5
    ours_after = deltatool.read(path)
    assert set(ours_after.column("id").to_pylist()) == ids - gone
    assert_same_rows(spark_read(spark, path), ours_after, what="Spark after our DELETE on its vectors")
    assert_same_rows(spark_read(spark, path, version=latest), spark_rows[latest], what="Spark time travel")
    ours_feed = deltatool.changes(path, latest + 1)
    assert change_counts(ours_feed) == Counter({(latest + 1, "delete"): 5})
    assert_same_changes(spark_changes(spark, path, latest + 1), ours_feed, what="Spark over our delete", timestamps=True)
