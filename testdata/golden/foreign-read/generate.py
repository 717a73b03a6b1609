"""Writes, with Delta-Spark, the foreign tables delta's TestForeignReadTables reads, and
what Spark reads from them (expected.json):

  data-skipping-basic-stats-all-types/
      the shape of delta-io/delta's golden table of that name (ten primitive columns, one
      row of zeros, session time zone America/Los_Angeles so the timestamp stats carry
      -08:00), re-made here because the upstream Parquet is binary
  data-skipping-inexact-stats/
      float, double, decimal(38,18), timestamp and string columns in several files whose
      JSON stats are inexact: float32 values (0.234), 17+ digit decimals, sub-millisecond
      timestamps, strings past the 32-character stats prefix; expected.json has Spark's
      answer (the ids) to each predicate in PREDICATES
  void-column/
      CREATE TABLE ... AS SELECT with a NULL (void) column: the schema keeps
      {"type":"void"}, the Parquet files do not have the column
  timestamp-partitioned-table/
      delta-kernel-rs's table of that name: (id long, x double, s string, time timestamp)
      partitioned by time, deletion vectors enabled, one row; written by Spark, then the
      partition directory and the add path rewritten to the form delta-kernel-rs wrote,
      time=1971-07-22T03:06:40.000000Z with the ':' unescaped

Run with the interop virtualenv (pyspark, delta-spark; Java 17):
  python testdata/golden/foreign-read/generate.py
"""

import json
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

PREDICATES = [
    "as_float < 0.234",
    "as_float <= 0.234",
    "as_float = 0.234",
    "as_float > 0.234",
    "as_float >= 0.23399999737739563",
    "as_float = 0.23399999737739563",
    "as_float < 0.234 OR id = 2",
    "as_float > 0.1",
    "as_float < 0.1",
    "as_double = 0.30000000000000004",
    "as_double < 0.3",
    "as_double >= 0.1",
    "as_decimal = 12345678901234567.123456789012345678",
    "as_decimal > 12345678901234567.123456789012345677",
    "as_decimal < 12345678901234567.123456789012345679",
    "as_decimal >= 12345678901234567.1234567890123456785",
    "as_timestamp = '2024-01-01 00:00:00.000999'",
    "as_timestamp > '2024-01-01 00:00:00.000500'",
    "as_timestamp <= '2024-01-01 00:00:00.000998'",
    "as_timestamp < '1969-12-31 23:59:59.999'",
    "as_timestamp >= '1969-12-31 23:59:59.9995'",
    "as_string = 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxb'",
    "as_string > 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxa'",
    "as_string >= 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxz'",
    "as_string < 'b'",
]

INEXACT_INSERTS = [
    """(1, CAST(0.234 AS FLOAT), 0.30000000000000004D, 12345678901234567.123456789012345678BD,
        TIMESTAMP'2024-01-01 00:00:00.000999', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxb'),
       (2, CAST(0.5 AS FLOAT), 0.1D, 1BD, TIMESTAMP'2024-01-01 00:00:00.000500', 'a')""",
    """(3, CAST(0.1 AS FLOAT), 0.3D, 12345678901234567.123456789012345677BD,
        TIMESTAMP'1969-12-31 23:59:59.9995', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxa'),
       (4, NULL, NULL, NULL, NULL, NULL)""",
    """(5, CAST(0.234 AS FLOAT), 0.2D, 12345678901234567.123456789012345679BD,
        TIMESTAMP'1969-12-31 23:59:59.999001', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxzz')""",
]


def session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    delta_version = metadata.version("delta-spark")
    spark_minor = ".".join(metadata.version("pyspark").split(".")[:2])
    ivy = Path(os.environ.get("ORCH_IVY_DIR", Path.home() / ".cache" / "orchestrator-ivy"))
    return (
        SparkSession.builder.master("local[1]")
        .config("spark.jars.packages", f"io.delta:delta-spark_{spark_minor}_2.13:{delta_version}")
        .config("spark.jars.ivy", str(ivy))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )


def drop_crc(root: Path) -> None:
    for p in root.rglob(".*.crc"):
        p.unlink()


def rows(spark, sql):
    return [r.asDict() for r in spark.sql(sql).collect()]


