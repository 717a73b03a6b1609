"""Generates, with Spark and Delta (the interop pins), equivalents of delta-kernel-rs'
column mapping and type widening test tables, and Spark's own answers for each version
(and each version's change feed where it is on), as Arrow IPC files that
delta/kernel_equivalents_test.go compares our reader with.

The upstream tables are binary (Parquet data files, and .tar.zst archives for the golden
ones), which could not be fetched here; their recipes are public (see README.md), and
each table below follows one:

  type-widening                    kernel/tests/data/type-widening: every widening Delta
                                   allows, one narrow row, then the types widened and a
                                   wide row (the same values; byte and short widen to
                                   decimal(11,1), not (4,1) and (6,1): the preview feature
                                   that table was written with allowed those, the stable
                                   one, which Spark 4.1 writes, does not)
  dv-with-columnmapping            golden dv-with-columnmapping: (x % 10, x, 'foo' || x % 5)
                                   for x < 50, partitioned, mode name, deletion vectors
                                   deleting even x < 30, a checkpoint
  table-with-columnmapping-mode-id golden table-with-columnmapping-mode-id: every type,
                                   nested structs, arrays and maps, mode id, 6 rows
  cdf-column-mapping-id-mode       data/cdf-column-mapping-{id,name}-mode: (id, name,
  cdf-column-mapping-name-mode     value) with inserts, an UPDATE and a DELETE, change feed
  data-reader-timestamp_ntz-id-mode golden data-reader-timestamp_ntz-id-mode: timestamp_ntz
                                   data and partition column, mode id

Run with the interop virtualenv (pyspark, delta-spark, pyarrow; Java 17):
  python testdata/golden/kernel-equivalents/generate.py
It replaces every table directory here.
"""

import os
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

OUT = Path(__file__).resolve().parent


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


