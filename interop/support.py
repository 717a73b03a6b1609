"""Shared helpers for the interoperability suite: sample data, the deltatool wrapper and
row comparison that is exact about values but tolerant of the Arrow encodings different
engines pick for the same Delta type (string vs large_string, list vs large_list, ...)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

UTC = dt.timezone.utc

# Every Delta type the writer supports (issue 3, point 4), with its Arrow spelling as
# delta.ArrowSchema produces it.
ALL_TYPES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("s", pa.string()),
        pa.field("l", pa.int64()),
        pa.field("i", pa.int32()),
        pa.field("sh", pa.int16()),
        pa.field("by", pa.int8()),
        pa.field("d", pa.float64()),
        pa.field("f", pa.float32()),
        pa.field("flag", pa.bool_()),
        pa.field("bin", pa.binary()),
        pa.field("dt", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ntz", pa.timestamp("us")),
        pa.field("dec_small", pa.decimal128(10, 2)),
        pa.field("dec_big", pa.decimal128(38, 9)),
        pa.field("st", pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])),
        pa.field("arr", pa.list_(pa.field("element", pa.int64()))),
        pa.field("m", pa.map_(pa.string(), pa.int32())),
        pa.field("part", pa.string()),
    ]
)

# The same without timestamp_ntz, for tables that must stay on the legacy protocol.
LEGACY_TYPES_SCHEMA = pa.schema([f for f in ALL_TYPES_SCHEMA if f.name != "ntz"])

_STRINGS = ["alpha", "", "ünïcödé ✓", "with space", "x" * 40, "quote\"and,comma", "Zz"]
_PARTS = ["a", "b", "c d", None]


def _null(row: int, col: int) -> bool:
    """Deterministic null pattern: each nullable column is null on a different fifth of rows."""
    return (row + col) % 5 == 0


def sample_rows(start: int, count: int, *, parts=_PARTS, ntz: bool = True) -> pa.Table:
    """count rows with ids start..start+count-1 covering every type, edge values and nulls."""
    schema = ALL_TYPES_SCHEMA if ntz else LEGACY_TYPES_SCHEMA
    cols: dict[str, list] = {f.name: [] for f in schema}
    for k in range(start, start + count):
        vals = {
            "id": k,
            "s": _STRINGS[k % len(_STRINGS)],
            "l": [-(2**63), 2**63 - 1, (k * 7919 - 50_000) * 10**9 * (1 if k % 2 else -1)][k % 3],
            "i": [-(2**31), 2**31 - 1, 0, k * 31][k % 4],
            "sh": [-(2**15), 2**15 - 1, k % 1000][k % 3],
            "by": [-128, 127, k % 100][k % 3],
            "d": [0.0, -1.5, 1e300, k / 3.0][k % 4],
            "f": [0.0, -2.5, 3.25e10, float(k) * 0.5][k % 4],
            "flag": k % 3 == 0,
            "bin": bytes([k % 256, 0, 255]) * (k % 3),
            "dt": dt.date(1969, 12, 31) + dt.timedelta(days=k * 37),
            "ts": dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(days=k * 101, microseconds=k * 123457) - dt.timedelta(days=300),
            "ntz": dt.datetime(2024, 2, 29, 23, 59, 59, 999999) + dt.timedelta(hours=k * 5, microseconds=k),
            "dec_small": decimal.Decimal(k * 12345 - 600000).scaleb(-2),
            "dec_big": decimal.Decimal(f"{'-' if k % 2 else ''}1234567890123456789012345{k % 10000:04d}.{k * 7919 % 10**9:09d}"),
            "st": {"a": k, "b": None if k % 4 == 1 else f"s{k}"},
            "arr": [[], [k], [k, None, -k]][k % 3],
            "m": [[], [("k", k)], [("x", None), ("y", -k)]][k % 3],
            "part": parts[k % len(parts)],
        }
        for j, f in enumerate(schema):
            v = vals[f.name]
            if f.nullable and f.name != "part" and _null(k, j):
                v = None
            cols[f.name].append(v)
    return pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in schema}, schema=schema)


# ---------------------------------------------------------------- comparison


def _canon_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type our reader produces for the same Delta type."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_dictionary(t) and pa.types.is_string(t.value_type):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field("element", _canon_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(_canon_type(t.key_type), _canon_type(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _canon_type(f.type)) for f in t])
    return t


def canonical(table: pa.Table, key: str = "id", columns: list[str] | None = None) -> pa.Table:
    """Columns in the given order (default: as they are), types canonicalised, rows sorted by key.
    Nullability is dropped: engines disagree on it for reads (Spark marks everything nullable)."""
    names = columns or table.column_names
    arrays, fields = [], []
    for n in names:
        col = table.column(n)
        t = _canon_type(col.type)
        if t != col.type:
            if pa.types.is_timestamp(col.type) and col.type.tz and col.type.tz not in ("UTC", "+00:00", "Etc/UTC"):
                raise AssertionError(f"column {n}: timestamp zone {col.type.tz}, want UTC")
            col = col.cast(t)
        arrays.append(col)
        fields.append(pa.field(n, t))
    out = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    if key in names and out.num_rows:
        out = out.sort_by(key)
    return out.combine_chunks()


def assert_same_rows(got: pa.Table, want: pa.Table, *, key: str = "id", what: str = "") -> None:
    """Exact equality of column names, canonical types and every value, ignoring row order."""
    label = f"{what}: " if what else ""
    assert sorted(got.column_names) == sorted(want.column_names), (
        f"{label}columns differ: got {got.column_names}, want {want.column_names}"
    )
    g = canonical(got, key, want.column_names)
    w = canonical(want, key, want.column_names)
    assert g.num_rows == w.num_rows, f"{label}row count: got {g.num_rows}, want {w.num_rows}"
    for name in w.column_names:
        gt, wt = g.schema.field(name).type, w.schema.field(name).type
        assert gt == wt, f"{label}column {name}: got type {gt}, want {wt}"
    if g.equals(w):
        return
    grows, wrows = g.to_pylist(), w.to_pylist()
    for idx, (gr, wr) in enumerate(zip(grows, wrows)):
        if gr != wr:
            diff = {c: (gr[c], wr[c]) for c in wr if gr.get(c) != wr[c]}
            raise AssertionError(f"{label}row {idx} ({key}={wr.get(key)}) differs (column: (got, want)): {diff}")
    raise AssertionError(f"{label}tables differ but no differing row was found")


# ---------------------------------------------------------------- deltatool


def write_ipc(table: pa.Table, path: Path) -> Path:
    with ipc.new_file(str(path), table.schema) as w:
        w.write_table(table)
    return path


def read_ipc(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as src:
        return ipc.open_file(src).read_all()


class DeltaTool:
    """Runs the Go helper interop/deltatool, our reader and writer, as a subprocess."""

    def __init__(self, binary: Path, workdir: Path, env: dict[str, str] | None = None):
        self.binary = binary
        self.workdir = workdir
        self.env = {**os.environ, **(env or {})}
        self._n = 0

    def _tmp(self, suffix: str) -> Path:
        self._n += 1
        return self.workdir / f"io-{os.getpid()}-{self._n}{suffix}"

    def with_env(self, env: dict[str, str]) -> "DeltaTool":
        """The same tool with extra environment variables (e.g. S3 settings)."""
        return DeltaTool(self.binary, self.workdir, {**self.env, **env})

    def run(self, *args: str) -> str:
        proc = subprocess.run([str(self.binary), *args], capture_output=True, text=True, env=self.env, timeout=300)
        if proc.returncode != 0:
            raise DeltaToolError(args, proc.returncode, proc.stderr.strip())
        return proc.stdout

    def read(self, table: str, *, version: int | None = None, timestamp: str | None = None) -> pa.Table:
        out = self._tmp(".arrow")
        args = ["read", "--table", table, "--out", str(out)]
        if version is not None:
            args += ["--version", str(version)]
        if timestamp is not None:
            args += ["--timestamp", timestamp]
        self.run(*args)
        try:
            return read_ipc(out)
        finally:
            out.unlink(missing_ok=True)

    def read_where(self, table: str, where: str, *, version: int | None = None) -> tuple[pa.Table, dict]:
        """The rows where a predicate holds, and the scan's file counts
        ({filesTotal, filesPruned, filesRead, rowGroupsPruned})."""
        out = self._tmp(".arrow")
        args = ["read", "--table", table, "--out", str(out), "--where", where]
        if version is not None:
            args += ["--version", str(version)]
        counts = json.loads(self.run(*args))
        try:
            return read_ipc(out), counts
        finally:
            out.unlink(missing_ok=True)

    def alter(self, table: str, *, add=(), widen=(), rename=(), drop=(), mapping: str | None = None) -> int:
        """Schema evolution: add and widen take (name, delta type), rename (old, new); one
        metadata-only commit for add/widen/rename/mapping, another for drop. Returns the
        last version committed."""
        args = ["alter", "--table", table]
        for n, t in add:
            args += ["--add", f"{n}:{t}"]
        for n, t in widen:
            args += ["--widen", f"{n}:{t}"]
        for a, b in rename:
            args += ["--rename", f"{a}:{b}"]
        for n in drop:
            args += ["--drop", n]
        if mapping:
            args += ["--mapping", mapping]
        return int(self.run(*args).strip())

    def write(self, table: str, data: pa.Table, *, mode: str = "append", partition_by=(), properties=None,
              row_group_bytes: int | None = None, cluster_by=()) -> int:
        """Commits data; returns the version the commit created. With row_group_bytes a row
        group closes past that many bytes, checked between data's record batches."""
        src = write_ipc(data, self._tmp(".arrow"))
        args = ["write", "--table", table, "--in", str(src), "--mode", mode]
        if row_group_bytes is not None:
            args += ["--row-group-bytes", str(row_group_bytes)]
        if partition_by:
            args += ["--partition-by", ",".join(partition_by)]
        if cluster_by:
            args += ["--cluster-by", ",".join(cluster_by)]
        for k, v in (properties or {}).items():
            args += ["--property", f"{k}={v}"]
        try:
            return int(self.run(*args).strip())
        finally:
            src.unlink(missing_ok=True)

    def set_properties(self, table: str, properties: dict[str, str | None]) -> int:
        """Sets (value) or unsets (None) table properties in one commit; returns its version."""
        args = ["set-property", "--table", table]
        for k, v in properties.items():
            args += ["--unset", k] if v is None else ["--property", f"{k}={v}"]
        return int(self.run(*args).strip())

    def checkpoint(self, table: str) -> int:
        return int(self.run("checkpoint", "--table", table).strip())

    def version(self, table: str) -> int:
        return int(self.run("version", "--table", table).strip())

    def history(self, table: str) -> list[dict]:
        return json.loads(self.run("history", "--table", table))


    # ---- issue 4: change data feed, DML, identity columns, RESTORE, VACUUM

    def changes(self, table: str, start: int, end: int | None = None) -> pa.Table:
        """Our table_changes(table, start, end): data columns + _change_type,
        _commit_version, _commit_timestamp."""
        out = self._tmp(".arrow")
        args = ["changes", "--table", table, "--from", str(start), "--out", str(out)]
        if end is not None:
            args += ["--to", str(end)]
        self.run(*args)
        try:
            return read_ipc(out)
        finally:
            out.unlink(missing_ok=True)

    def create(self, table: str, schema: pa.Schema, *, identity: str | None = None, partition_by=(),
               properties=None) -> int:
        """An empty table with schema (plus identity column name[:start[:step]] in front)."""
        src = write_ipc(schema.empty_table(), self._tmp(".arrow"))
        args = ["create", "--table", table, "--schema-from", str(src)]
        if identity:
            args += ["--identity", identity]
        if partition_by:
            args += ["--partition-by", ",".join(partition_by)]
        for k, v in (properties or {}).items():
            args += ["--property", f"{k}={v}"]
        try:
            return int(self.run(*args).strip())
        finally:
            src.unlink(missing_ok=True)

    def append(self, table: str, data: pa.Table) -> int:
        """delta.Table.Append (INSERT INTO: generates identity values)."""
        src = write_ipc(data, self._tmp(".arrow"))
        try:
            return int(self.run("append", "--table", table, "--in", str(src)).strip())
        finally:
            src.unlink(missing_ok=True)

    def update(self, table: str, where: str | None, **set_: str) -> int:
        args = ["update", "--table", table]
        if where is not None:
            args += ["--where", where]
        for k, v in set_.items():
            args += ["--set", f"{k}={v}"]
        return int(self.run(*args).strip())

    def delete(self, table: str, where: str) -> int:
        return int(self.run("delete", "--table", table, "--where", where).strip())

    def merge(self, table: str, source: pa.Table, on: str, *, delete_when: str | None = None,
              by_position: bool = False) -> int:
        """MERGE ... ON on [WHEN MATCHED AND delete_when THEN DELETE]
        WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *. by_position joins in
        deltatool and gives the MERGE the matches and matched rows (MergeOptions.Positions),
        as scd2_merge does."""
        src = write_ipc(source, self._tmp(".arrow"))
        args = ["merge", "--table", table, "--in", str(src), "--on", on]
        if by_position:
            args.append("--by-position")
        if delete_when:
            args += ["--delete-when", delete_when]
        try:
            return int(self.run(*args).strip())
        finally:
            src.unlink(missing_ok=True)

    def restore(self, table: str, version: int) -> int:
        return int(self.run("restore", "--table", table, "--version", str(version)).strip())

    def vacuum(self, table: str, *, retain: str | None = None, force: bool = False) -> dict:
        args = ["vacuum", "--table", table]
        if retain is not None:
            args += ["--retain", retain]
        if force:
            args.append("--force")
        return json.loads(self.run(*args))


