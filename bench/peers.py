"""The peers of the bench/ harness: DuckDB and delta-rs on the data benchrun generated.

Run by bench/cmd/benchrun, one case per process (so each process's peak RSS is its own):

    python bench/peers.py <case> <args...>

Each case prints one JSON line: {"seconds": ..., "rows": ..., "note": ...}. seconds is
the measured step only (imports, opening inputs and reading a MERGE source into memory
are outside it, as for our cases); the driver takes peak RSS and CPU time from the
process's rusage. Versions are the pins of interop/requirements.txt.
"""

import json
import os
import sys
import time


def emit(seconds, rows, note="", bytes_out=0, cpu=None):
    """Prints the measurement: the measured step's wall seconds and the CPU seconds the
    process (all its threads) used in it (cpu, from since()), imports excluded."""
    m = {"seconds": seconds, "rows": rows, "note": note, "bytes_out": bytes_out}
    if cpu is not None:
        m["cpu_seconds"] = cpu
    print(json.dumps(m))


def start():
    """The wall and CPU clocks at the start of a measured step."""
    return time.perf_counter(), time.process_time()


def since(t0):
    """The wall and CPU seconds since start() gave t0."""
    return time.perf_counter() - t0[0], time.process_time() - t0[1]


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            if f.endswith(".parquet"):
                total += os.path.getsize(os.path.join(root, f))
    return total


INGEST_COLUMNS = {
    "transaction_id": "VARCHAR",
    "customer_key": "VARCHAR",
    "amount": "DECIMAL(10,2)",
    "event_time": "TIMESTAMPTZ",
    "note": "VARCHAR",
}


def ingest_duckdb(csv_dir, out):
    import duckdb

    os.makedirs(out, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")
    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in INGEST_COLUMNS.items()) + "}"
    target = os.path.join(out, "data.parquet")
    t0 = start()
    res = con.execute(
        f"COPY (SELECT * FROM read_csv('{csv_dir}/*.csv', header = true, columns = {cols})) "
        f"TO '{target}' (FORMAT parquet)"
    ).fetchone()
    secs, cpu = since(t0)
    rows = res[0] if res else con.execute(f"SELECT count(*) FROM '{target}'").fetchone()[0]
    emit(secs, rows, f"duckdb {duckdb.__version__}, threads=2, preserve_insertion_order=false", dir_bytes(out), cpu=cpu)


def ingest_deltars(csv_dir, out):
    import deltalake
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.dataset as ds

    schema = pa.schema(
        [
            ("transaction_id", pa.string()),
            ("customer_key", pa.string()),
            ("amount", pa.decimal128(10, 2)),
            ("event_time", pa.timestamp("us", tz="UTC")),
            ("note", pa.string()),
        ]
    )
    fmt = ds.CsvFileFormat(convert_options=pcsv.ConvertOptions(column_types=schema, strings_can_be_null=True))
    t0 = start()
    reader = ds.dataset(csv_dir, format=fmt, schema=schema).scanner().to_reader()
    deltalake.write_deltalake(out, reader)
    secs, cpu = since(t0)
    rows = deltalake.DeltaTable(out).to_pyarrow_dataset().count_rows()
    emit(secs, rows, f"deltalake {deltalake.__version__}, pyarrow {pa.__version__} dataset CSV reader (streaming)", dir_bytes(out), cpu=cpu)


