"""Schema evolution with column mapping and type widening, both ways:

- ours → theirs: tables our writer evolves (columns added, widened, renamed, dropped and a
  dropped name added again; column mapping name and id; MERGE, UPDATE, DELETE between the
  changes; a checkpoint) read by Spark at every version with our answers and with the
  answers of a model written here, their change feeds version by version with ours; by
  delta-rs where it reads them: tables without column mapping with columns added (it
  refuses the typeWidening feature, naming it), not column-mapped tables, whose data
  columns deltalake 1.6.6 reads as NULL, Spark's as well as ours (a strict xfail);
- theirs → ours: tables Spark evolves with ALTER TABLE ADD COLUMNS / RENAME COLUMN /
  DROP COLUMN / ALTER COLUMN TYPE (delta.enableTypeWidening) read by us at every version
  with Spark's answers, including their change feeds: version by version in each version's
  own schema, and over the whole range across the renames and drops, which Spark refuses
  to read as one range and we read exactly (Spark's per-version rows carried to the newest
  schema by column mapping id);
- one seed of delta's property test (random schema and data changes against a model) read
  by Spark at every version with the model's answers, and its change feeds with ours;
- Spark's checkpoints with stats only as structs (stats_parsed, by physical names) prune
  our scans and read exactly.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from support import DeltaToolError, assert_same_rows, canonical, rs_read, spark_read
from test_cdf_dml import assert_same_changes, spark_changes

D = decimal.Decimal

# ---------------------------------------------------------------- the log, read here


def log_schemas(path: str) -> dict[int, list[dict]]:
    """The schema (top-level fields as in schemaString) of every version, from the JSON log."""
    log = Path(path) / "_delta_log"
    out, cur = {}, None
    versions = sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())
    for v in versions:
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            a = json.loads(line)
            if "metaData" in a:
                cur = json.loads(a["metaData"]["schemaString"])["fields"]
        out[v] = cur
    return out


def field_key(f: dict) -> str:
    """What identifies a column across renames: its column mapping id (else its physical name)."""
    md = f.get("metadata", {})
    return str(md.get("delta.columnMapping.id", md.get("delta.columnMapping.physicalName", f["name"])))


def to_schema(t: pa.Table, own: list[dict], end: list[dict], end_types: pa.Schema) -> pa.Table:
    """Rows read in a version's own schema carried to the end version's: columns renamed by
    their ids, dropped ones left out, ones added since NULL, narrower types widened."""
    by_key = {field_key(f): f["name"] for f in own}
    cols, names = [], []
    for f in end:
        name = f["name"]
        typ = end_types.field(name).type
        old = by_key.get(field_key(f))
        cols.append(t.column(old).cast(typ) if old is not None else pa.nulls(t.num_rows, typ))
        names.append(name)
    for c in ("_change_type", "_commit_version", "_commit_timestamp"):
        if c in t.column_names:
            cols.append(t.column(c))
            names.append(c)
    return pa.Table.from_arrays(cols, names=names)


# ---------------------------------------------------------------- ours → theirs

BASE = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("qty", pa.int32()),
    pa.field("amount", pa.decimal128(10, 2)),
    pa.field("d", pa.date32()),
    pa.field("part", pa.string()),
])


class Model:
    """What every version of the evolved table holds: its columns (name → Arrow type, in
    order) and its rows (id → row)."""

    def __init__(self, schema: pa.Schema):
        self.types = {f.name: f.type for f in schema}
        self.rows: dict[int, dict] = {}
        self.versions: dict[int, pa.Table] = {}

    def table(self) -> pa.Table:
        rows = [self.rows[k] for k in sorted(self.rows)]
        return pa.table({n: pa.array([r.get(n) for r in rows], t) for n, t in self.types.items()})

    def data(self, rows: list[dict]) -> pa.Table:
        """rows in the current schema (missing columns NULL)."""
        return pa.table({n: pa.array([r.get(n) for r in rows], t) for n, t in self.types.items()})

    def put(self, rows: list[dict]):
        for r in rows:
            self.rows[r["id"]] = {n: r.get(n) for n in self.types}

    def add(self, name: str, typ: pa.DataType):
        self.types[name] = typ
        for r in self.rows.values():
            r[name] = None

    def widen(self, name: str, typ: pa.DataType, conv=lambda x: x):
        self.types[name] = typ
        for r in self.rows.values():
            if r[name] is not None:
                r[name] = conv(r[name])

    def rename(self, old: str, new: str):
        self.types = {new if n == old else n: t for n, t in self.types.items()}
        for r in self.rows.values():
            r[new] = r.pop(old)

    def drop(self, name: str):
        del self.types[name]
        for r in self.rows.values():
            del r[name]

    def at(self, v: int):
        self.versions[v] = self.table()


def row(i: int, **kw) -> dict:
    base = {"id": i, "name": f"n{i}", "qty": i * 10, "amount": D(f"{i}.25"), "d": dt.date(2024, 1, i),
            "part": ["a", "b", None][i % 3]}
    base.update(kw)
    return base


def evolve_ours(deltatool, path: str, mode: str) -> Model:
    """Builds our evolved table (versions 0..12) and returns its model."""
    m = Model(BASE)
    props = {"delta.columnMapping.mode": mode, "delta.enableChangeDataFeed": "true", "delta.checkpointInterval": "100"}
    assert deltatool.create(path, BASE, partition_by=["part"], properties=props) == 0
    m.at(0)
    rows = [row(i) for i in range(1, 5)]
    assert deltatool.write(path, m.data(rows)) == 1
    m.put(rows)
    m.at(1)
    assert deltatool.alter(path, add=[("channel", "string")]) == 2  # ADD COLUMNS
    m.add("channel", pa.string())
    m.at(2)
    rows = [row(5, channel="web"), row(6, channel=None)]
    assert deltatool.write(path, m.data(rows)) == 3
    m.put(rows)
    m.at(3)
    # CHANGE COLUMN: integer → long, decimal(10,2) → decimal(14,2), date → timestamp_ntz
    assert deltatool.alter(path, widen=[("qty", "long"), ("amount", "decimal(14,2)"), ("d", "timestamp_ntz")]) == 4
    m.widen("qty", pa.int64())
    m.widen("amount", pa.decimal128(14, 2))
    m.widen("d", pa.timestamp("us"), lambda x: dt.datetime(x.year, x.month, x.day))
    m.at(4)
    rows = [row(7, qty=5_000_000_000, amount=D("123456789012.34"), d=dt.datetime(2025, 5, 6, 7, 8, 9), channel="shop"),
            row(8, d=dt.datetime(2025, 1, 1), channel="web")]
    assert deltatool.write(path, m.data(rows)) == 5
    m.put(rows)
    m.at(5)
    assert deltatool.alter(path, rename=[("name", "full_name")]) == 6  # RENAME COLUMN
    m.rename("name", "full_name")
    m.at(6)
    src = [dict(m.rows[1], full_name="merged", channel="shop"), row(9, full_name="new", d=dt.datetime(2025, 2, 2), channel="app")]
    src[1].pop("name")
    assert deltatool.merge(path, m.data(src), "id") == 7
    m.put(src)
    m.at(7)
    assert deltatool.alter(path, drop=["channel"]) == 8  # DROP COLUMNS
    m.drop("channel")
    m.at(8)
    assert deltatool.delete(path, "id = 2") == 9
    del m.rows[2]
    m.at(9)
    assert deltatool.update(path, "id = 3", qty="0") == 10
    m.rows[3]["qty"] = 0
    m.at(10)
    assert deltatool.alter(path, add=[("channel", "string")]) == 11  # another column of the dropped one's name
    m.add("channel", pa.string())
    m.at(11)
    rows = [row(10, full_name="ten", d=dt.datetime(2025, 3, 3), qty=1, channel="mail")]
    rows[0].pop("name")
    assert deltatool.write(path, m.data(rows)) == 12
    m.put(rows)
    m.at(12)
    assert deltatool.checkpoint(path) == 12
    return m


@pytest.mark.parametrize("mode", ["name", "id"])
def test_spark_reads_our_evolved_table(deltatool, spark, table_dir, mode):
    path = str(table_dir)
    m = evolve_ours(deltatool, path, mode)
    schemas = log_schemas(path)
    # Files name their columns physically: no data file holds a column called "name".
    assert all(f["metadata"]["delta.columnMapping.physicalName"] != "full_name" for f in schemas[12])
    ops = [h["operation"] for h in deltatool.history(path)]
    assert ops[2] == "ADD COLUMNS" and ops[4] == "CHANGE COLUMN" and ops[6] == "RENAME COLUMN" and ops[8] == "DROP COLUMNS", ops
    for v, want in m.versions.items():
        ours = deltatool.read(path, version=v)
        assert_same_rows(ours, want, what=f"ours, version {v}")
        assert_same_rows(spark_read(spark, path, version=v), want, what=f"Spark, version {v}")
    # Each version's change feed, in its own schema, as Spark reads it.
    theirs = {v: spark_changes(spark, path, v, v) for v in range(1, 13)}
    for v in range(1, 13):
        assert_same_changes(deltatool.changes(path, v, v), theirs[v], what=f"change feed of version {v}", timestamps=True)
    # The whole feed in the newest schema: Spark's per-version rows carried over by id.
    whole = deltatool.changes(path, 0)
    want = pa.concat_tables([to_schema(theirs[v], schemas[v], schemas[12], whole.schema) for v in range(1, 13)])
    assert_same_changes(whole, want, what="change feed 0..12 in the newest schema", timestamps=True)
    # The re-added channel is another column: the dropped one's values never come back.
    assert {r["channel"] for r in whole.to_pylist()} == {None, "mail"}


def test_delta_rs_reads_our_evolved_table_without_mapping(deltatool, table_dir):
    """delta-rs (deltalake 1.6.6) reads a table we evolved without column mapping at every
    version with columns added; from the widening on it refuses the table, naming the
    typeWidening reader feature (never a wrong answer)."""
    path = str(table_dir)
    m = Model(pa.schema([f for f in BASE if f.name != "part"]))
    assert deltatool.write(path, m.data([row(1), row(2)])) == 1  # v0 CREATE TABLE, v1 WRITE
    m.versions[0] = m.data([])
    m.put([row(1), row(2)])
    m.at(1)
    assert deltatool.alter(path, add=[("channel", "string")]) == 2
    m.add("channel", pa.string())
    m.at(2)
    assert deltatool.write(path, m.data([row(3, channel="web")])) == 3
    m.put([row(3, channel="web")])
    m.at(3)
    assert deltatool.alter(path, widen=[("qty", "long")]) == 4
    for v, want in m.versions.items():
        assert_same_rows(rs_read(path, version=v), want, what=f"delta-rs, version {v}")
    with pytest.raises(Exception, match="typeWidening"):
        rs_read(path, version=4)


@pytest.mark.xfail(strict=True, reason="deltalake 1.6.6 reads column-mapped tables, Spark's as well as ours, "
                   "with every data column NULL (delta-io/delta-rs#930: no column mapping support)")
@pytest.mark.parametrize("mode", ["name", "id"])
def test_delta_rs_reads_our_column_mapped_table(deltatool, table_dir, mode):
    """Strict: this starts failing, and says so, on the day delta-rs reads them."""
    path = str(table_dir)
    m = Model(BASE)
    assert deltatool.create(path, BASE, partition_by=["part"], properties={"delta.columnMapping.mode": mode}) == 0
    assert deltatool.write(path, m.data([row(1), row(2)])) == 1
    m.put([row(1), row(2)])
    assert_same_rows(rs_read(path), m.table(), what="delta-rs")


# ---------------------------------------------------------------- theirs → ours


def spark_evolve(spark, path: str, mode: str, *, struct_stats: bool = False) -> int:
    """Spark evolves a partitioned table with change data feed, deletion vectors and type
    widening; returns its last version."""
    props = {
        "delta.columnMapping.mode": mode,
        "delta.enableChangeDataFeed": "true",
        "delta.enableTypeWidening": "true",
        "delta.enableDeletionVectors": "true",
        "delta.feature.timestampNtz": "supported",  # for ALTER COLUMN d TYPE TIMESTAMP_NTZ
        "delta.checkpointInterval": "3",
    }
    if struct_stats:
        props.update({"delta.checkpoint.writeStatsAsJson": "false", "delta.checkpoint.writeStatsAsStruct": "true"})
    tp = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    t = f"delta.`{path}`"
    stmts = [
        f"CREATE TABLE {t} (id BIGINT, name STRING, qty INT, amount DECIMAL(10,2), d DATE, part STRING) "
        f"USING delta PARTITIONED BY (part) TBLPROPERTIES ({tp})",
        f"INSERT INTO {t} VALUES (1, 'a', 10, 1.25, DATE'2024-01-01', 'x'), (2, 'b', 20, 2.50, DATE'2024-01-02', 'y'),"
        " (3, 'c', NULL, NULL, NULL, NULL), (4, 'd', 40, 4.00, DATE'2024-01-04', 'x')",
        f"ALTER TABLE {t} ADD COLUMNS (channel STRING)",
        f"INSERT INTO {t} VALUES (5, 'e', 50, 5.50, DATE'2024-01-05', 'y', 'web')",
        f"ALTER TABLE {t} ALTER COLUMN qty TYPE BIGINT",
        f"ALTER TABLE {t} ALTER COLUMN amount TYPE DECIMAL(14,2)",
        f"ALTER TABLE {t} ALTER COLUMN d TYPE TIMESTAMP_NTZ",
        f"INSERT INTO {t} VALUES (6, 'f', 6000000000, 123456789012.34, TIMESTAMP_NTZ'2025-05-06 07:08:09', 'x', 'shop')",
        f"ALTER TABLE {t} RENAME COLUMN name TO full_name",
        f"UPDATE {t} SET full_name = 'updated', qty = qty + 1 WHERE id IN (1, 6)",
        f"ALTER TABLE {t} DROP COLUMN channel",
        f"DELETE FROM {t} WHERE id = 2",
        f"MERGE INTO {t} t USING (SELECT * FROM VALUES (4, 'merged', 44), (7, 'g', 70) AS s0(id, full_name, qty)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.full_name = s.full_name, t.qty = s.qty "
        "WHEN NOT MATCHED THEN INSERT (id, full_name, qty, part) VALUES (s.id, s.full_name, s.qty, 'y')",
        f"ALTER TABLE {t} ADD COLUMNS (channel STRING)",
        f"INSERT INTO {t} (id, full_name, qty, amount, d, part, channel) VALUES "
        "(8, 'h', 80, 8.00, TIMESTAMP_NTZ'2025-08-08 00:00:00', 'x', 'mail')",
        f"ALTER TABLE {t} RENAME COLUMN full_name TO label",
    ]
    for s in stmts:
        spark.sql(s)
    return len(stmts) - 1


@pytest.mark.parametrize("mode", ["name", "id"])
def test_we_read_spark_evolved_table(deltatool, spark, table_dir, mode):
    path = str(table_dir)
    last = spark_evolve(spark, path, mode)
    hist = {h["version"]: h["operation"] for h in deltatool.history(path)}
    assert [hist[v] for v in (2, 4, 8, 10, 13, 15)] == [
        "ADD COLUMNS", "CHANGE COLUMN", "RENAME COLUMN", "DROP COLUMNS", "ADD COLUMNS", "RENAME COLUMN"], hist
    assert deltatool.version(path) == last
    for v in range(last + 1):
        assert_same_rows(deltatool.read(path, version=v), spark_read(spark, path, version=v), what=f"version {v}")
    schemas = log_schemas(path)
    theirs = {v: spark_changes(spark, path, v, v) for v in range(1, last + 1)}
    for v in range(1, last + 1):
        assert_same_changes(deltatool.changes(path, v, v), theirs[v], what=f"change feed of version {v}", timestamps=True)
    # The whole range: Spark refuses to read it as one (a rename and a drop lie inside);
    # ours equals Spark's versions carried to the newest schema by id.
    whole = deltatool.changes(path, 1)
    want = pa.concat_tables([to_schema(theirs[v], schemas[v], schemas[last], whole.schema) for v in range(1, last + 1)])
    assert_same_changes(whole, want, what=f"change feed 1..{last} in the newest schema", timestamps=True)
    # Spark refuses the range (the executor's checkFeedRanges relies on it: a change to
    # this answer means the Spark engine may read such feeds itself).
    with pytest.raises(Exception, match="DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_(SCHEMA_CHANGE|DATA_SCHEMA)"):
        spark_changes(spark, path, 1, last).num_rows
    # The renamed label holds the values written as name and full_name, never NULL.
    labels = {r["id"]: r["label"] for r in deltatool.read(path).to_pylist()}
    assert labels == {1: "updated", 3: "c", 4: "merged", 5: "e", 6: "updated", 7: "g", 8: "h"}, labels


def test_spark_struct_stats_checkpoint_prunes_our_scan(deltatool, spark, table_dir):
    """Spark's checkpoints that carry stats only as stats_parsed (keyed by physical names, as
    are partitionValues and partitionValues_parsed) prune our scans by the renamed and the
    widened columns and read exactly."""
    path = str(table_dir)
    last = spark_evolve(spark, path, "name", struct_stats=True)
    cps = sorted(p.name for p in (table_dir / "_delta_log").glob("*.checkpoint.parquet"))
    assert cps, "Spark wrote no checkpoint"
    import pyarrow.parquet as pq

    cp = pq.read_table(table_dir / "_delta_log" / cps[-1])
    add = cp.column("add").combine_chunks()
    assert "stats_parsed" in [f.name for f in add.type] and "stats" not in [f.name for f in add.type], add.type
    for where, sql in (("qty > 5000000000", "qty > 5000000000"), ("label = 'h'", "label = 'h'"), ("part = 'x'", "part = 'x'")):
        got, counts = deltatool.read_where(path, where)
        want = spark.read.format("delta").load(path).where(sql).toArrow()
        assert_same_rows(got, want, what=where)
        assert counts["filesPruned"] > 0, f"{where}: {counts}"
    assert_same_rows(deltatool.read(path), spark_read(spark, path), what="latest")
    assert last >= 3


def test_spark_reads_our_table_with_mapping_turned_on(deltatool, spark, table_dir):
    """A table created without column mapping, filled, then turned to mode name (as ALTER
    TABLE SET TBLPROPERTIES does: columns keep their names as physical names), renamed and
    evolved: Spark reads every version with our answers, and appends of its own that we
    read back."""
    path = str(table_dir)
    m = Model(BASE)
    rows = [row(i) for i in range(1, 4)]
    assert deltatool.write(path, m.data(rows), partition_by=["part"]) == 1  # v0 CREATE TABLE, v1 WRITE
    m.at(0)
    m.put(rows)
    m.at(1)
    assert deltatool.alter(path, mapping="name", rename=[("name", "full_name")]) == 2
    m.rename("name", "full_name")
    m.at(2)
    assert deltatool.alter(path, drop=["amount"]) == 3
    m.drop("amount")
    m.at(3)
    for v, want in m.versions.items():
        assert_same_rows(spark_read(spark, path, version=v), want, what=f"Spark, version {v}")
    spark.sql(f"INSERT INTO delta.`{path}` (id, full_name, qty, d, part) VALUES (9, 'spark', 90, DATE'2024-02-02', 'b')")
    m.put([{"id": 9, "full_name": "spark", "qty": 90, "d": dt.date(2024, 2, 2), "part": "b"}])
    assert_same_rows(deltatool.read(path), m.table(), what="ours after Spark's insert")
    assert_same_rows(spark_read(spark, path), m.table(), what="Spark after its insert")


def test_we_refuse_a_rename_without_column_mapping(deltatool, table_dir):
    path = str(table_dir)
    deltatool.write(path, Model(BASE).data([row(1)]))
    with pytest.raises(DeltaToolError, match="delta.columnMapping.mode"):
        deltatool.alter(path, rename=[("name", "full_name")])
    with pytest.raises(DeltaToolError, match="column mapping"):
        deltatool.alter(path, drop=["name"])


REPO = Path(__file__).resolve().parent.parent


def test_spark_reads_a_property_test_table(deltatool, spark, tmp_path):
    """Seed 3 of delta's TestEvolutionProperty (partitioned, change data feed, column mapping
    turned on midway, columns added, widened, renamed and dropped between appends, MERGEs
    and DELETEs, checkpoints every 5 commits): Spark reads every version with the model's
    rows, and every version's change feed with ours."""
    env = {**os.environ, "ORCH_EVOLVE_DIR": str(tmp_path), "ORCH_EVOLVE_SEED": "3"}
    proc = subprocess.run(["go", "test", "-count=1", "-run", "TestEvolutionPropertyToDir$", "./delta"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    model = json.loads((tmp_path / "model.json").read_text())
    log = " ".join(model["log"])
    for op in ("rename", "drop", "widen", "column mapping on", "merge", "delete", "enableChangeDataFeed"):
        assert op in log, f"seed 3 no longer has {op}: {log}"
    path = str(tmp_path / "t")
    versions = {int(v): m for v, m in model["versions"].items()}
    assert sorted(versions) == list(range(len(versions)))
    for v, m in sorted(versions.items()):
        got = spark_read(spark, path, version=v)
        assert sorted(got.column_names) == sorted(m["columns"]), f"version {v}: columns {got.column_names}, want {m['columns']}"
        rows = sorted(got.to_pylist(), key=lambda r: r["k"])
        want = sorted(m["rows"] or [], key=lambda r: r["k"])
        assert rows == want, f"version {v} ({model['log'][v] if v < len(model['log']) else ''}):\n{rows}\nwant\n{want}"
    def keyed(t: pa.Table) -> pa.Table:  # assert_same_changes orders rows by id
        return t.rename_columns(["id" if c == "k" else c for c in t.column_names])

    data_versions = [i + 1 for i, line in enumerate(model["log"][1:]) if line.split()[1] in ("append", "merge", "delete")]
    assert data_versions and all(model["log"][v].startswith(f"v{v} ") for v in data_versions)
    for v in data_versions:  # (a schema change's feed is empty: the Go test checks that)
        assert_same_changes(keyed(deltatool.changes(path, v, v)), keyed(spark_changes(spark, path, v, v)),
                            what=f"change feed of version {v}", timestamps=True)