class DeltaToolError(AssertionError):
    def __init__(self, args, code, stderr):
        super().__init__(f"deltatool {' '.join(args[:1])} exited {code}: {stderr}")
        self.stderr = stderr


# ---------------------------------------------------------------- reference engines


def spark_type(t: pa.DataType) -> str:
    """Spark SQL spelling of an Arrow type as delta.ArrowSchema maps it."""
    simple = {
        pa.string(): "string", pa.int64(): "bigint", pa.int32(): "int", pa.int16(): "smallint",
        pa.int8(): "tinyint", pa.float64(): "double", pa.float32(): "float", pa.bool_(): "boolean",
        pa.binary(): "binary", pa.date32(): "date",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"`{f.name}`:{spark_type(f.type)}" for f in t) + ">"
    if pa.types.is_list(t):
        return f"array<{spark_type(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{spark_type(t.key_type)},{spark_type(t.item_type)}>"
    raise ValueError(f"no Spark type for {t}")


def spark_ddl(schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in schema)


def spark_frame(spark, data: pa.Table):
    """A Spark DataFrame with exactly data's types (timestamp_ntz stays ntz)."""
    return spark.createDataFrame(data, schema=spark_ddl(data.schema))


def spark_read(spark, path: str, *, version: int | None = None, timestamp: str | None = None) -> pa.Table:
    rdr = spark.read.format("delta")
    if version is not None:
        rdr = rdr.option("versionAsOf", version)
    if timestamp is not None:
        rdr = rdr.option("timestampAsOf", timestamp)
    return rdr.load(path).toArrow()