def merge_deltars(table, source):
    import deltalake
    import pyarrow.parquet as pq

    src = pq.read_table(source)
    dt = deltalake.DeltaTable(table)
    t0 = start()
    m = (
        dt.merge(source=src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    secs, cpu = since(t0)
    if m.get("num_target_rows_updated") != src.num_rows:
        raise SystemExit(f"delta-rs merge updated {m.get('num_target_rows_updated')} rows, want {src.num_rows}")
    emit(secs, src.num_rows, f"{m.get('num_target_files_removed')} files rewritten", cpu=cpu)


def cdf_deltars(table):
    import deltalake
    import pyarrow as pa

    t0 = start()
    dt = deltalake.DeltaTable(table)
    reader = pa.RecordBatchReader.from_stream(dt.load_cdf(starting_version=0))
    rows = sum(b.num_rows for b in reader)
    secs, cpu = since(t0)
    emit(secs, rows, cpu=cpu)


def logload_deltars(table):
    import deltalake

    t0 = start()
    dt = deltalake.DeltaTable(table)
    files = len(dt.file_uris())
    secs, cpu = since(t0)
    emit(secs, files, f"DeltaTable(path).file_uris(): {files} files at version {dt.version()}", cpu=cpu)


def scan_deltars(table):
    import deltalake

    t0 = start()
    dt = deltalake.DeltaTable(table)
    rows = sum(b.num_rows for b in dt.to_pyarrow_dataset().to_batches())
    secs, cpu = since(t0)
    emit(secs, rows, "to_pyarrow_dataset().to_batches()", cpu=cpu)


# The SCD2 apply over Parquet: close the current row of every changed or deleted key,
# insert a new current version for every changed key and every new key (surrogate keys
# after the largest), overwrite the type 1 column (name) on every version of a key.
# Change detection is null-safe (IS DISTINCT FROM).
SCD2_SQL = """
COPY (
WITH c AS (SELECT * FROM read_parquet({changes})),
d AS (SELECT * FROM read_parquet({dim})),
cur AS (SELECT customer_sk, customer_id, city, segment FROM d WHERE is_current),
j AS (
  SELECT c.*, cur.customer_sk AS cur_sk,
         (cur.customer_sk IS NOT NULL AND c.op <> 'D'
          AND (c.city IS DISTINCT FROM cur.city OR c.segment IS DISTINCT FROM cur.segment)) AS changed,
         (cur.customer_sk IS NOT NULL AND c.op = 'D') AS deleted
  FROM c LEFT JOIN cur ON c.customer_id = cur.customer_id),
closing AS (SELECT cur_sk, updated_at FROM j WHERE changed OR deleted),
ins AS (SELECT customer_id, name, city, segment, updated_at FROM j WHERE changed OR (cur_sk IS NULL AND op <> 'D')),
mx AS (SELECT max(customer_sk) AS m FROM d)
SELECT d.customer_sk, d.customer_id,
       CASE WHEN c1.customer_id IS NOT NULL AND c1.op <> 'D' THEN c1.name ELSE d.name END AS name,
       d.city, d.segment, d.valid_from,
       CASE WHEN cl.cur_sk IS NOT NULL THEN cl.updated_at ELSE d.valid_to END AS valid_to,
       CASE WHEN cl.cur_sk IS NOT NULL THEN false ELSE d.is_current END AS is_current
FROM d LEFT JOIN c AS c1 ON d.customer_id = c1.customer_id
       LEFT JOIN closing cl ON d.customer_sk = cl.cur_sk
UNION ALL
SELECT mx.m + row_number() OVER (ORDER BY customer_id), customer_id, name, city, segment, updated_at,
       CAST(TIMESTAMPTZ '9999-12-31 00:00:00+00' AS TIMESTAMPTZ), true
FROM ins, mx
) TO '{out}' (FORMAT parquet)
"""


def scd2_sql(changes, dim, out):
    """SCD2_SQL over the given Parquet files (lists of paths or globs)."""
    lit = lambda paths: "[" + ", ".join("'" + p + "'" for p in paths) + "]"
    return SCD2_SQL.format(changes=lit(changes), dim=lit(dim), out=out)


def scd2_duckdb(d):
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")
    changes = con.execute(f"SELECT count(*) FROM '{d}/changes.parquet'").fetchone()[0]
    t0 = start()
    con.execute(scd2_sql([f"{d}/changes.parquet"], [f"{d}/dim.parquet"], f"{d}/duckdb-dim.parquet"))
    secs, cpu = since(t0)
    total = con.execute(f"SELECT count(*) FROM '{d}/duckdb-dim.parquet'").fetchone()[0]
    emit(secs, changes, f"dimension now {total} rows; read dim+changes Parquet, write the new dimension Parquet", cpu=cpu)


def extract_duckdb(d, dim, *changes):
    """The extract case's merge in SQL: the day's extract (the Parquet files its append
    added to the staging table, which our stage reads as the change feed) into the
    dimension (its data files, a glob), written as a new dimension Parquet file."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")
    rows = con.execute(f"SELECT count(*) FROM read_parquet({list(changes)!r})").fetchone()[0]
    out = os.path.join(d, "duckdb-dim.parquet")
    t0 = start()
    con.execute(scd2_sql(list(changes), [dim], out))
    secs, cpu = since(t0)
    total, current = con.execute(f"SELECT count(*), count(*) FILTER (WHERE is_current) FROM '{out}'").fetchone()
    os.remove(out)
    emit(secs, rows, f"dimension now {total} rows ({current} current); read the dimension's and the extract's Parquet, write the new dimension Parquet", cpu=cpu)


def scd2_deltars_setup(d):
    import deltalake
    import pyarrow.parquet as pq

    deltalake.write_deltalake(
        os.path.join(d, "deltars-dim"),
        pq.read_table(os.path.join(d, "dim.parquet")),
        configuration={"delta.enableChangeDataFeed": "true"},
    )


def scd2_deltars(d):
    import deltalake
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ch = pq.read_table(os.path.join(d, "changes.parquet"))
    dt = deltalake.DeltaTable(os.path.join(d, "deltars-dim"))
    t0 = start()
    # Staged-union MERGE (the Delta documentation's SCD2 pattern): every change row keyed
    # by customer_id (closes the current row, or inserts a new key), plus the changed rows
    # again with a NULL merge key (never match: insert the new version).
    dset = dt.to_pyarrow_dataset()
    cur = dset.to_table(filter=pc.field("is_current") == True, columns=["customer_id", "city", "segment"])  # noqa: E712
    top = pc.max(dset.to_table(columns=["customer_sk"])["customer_sk"]).as_py() or 0
    j = ch.join(cur, "customer_id", join_type="inner", right_suffix="_cur")

    def distinct(a, b):
        return pc.or_(pc.fill_null(pc.not_equal(a, b), False), pc.xor(pc.is_null(a), pc.is_null(b)))

    changed = j.filter(
        pc.and_(pc.not_equal(j["op"], "D"), pc.or_(distinct(j["city"], j["city_cur"]), distinct(j["segment"], j["segment_cur"])))
    ).select(ch.column_names)
    keyed = ch.append_column("merge_key", ch["customer_id"])
    unkeyed = changed.append_column("merge_key", pa.nulls(changed.num_rows, pa.string())).cast(keyed.schema)
    staged = pa.concat_tables([keyed, unkeyed])
    staged = staged.append_column("new_sk", pa.array(range(top + 1, top + 1 + staged.num_rows), pa.int64()))
    sentinel = pa.scalar(253402214400000000, pa.timestamp("us", tz="UTC"))  # 9999-12-31
    staged = staged.append_column("valid_to_new", pa.array([sentinel.value] * staged.num_rows, pa.timestamp("us", tz="UTC")))
    prep = since(t0)[0]
    m = (
        dt.merge(
            source=staged,
            predicate="t.customer_id = s.merge_key AND t.is_current = true",
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update(
            updates={"valid_to": "s.updated_at", "is_current": "false"},
            predicate="(s.op = 'D') OR (t.city IS DISTINCT FROM s.city) OR (t.segment IS DISTINCT FROM s.segment)",
        )
        .when_not_matched_insert(
            updates={
                "customer_sk": "s.new_sk",
                "customer_id": "s.customer_id",
                "name": "s.name",
                "city": "s.city",
                "segment": "s.segment",
                "valid_from": "s.updated_at",
                "valid_to": "s.valid_to_new",
                "is_current": "true",
            },
            predicate="s.op <> 'D'",
        )
        .execute()
    )
    secs, cpu = since(t0)
    total = deltalake.DeltaTable(os.path.join(d, "deltars-dim")).to_pyarrow_dataset().count_rows()
    emit(
        secs,
        ch.num_rows,
        f"dimension now {total} rows; staging {prep:.2f}s + merge {secs - prep:.2f}s; "
        f"{m.get('num_target_rows_updated')} closed, {m.get('num_target_rows_inserted')} inserted; type 1 (name) not applied",
        cpu=cpu,
    )


# The snapshot diff: the previous table (its Parquet data files) against the new extract
# (CSV), FULL OUTER JOIN on the key, null-safe comparison of every column; the new table,
# each row with its change, written to Parquet.
SNAPSHOT_SQL = """
COPY (
SELECT COALESCE(n.account_id, o.account_id) AS account_id, n.name, n.city, n.score, n.balance,
       CASE WHEN o.account_id IS NULL THEN 'insert'
            WHEN n.account_id IS NULL THEN 'delete'
            WHEN o.name IS DISTINCT FROM n.name OR o.city IS DISTINCT FROM n.city
              OR o.score IS DISTINCT FROM n.score OR o.balance IS DISTINCT FROM n.balance THEN 'update'
            ELSE 'same' END AS change
FROM read_parquet('{dir}/wh/staging/accounts/*.parquet') o
FULL OUTER JOIN read_csv('{dir}/day2/accounts.csv', header = true,
  columns = {{'account_id': 'VARCHAR', 'name': 'VARCHAR', 'city': 'VARCHAR', 'score': 'BIGINT', 'balance': 'DECIMAL(12,2)'}}) n
ON o.account_id = n.account_id
) TO '{dir}/duckdb-accounts.parquet' (FORMAT parquet)
"""


def snapshot_duckdb(d):
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")
    t0 = start()
    con.execute(SNAPSHOT_SQL.format(dir=d))
    secs, cpu = since(t0)
    counts = dict(con.execute(f"SELECT change, count(*) FROM '{d}/duckdb-accounts.parquet' GROUP BY change").fetchall())
    rows = sum(v for k, v in counts.items() if k != "delete")
    note = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("update", "insert", "delete"))
    emit(secs, rows, note + "; writes the new table with each row's change", cpu=cpu)


def facts_duckdb(d, join):
    """The facts case in SQL: each sale gets the surrogate key of its customer's version
    valid at sold_at (-1 when none), written as Parquet. join is asof (ASOF JOIN on the
    version's start; the versions of a key are contiguous here, so it is the same answer)
    or range (valid_from <= sold_at < valid_to)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")
    sales, dim = f"read_parquet('{d}/sales.parquet')", f"read_parquet('{d}/dim.parquet')"
    rows = con.execute(f"SELECT count(*) FROM {sales}").fetchone()[0]
    if join == "asof":
        on = f"ASOF LEFT JOIN {dim} d ON s.customer_id = d.customer_id AND s.sold_at >= d.valid_from"
    else:
        on = f"LEFT JOIN {dim} d ON s.customer_id = d.customer_id AND s.sold_at >= d.valid_from AND s.sold_at < d.valid_to"
    out = os.path.join(d, "duckdb-facts.parquet")
    t0 = start()
    con.execute(f"COPY (SELECT s.*, coalesce(d.customer_sk, -1) AS customer_sk FROM {sales} s {on}) TO '{out}' (FORMAT parquet)")
    secs, cpu = since(t0)
    total, unknown = con.execute(f"SELECT count(*), count(*) FILTER (WHERE customer_sk = -1) FROM '{out}'").fetchone()
    os.remove(out)
    emit(secs, rows, f"{total} facts written, {unknown} with the unknown key; read the dimension's and the sales' Parquet, write the keyed facts Parquet", cpu=cpu)


CASES = {
    "ingest-duckdb": ingest_duckdb,
    "ingest-deltars": ingest_deltars,
    "merge-deltars": merge_deltars,
    "cdf-deltars": cdf_deltars,
    "scan-deltars": scan_deltars,
    "logload-deltars": logload_deltars,
    "scd2-duckdb": scd2_duckdb,
    "extract-duckdb": extract_duckdb,
    "scd2-deltars-setup": scd2_deltars_setup,
    "scd2-deltars": scd2_deltars,
    "snapshot-duckdb": snapshot_duckdb,
    "facts-duckdb": facts_duckdb,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CASES:
        raise SystemExit(f"usage: peers.py <{'|'.join(CASES)}> args...")
    CASES[sys.argv[1]](*sys.argv[2:])
    # Skip interpreter teardown: pyarrow's dataset threads sometimes abort the process at
    # exit ("terminate called without an active exception") after the measurement is out.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
