"""Writes the commitInfo of two MERGE commits made by Delta-Spark, the key set of its
MERGE operationMetrics that delta's TestMergeMetricsKeysAreSparks compares ours with:

  merge.json      MERGE (update, delete, insert) into a table without deletion vectors
  merge-dv.json   the same MERGE into a table with delta.enableDeletionVectors

Run with the interop virtualenv (pyspark, delta-spark; Java 17):
  python testdata/golden/spark-merge/generate.py
"""

import json
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path


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
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    out = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as tmp:
        for name, dv in (("merge.json", False), ("merge-dv.json", True)):
            path = f"{tmp}/{name}"
            spark.sql(
                f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta "
                f"TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dv).lower()}')"
            )
            spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
            spark.sql(
                f"MERGE INTO delta.`{path}` t USING (SELECT * FROM VALUES (1, 'A'), (2, NULL), (5, 'e') AS s(id, v)) s "
                "ON t.id = s.id "
                "WHEN MATCHED AND s.v IS NULL THEN DELETE "
                "WHEN MATCHED THEN UPDATE SET v = s.v "
                "WHEN NOT MATCHED THEN INSERT *"
            )
            log = sorted(Path(path, "_delta_log").glob("*.json"))[-1]
            for line in log.read_text().splitlines():
                action = json.loads(line)
                if "commitInfo" in action:
                    info = action["commitInfo"]
                    assert info["operation"] == "MERGE", info
                    keep = {k: info[k] for k in ("operation", "operationMetrics", "engineInfo")}
                    (out / name).write_text(json.dumps(keep, indent=1, sort_keys=True) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
