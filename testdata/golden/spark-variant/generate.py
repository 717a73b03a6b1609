"""Writes a Delta table with a VARIANT column made by Delta-Spark, and what Spark reads
from it, for delta's TestSparkVariantTable:

  table/          CREATE TABLE (id BIGINT, v VARIANT, a ARRAY<VARIANT>) and two INSERTs:
                  objects, arrays, nested values, strings, numbers, booleans, decimals,
                  a date and a timestamp, a JSON null, a SQL NULL
  expected.json   {id: to_json(v)} and {id: to_json(a)} as Spark returns them, per version

Run with the interop virtualenv (pyspark, delta-spark; Java 17):
  python testdata/golden/spark-variant/generate.py
"""

import json
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

INSERTS = [
    """(1, parse_json('{"a":1,"b":[true,null,"x"],"c":{"d":1.5,"e":"f"}}'), array(parse_json('1'), parse_json('"s"'))),
       (2, parse_json('42'), NULL),
       (3, NULL, array()),
       (4, parse_json('null'), array(parse_json('null')))""",
    """(5, parse_json('"text with \\\\"quotes\\\\" and ünïcode"'), NULL),
       (6, parse_json('[1, 2.25, -3e10, 12345678901234567890]'), NULL),
       (7, CAST(CAST(12.345 AS DECIMAL(10, 3)) AS VARIANT), NULL),
       (8, CAST(DATE'2024-02-29' AS VARIANT), NULL),
       (9, CAST(TIMESTAMP'2024-02-29 12:34:56.789' AS VARIANT), NULL),
       (10, parse_json('{"nested":{"deeper":{"deepest":[{"k":false}]}}}'), NULL)""",
]


def main() -> None:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    delta_version = metadata.version("delta-spark")
    spark_minor = ".".join(metadata.version("pyspark").split(".")[:2])
    ivy = Path(os.environ.get("ORCH_IVY_DIR", Path.home() / ".cache" / "orchestrator-ivy"))
    spark = (
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
    out = Path(__file__).resolve().parent
    table = out / "table"
    shutil.rmtree(table, ignore_errors=True)
    spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT, v VARIANT, a ARRAY<VARIANT>) USING delta")
    for values in INSERTS:
        spark.sql(f"INSERT INTO delta.`{table}` VALUES {values}")
    expected = {"engine": f"Apache-Spark/{metadata.version('pyspark')} Delta-Lake/{delta_version}", "versions": {}}
    for version in range(len(INSERTS) + 1):
        rows = spark.sql(f"SELECT id, to_json(v) AS v, to_json(a) AS a FROM delta.`{table}` VERSION AS OF {version} ORDER BY id").collect()
        expected["versions"][str(version)] = [r.asDict() for r in rows]
    # Hadoop's checksum side files are not table data.
    for crc in table.rglob(".*.crc"):
        crc.unlink()
    (out / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