def spark_history(spark, path: str) -> list[dict]:
    """DESCRIBE HISTORY, oldest first, as plain dicts."""
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    return sorted((r.asDict(recursive=True) for r in rows), key=lambda r: r["version"])


def rs_read(path: str, version: int | None = None, storage_options: dict | None = None) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(path, version=version, storage_options=storage_options).to_pyarrow_table()


def rs_version(path: str, storage_options: dict | None = None) -> int:
    from deltalake import DeltaTable

    return DeltaTable(path, storage_options=storage_options).version()


# ---------------------------------------------------------------- our tables


@dataclass
class Built:
    """A table our writer built, and what every version must contain."""

    path: str
    partition_by: list[str]
    versions: dict[int, pa.Table] = field(default_factory=dict)  # version -> expected rows
    operations: dict[int, str] = field(default_factory=dict)  # version -> commitInfo.operation


def build_table(deltatool, path: str, partition_by: list[str]) -> Built:
    """create (v0) + append (v1), append, append, overwrite, property change, append, append:
    with delta.checkpointInterval=2 our writer checkpoints at versions 2, 4, 6 and 8."""
    b = Built(path, partition_by)
    empty = sample_rows(0, 0)
    state = empty

    def commit(version: int, op: str, rows: pa.Table):
        assert version == max(b.versions, default=-1) + 1, f"versions must be contiguous, got {version}"
        b.versions[version] = rows
        b.operations[version] = op

    v = deltatool.write(path, sample_rows(0, 30), partition_by=partition_by,
                        properties={"delta.checkpointInterval": "2"})
    # A new table is version 0 (CREATE TABLE, empty) plus the first WRITE.
    commit(0, "CREATE TABLE", empty)
    state = sample_rows(0, 30)
    commit(v, "WRITE", state)
    for start, n in ((30, 25), (55, 1)):
        data = sample_rows(start, n)
        state = pa.concat_tables([state, data])
        commit(deltatool.write(path, data), "WRITE", state)
    state = sample_rows(1000, 20)
    commit(deltatool.write(path, state, mode="overwrite"), "WRITE", state)
    commit(deltatool.set_properties(path, {"delta.logRetentionDuration": "interval 60 days"}),
           "SET TBLPROPERTIES", state)
    for start, n in ((2000, 12), (3000, 7)):
        data = sample_rows(start, n, parts=[None, "z"])
        state = pa.concat_tables([state, data])
        commit(deltatool.write(path, data), "WRITE", state)
    return b
