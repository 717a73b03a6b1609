"""Our OpenLineage events, parsed by the pinned openlineage-python client's models.

The sales example runs with OPENLINEAGE_URL set to a consumer on loopback (a Python HTTP
server). Every event it receives is rebuilt from the client's generated classes (spec
2-0-2 and the facet versions this client names): their constructors check the types,
the required fields, the run ids (UUIDs) and the times, and an unknown field is an error.
Each facet's _schemaURL must be the one the client's class names (the pinned spec
version), and the client's serialisation of the rebuilt event must equal what we sent,
so nothing we send is lost or misnamed. The datasets' names and versions are those of
the tables on disk (delta-rs reads their versions).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from deltalake import DeltaTable

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    data_quality_assertions_dataset,
    dataset_version_dataset,
    documentation_job,
    error_message_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    parent_run,
    schema_dataset,
)
from openlineage.client.serde import Serde

REPO = Path(__file__).resolve().parent.parent


class _Consumer(BaseHTTPRequestHandler):
    events: list[dict] = []

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length", "0"))
        type(self).events.append(json.loads(self.rfile.read(n)))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def sales_events(tmp_path_factory):
    work = tmp_path_factory.mktemp("openlineage")
    binary = work / "orchestrator"
    proc = subprocess.run(["go", "build", "-o", str(binary), "./cmd/orchestrator"], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"go build ./cmd/orchestrator failed:\n{proc.stderr}")
    example = work / "sales"
    shutil.copytree(REPO / "examples" / "pipelines" / "sales", example, ignore=shutil.ignore_patterns("warehouse"))
    _Consumer.events = []
    server = HTTPServer(("127.0.0.1", 0), _Consumer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {k: v for k, v in os.environ.items() if k != "ORCH_WAREHOUSE"}
        env["OPENLINEAGE_URL"] = f"http://127.0.0.1:{server.server_address[1]}"
        run = subprocess.run([str(binary), "run", str(example / "pipeline.yaml")], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
    finally:
        server.shutdown()
    return example, list(_Consumer.events)


def _facet(cls, d: dict, **fields):
    """Builds facet cls from its JSON d with fields (the nested objects already built)."""
    plain = {k: v for k, v in d.items() if not k.startswith("_") and k not in fields}
    obj = cls(**plain, **fields)
    assert d["_schemaURL"] == obj._schemaURL, f"{cls.__name__}: _schemaURL {d['_schemaURL']}, the client names {obj._schemaURL}"
    assert d["_producer"].startswith("https://")
    obj._producer = d["_producer"]
    return obj


def _run_facets(facets: dict) -> dict:
    out = {}
    for key, d in facets.items():
        if key == "parent":
            root = d.get("root")
            out[key] = _facet(
                parent_run.ParentRunFacet,
                d,
                run=parent_run.Run(**d["run"]),
                job=parent_run.Job(**d["job"]),
                root=parent_run.Root(run=parent_run.RootRun(**root["run"]), job=parent_run.RootJob(**root["job"])) if root else None,
            )
        elif key == "nominalTime":
            out[key] = _facet(nominal_time_run.NominalTimeRunFacet, d)
        elif key == "errorMessage":
            out[key] = _facet(error_message_run.ErrorMessageRunFacet, d)
        else:
            pytest.fail(f"a run facet the client does not know: {key}")
    return out


def _job_facets(facets: dict) -> dict:
    out = {}
    for key, d in facets.items():
        if key == "jobType":
            out[key] = _facet(job_type_job.JobTypeJobFacet, d)
        elif key == "documentation":
            out[key] = _facet(documentation_job.DocumentationJobFacet, d)
        else:
            pytest.fail(f"a job facet the client does not know: {key}")
    return out


def _dataset_facets(facets: dict) -> dict:
    out = {}
    for key, d in facets.items():
        if key == "schema":
            out[key] = _facet(schema_dataset.SchemaDatasetFacet, d, fields=[schema_dataset.SchemaDatasetFacetFields(**f) for f in d["fields"]])
        elif key == "version":
            out[key] = _facet(dataset_version_dataset.DatasetVersionDatasetFacet, d)
        elif key == "columnLineage":
            fields = {
                col: column_lineage_dataset.Fields(
                    inputFields=[
                        column_lineage_dataset.InputField(
                            **{k: v for k, v in f.items() if k != "transformations"},
                            transformations=[column_lineage_dataset.Transformation(**t) for t in f.get("transformations", [])],
                        )
                        for f in spec["inputFields"]
                    ]
                )
                for col, spec in d["fields"].items()
            }
            out[key] = _facet(column_lineage_dataset.ColumnLineageDatasetFacet, d, fields=fields)
        else:
            pytest.fail(f"a dataset facet the client does not know: {key}")
    return out


def _rebuild(ev: dict) -> RunEvent:
    def dataset(cls, d, extra):
        kw = {"namespace": d["namespace"], "name": d["name"], "facets": _dataset_facets(d.get("facets", {}))}
        kw.update(extra)
        assert set(d) <= {"namespace", "name", "facets", "inputFacets", "outputFacets"}, d.keys()
        return cls(**kw)

    inputs = []
    for d in ev["inputs"]:
        inf = {}
        for key, f in d.get("inputFacets", {}).items():
            # The expectations' results: the spec's input facet, on the table they judged.
            assert key == "dataQualityAssertions", key
            assertions = [data_quality_assertions_dataset.Assertion(**a) for a in f["assertions"]]
            inf[key] = _facet(data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet, f, assertions=assertions)
        inputs.append(dataset(InputDataset, d, {"inputFacets": inf}))
    outputs = []
    for d in ev["outputs"]:
        of = {}
        for key, f in d.get("outputFacets", {}).items():
            assert key == "outputStatistics", key
            of[key] = _facet(output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet, f)
        outputs.append(dataset(OutputDataset, d, {"outputFacets": of}))
    event = RunEvent(
        eventType=RunState(ev["eventType"]),
        eventTime=ev["eventTime"],
        run=Run(runId=ev["run"]["runId"], facets=_run_facets(ev["run"].get("facets", {}))),
        job=Job(namespace=ev["job"]["namespace"], name=ev["job"]["name"], facets=_job_facets(ev["job"].get("facets", {}))),
        inputs=inputs,
        outputs=outputs,
        producer=ev["producer"],
    )
    assert ev["schemaURL"] == event.schemaURL, f"schemaURL {ev['schemaURL']}, the client's {event.schemaURL}"
    return event


def _drop_empty(v):
    if isinstance(v, dict):
        return {k: _drop_empty(x) for k, x in v.items() if x not in ({}, [], None)}
    if isinstance(v, list):
        return [_drop_empty(x) for x in v]
    return v


def test_events_parse_with_the_openlineage_client(sales_events):
    _, events = sales_events
    assert len(events) == 12, [(e["eventType"], e["job"]["name"]) for e in events]
    for ev in events:
        rebuilt = _rebuild(ev)
        assert _drop_empty(Serde.to_dict(rebuilt)) == _drop_empty(ev), json.dumps(ev, indent=1)


def test_dataset_names_and_versions_are_the_tables(sales_events):
    example, events = sales_events
    warehouse = (example / "warehouse").resolve()
    completes = {e["job"]["name"]: e for e in events if e["eventType"] == "COMPLETE"}
    for job, table in [
        ("sales.ingest_sales", "bronze/sales_transactions"),
        ("sales.capture_sales_history", "audit/sales_transactions_history"),
        ("sales.ingest_customers", "staging/customers"),
        ("sales.merge_customers", "sales/customer"),
    ]:
        out = completes[job]["outputs"][0]
        assert out["namespace"] == "file"
        assert out["name"] == str(warehouse / table)
        assert int(out["facets"]["version"]["datasetVersion"]) == DeltaTable(str(warehouse / table)).version(), job
        stats = out["outputFacets"]["outputStatistics"]
        assert stats["rowCount"] > 0 and stats["size"] > 0 and stats["fileCount"] > 0, job


def test_quality_assertions_are_an_input_facet(sales_events):
    example, events = sales_events
    warehouse = (example / "warehouse").resolve()
    ingest = next(e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"] == "sales.ingest_sales")
    judged = [d for d in ingest["inputs"] if "dataQualityAssertions" in d.get("inputFacets", {})]
    assert len(judged) == 1, ingest["inputs"]
    table = warehouse / "bronze/sales_transactions"
    assert judged[0]["name"] == str(table)
    assert int(judged[0]["facets"]["version"]["datasetVersion"]) == DeltaTable(str(table)).version()
    assertions = judged[0]["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert {a["assertion"] for a in assertions} >= {"positive_quantity"}, assertions
    assert all("dataQualityAssertions" not in d.get("facets", {}) for e in events for d in e["outputs"] + e["inputs"])