TABLES = {
    "type-widening": [
        "CREATE TABLE {t} (byte_long BYTE, int_long INT, float_double FLOAT, byte_double BYTE, short_double SHORT,"
        " int_double INT, decimal_decimal_same_scale DECIMAL(10,2), decimal_decimal_greater_scale DECIMAL(10,2),"
        " byte_decimal BYTE, short_decimal SHORT, int_decimal INT, long_decimal BIGINT, date_timestamp_ntz DATE) USING delta",
        "INSERT INTO {t} VALUES (1, 2, 3.4, 5, 6, 7, 123.45, 67.89, 1, 2, 3, 4, DATE'2024-09-09')",
        "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true', 'delta.feature.timestampNtz' = 'supported')",
        "ALTER TABLE {t} ALTER COLUMN byte_long TYPE BIGINT",
        "ALTER TABLE {t} ALTER COLUMN int_long TYPE BIGINT",
        "ALTER TABLE {t} ALTER COLUMN float_double TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN byte_double TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN short_double TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN int_double TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN decimal_decimal_same_scale TYPE DECIMAL(20,2)",
        "ALTER TABLE {t} ALTER COLUMN decimal_decimal_greater_scale TYPE DECIMAL(20,5)",
        "ALTER TABLE {t} ALTER COLUMN byte_decimal TYPE DECIMAL(11,1)",
        "ALTER TABLE {t} ALTER COLUMN short_decimal TYPE DECIMAL(11,1)",
        "ALTER TABLE {t} ALTER COLUMN int_decimal TYPE DECIMAL(11,1)",
        "ALTER TABLE {t} ALTER COLUMN long_decimal TYPE DECIMAL(21,1)",
        "ALTER TABLE {t} ALTER COLUMN date_timestamp_ntz TYPE TIMESTAMP_NTZ",
        "INSERT INTO {t} VALUES (9223372036854775807, 9223372036854775807, 1.234567890123, 1.234567890123,"
        " 1.234567890123, 1.234567890123, 12345678901234.56, 12345678901.23456, 123.4, 12345.6, 1234567890.1,"
        " 123456789012345678.9, TIMESTAMP_NTZ'2024-09-09 12:34:56.123456')",
    ],
    "dv-with-columnmapping": [
        "CREATE TABLE {t} (part INT, col1 INT, col2 STRING) USING delta PARTITIONED BY (part) TBLPROPERTIES"
        " ('delta.columnMapping.mode' = 'name', 'delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '2')",
        "INSERT INTO {t} SELECT id % 10, id, concat('foo', id % 5) FROM range(50)",
        "DELETE FROM {t} WHERE col1 % 2 = 0 AND col1 < 30",
        "ALTER TABLE {t} RENAME COLUMN col2 TO col2_renamed",
    ],
    "table-with-columnmapping-mode-id": [
        "CREATE TABLE {t} (ByteType BYTE, ShortType SHORT, IntegerType INT, LongType BIGINT, FloatType FLOAT,"
        " DoubleType DOUBLE, decimal DECIMAL(10,2), BooleanType BOOLEAN, StringType STRING, BinaryType BINARY,"
        " DateType DATE, TimestampType TIMESTAMP, nested_struct STRUCT<aa: STRING, ac: STRUCT<aca: INT>>,"
        " array_of_prims ARRAY<INT>, array_of_arrays ARRAY<ARRAY<INT>>, array_of_structs ARRAY<STRUCT<ab: BIGINT>>,"
        " map_of_prims MAP<INT, BIGINT>, map_of_rows MAP<INT, STRUCT<ab: BIGINT>>, map_of_arrays MAP<BIGINT, ARRAY<INT>>)"
        " USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'id')",
        "INSERT INTO {t} SELECT CAST(i AS BYTE), CAST(i AS SHORT), i, CAST(i AS BIGINT), CAST(i AS FLOAT) * 1.5,"
        " CAST(i AS DOUBLE) / 3, CAST(i AS DECIMAL(10,2)) + 0.25, i % 2 = 0, CAST(i AS STRING), CAST(CAST(i AS STRING) AS BINARY),"
        " DATE_ADD(DATE'2021-01-01', i), TIMESTAMP'2021-01-01 00:00:00' + make_interval(0, 0, 0, i, i, 0, 0),"
        " IF(i = 3, NULL, named_struct('aa', CAST(i AS STRING), 'ac', named_struct('aca', i))),"
        " array(i, i + 1), array(array(i), array(i + 1, NULL)), array(named_struct('ab', CAST(i AS BIGINT))),"
        " map(i, CAST(i AS BIGINT)), map(i, named_struct('ab', CAST(i AS BIGINT))), map(CAST(i AS BIGINT), array(i))"
        " FROM (SELECT CAST(id AS INT) AS i FROM range(6))",
        "ALTER TABLE {t} RENAME COLUMN nested_struct TO renamed_struct",
    ],
    "cdf-column-mapping-id-mode": [
        "CREATE TABLE {t} (id BIGINT, name STRING, value DOUBLE) USING delta TBLPROPERTIES"
        " ('delta.columnMapping.mode' = 'id', 'delta.enableChangeDataFeed' = 'true')",
        "INSERT INTO {t} VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'c', 3.5)",
        "UPDATE {t} SET value = value * 10 WHERE id = 2",
        "DELETE FROM {t} WHERE id = 3",
        "ALTER TABLE {t} RENAME COLUMN name TO label",
        "INSERT INTO {t} VALUES (4, 'd', 4.5)",
    ],
    "cdf-column-mapping-name-mode": [
        "CREATE TABLE {t} (id BIGINT, name STRING, value DOUBLE) USING delta TBLPROPERTIES"
        " ('delta.columnMapping.mode' = 'name', 'delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true')",
        "INSERT INTO {t} VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'c', 3.5)",
        "UPDATE {t} SET value = value * 10 WHERE id = 2",
        "DELETE FROM {t} WHERE id = 3",
        "ALTER TABLE {t} DROP COLUMN value",
        "INSERT INTO {t} VALUES (4, 'd')",
    ],
    "data-reader-timestamp_ntz-id-mode": [
        "CREATE TABLE {t} (id INT, tsNtz TIMESTAMP_NTZ, tsNtzPartition TIMESTAMP_NTZ) USING delta"
        " PARTITIONED BY (tsNtzPartition) TBLPROPERTIES ('delta.columnMapping.mode' = 'id')",
        "INSERT INTO {t} VALUES (0, TIMESTAMP_NTZ'2021-11-18 02:30:00.123456', TIMESTAMP_NTZ'2021-11-18 02:30:00.123456'),"
        " (1, TIMESTAMP_NTZ'2013-07-05 17:01:00.123456', TIMESTAMP_NTZ'2021-11-18 02:30:00.123456'),"
        " (2, NULL, TIMESTAMP_NTZ'2021-11-18 02:30:00.123456'),"
        " (3, TIMESTAMP_NTZ'2021-11-18 02:30:00.123456', TIMESTAMP_NTZ'2013-07-05 17:01:00.123456'),"
        " (4, TIMESTAMP_NTZ'2013-07-05 17:01:00.123456', TIMESTAMP_NTZ'2013-07-05 17:01:00.123456'),"
        " (5, NULL, NULL)",
    ],
}


def write_ipc(table: pa.Table, path: Path) -> None:
    with ipc.new_file(str(path), table.schema) as w:
        w.write_table(table)


def keep(name: str) -> bool:
    """Table data only: no Hadoop .crc side files."""
    return not (name.startswith(".") and name.endswith(".crc"))


def main() -> None:
    spark = session()
    with tempfile.TemporaryDirectory() as tmp:
        for name, stmts in TABLES.items():
            path = f"{tmp}/{name}"
            for s in stmts:
                spark.sql(s.format(t=f"delta.`{path}`"))
            dest = OUT / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(path, dest / "delta", ignore=lambda d, names: [n for n in names if not keep(n)])
            exp = dest / "expected"
            exp.mkdir()
            last = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg({"version": "max"}).collect()[0][0]
            cdf = "cdf" in name
            for v in range(last + 1):
                rows = spark.read.format("delta").option("versionAsOf", v).load(path).toArrow()
                write_ipc(rows, exp / f"v{v}.arrow")
                if cdf and v > 0:
                    ch = (spark.read.format("delta").option("readChangeFeed", "true")
                          .option("startingVersion", v).option("endingVersion", v).load(path)
                          .drop("_commit_timestamp").toArrow())
                    write_ipc(ch, exp / f"changes-v{v}.arrow")
            print(name, "versions 0 ..", last)
    spark.stop()


if __name__ == "__main__":
    main()
