"""fact_load's fact table read by Spark and delta-rs: the sales-facts example run through
our binary (the first run, then the late customer events), and "which city was this sale
in?" asked in Spark SQL two ways: the plain join on customer_sk that the fact table makes
possible, and the hand-written range join (sold_at in [valid_from, valid_to)) it replaces.
Both must give the cities the example's story says, and Spark's change feed of the fact
table must show the re-keying as updates of exactly three sales."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

REPO = Path(__file__).resolve().parent.parent

WANT = {"T-1": "Seattle", "T-2": "Tacoma", "T-3": "Tacoma", "T-4": "Portland", "T-5": "Boston"}


@pytest.fixture(scope="module")
def sales_facts(tmp_path_factory):
    work = tmp_path_factory.mktemp("sales-facts")
    binary = work / "orchestrator"
    proc = subprocess.run(["go", "build", "-o", str(binary), "./cmd/orchestrator"], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"go build ./cmd/orchestrator failed:\n{proc.stderr}")
    example = work / "example"
    shutil.copytree(REPO / "examples" / "pipelines" / "sales-facts", example, ignore=shutil.ignore_patterns("warehouse"))
    env = {k: v for k, v in os.environ.items() if k != "ORCH_WAREHOUSE"}
    for step in range(2):
        if step == 1:
            shutil.copy(example / "late" / "2026-02-01.csv", example / "landing" / "customers" / "2026-02-01.csv")
        run = subprocess.run([str(binary), "run", str(example / "pipeline.yaml")], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
    return example / "warehouse"


def test_spark_joins_on_the_key(sales_facts, spark):
    facts, dim = sales_facts / "sales" / "sales", sales_facts / "sales" / "customer"
    rows = spark.sql(
        f"SELECT s.sale_id, c.city FROM delta.`{facts}` s LEFT JOIN delta.`{dim}` c ON s.customer_sk = c.customer_sk"
    ).collect()
    assert {r["sale_id"]: r["city"] for r in rows} == WANT


def test_spark_range_join_agrees(sales_facts, spark):
    facts, dim = sales_facts / "sales" / "sales", sales_facts / "sales" / "customer"
    rows = spark.sql(
        f"SELECT s.sale_id, s.customer_sk, c.customer_sk AS range_sk FROM delta.`{facts}` s LEFT JOIN delta.`{dim}` c"
        " ON s.customer_id = c.customer_id AND s.sold_at >= c.valid_from AND s.sold_at < c.valid_to"
    ).collect()
    assert len(rows) == len(WANT)
    for r in rows:
        assert r["customer_sk"] == r["range_sk"], r


def test_spark_change_feed_shows_the_rekeying(sales_facts, spark):
    facts = sales_facts / "sales" / "sales"
    rows = spark.sql(f"SELECT sale_id, _change_type FROM table_changes_by_path('{facts}', 2, 2)").collect()
    assert sorted((r["sale_id"], r["_change_type"]) for r in rows) == sorted(
        (s, t) for s in ("T-2", "T-3", "T-5") for t in ("update_preimage", "update_postimage")
    )


def test_delta_rs_reads_the_facts(sales_facts):
    t = DeltaTable(str(sales_facts / "sales" / "sales")).to_pyarrow_table()
    assert sorted(t.column("sale_id").to_pylist()) == sorted(WANT)
    assert -1 not in t.column("customer_sk").to_pylist()


def test_spark_and_delta_rs_read_the_unknown_member(sales_facts, spark):
    """The "Unknown" member row the stage adds to the dimension: once, key -1, NULL
    business key and attributes, valid from 1900-01-01 to 9999-12-31 (UTC), current."""
    dim = sales_facts / "sales" / "customer"
    rows = spark.sql(
        f"SELECT customer_id, name, city, unix_micros(valid_from) AS f, unix_micros(valid_to) AS t, is_current"
        f" FROM delta.`{dim}` WHERE customer_sk = -1"
    ).collect()
    assert [tuple(r) for r in rows] == [(None, None, None, -2208988800000000, 253402214400000000, True)]
    t = DeltaTable(str(dim)).to_pyarrow_table()
    assert t.column("customer_sk").to_pylist().count(-1) == 1