def main() -> None:
    spark = session()
    out = Path(__file__).resolve().parent
    expected = {"engine": f"Delta-Spark {metadata.version('delta-spark')} on Spark {metadata.version('pyspark')}"}

    # data-skipping-basic-stats-all-types
    t = out / "data-skipping-basic-stats-all-types"
    shutil.rmtree(t, ignore_errors=True)
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    spark.sql(f"""CREATE TABLE delta.`{t}` (as_int INT, as_long BIGINT, as_byte TINYINT, as_short SMALLINT,
        as_float FLOAT, as_double DOUBLE, as_string STRING, as_date DATE, as_timestamp TIMESTAMP,
        as_big_decimal DECIMAL(1,0)) USING delta""")
    spark.sql(f"""INSERT INTO delta.`{t}` VALUES (0, 0, 0, 0, 0.0, 0.0, '0', DATE'2000-01-01',
        TIMESTAMP'2000-01-01 00:00:00', 0)""")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    expected["data-skipping-basic-stats-all-types"] = {
        "rows": [{k: str(v) for k, v in r.items()} for r in rows(spark, f"SELECT * FROM delta.`{t}`")],
        "where": {p: len(rows(spark, f"SELECT * FROM delta.`{t}` WHERE {p}"))
                  for p in ["as_int > 0", "as_int = 0", "as_float = 0", "as_float < 0", "as_timestamp = '2000-01-01 08:00:00'",
                            "as_string = '0'", "as_big_decimal >= 0"]},
    }

    # data-skipping-inexact-stats
    t = out / "data-skipping-inexact-stats"
    shutil.rmtree(t, ignore_errors=True)
    spark.sql(f"""CREATE TABLE delta.`{t}` (id BIGINT, as_float FLOAT, as_double DOUBLE,
        as_decimal DECIMAL(38,18), as_timestamp TIMESTAMP, as_string STRING) USING delta""")
    for values in INEXACT_INSERTS:
        spark.sql(f"INSERT INTO delta.`{t}` VALUES {values}")
    expected["data-skipping-inexact-stats"] = {
        "where": {p: sorted(r["id"] for r in rows(spark, f"SELECT id FROM delta.`{t}` WHERE {p}")) for p in PREDICATES},
    }

    # void-column
    t = out / "void-column"
    shutil.rmtree(t, ignore_errors=True)
    spark.sql(f"CREATE TABLE delta.`{t}` USING delta AS SELECT id, NULL AS v FROM range(3)")
    expected["void-column"] = {
        "schema": spark.sql(f"SELECT * FROM delta.`{t}`").schema.simpleString(),
        "rows": rows(spark, f"SELECT * FROM delta.`{t}` ORDER BY id"),
    }

    # timestamp-partitioned-table
    t = out / "timestamp-partitioned-table"
    shutil.rmtree(t, ignore_errors=True)
    spark.sql(f"""CREATE TABLE delta.`{t}` (id BIGINT, x DOUBLE, s STRING, time TIMESTAMP) USING delta
        PARTITIONED BY (time) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')""")
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (1, 0.5, NULL, TIMESTAMP'1971-07-22 03:06:40')")
    expected["timestamp-partitioned-table"] = {
        "rows": [{k: str(v) for k, v in r.items()} for r in rows(spark, f"SELECT * FROM delta.`{t}`")],
    }
    drop_crc(t)
    kernel_dir = "time=1971-07-22T03:06:40.000000Z"
    log = t / "_delta_log"
    for commit in sorted(log.glob("*.json")):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            add = action.get("add")
            if add:
                old_dir = [d for d in t.iterdir() if d.name.startswith("time=")][0]
                name = add["path"].rsplit("/", 1)[1]
                (t / kernel_dir).mkdir(exist_ok=True)
                (old_dir / name).rename(t / kernel_dir / name)
                shutil.rmtree(old_dir)
                add["path"] = f"{kernel_dir}/{name}"
                add["partitionValues"] = {"time": "1971-07-22T03:06:40.000000Z"}
            lines.append(json.dumps(action, separators=(",", ":")))
        commit.write_text("\n".join(lines) + "\n")

    for name in ["data-skipping-basic-stats-all-types", "data-skipping-inexact-stats", "void-column"]:
        drop_crc(out / name)
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True, default=str) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
