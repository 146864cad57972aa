"""Per-entry MLflow traces, read back through MLflow's own API from a real sqlite store: one trace per entry
linked to its run, the RETRIEVER span with the retrieved ids and scores, the golden labels as expectations,
the outcomes as feedback (scores, refusal, failure stage, the judge's verdict and reason with the judge
hash), token usage on the LLM spans, the golden set as an evaluation dataset, compare reading the traces, and
a fake API key that reaches no trace. (The real `mlflow server` case is in test_tracking.py.)"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from openai_server import FakeOpenAI
from openai_server import openai_server as openai_server  # noqa: F401 - the fixture
from test_eval_cli import llm_overrides, overrides
from test_eval_cli import project as project  # noqa: F401 - the tiny project fixture

from doceval.cli.main import main

FAKE_KEY = "sk-test-traces-0123456789abcdef"


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()  # migrated once (~5 s), copied per test
    return path


@pytest.fixture
def store(project: Path, template_db: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    shutil.copyfile(template_db, project / "t.db")
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    return f"sqlite:///{project / 't.db'}"


def _run(client: MlflowClient, name_part: str) -> Any:
    exp = client.get_experiment_by_name("doceval-test")
    return next(r for r in client.search_runs([exp.experiment_id]) if name_part in r.info.run_name)


def _traces(client: MlflowClient, run: Any) -> list[Any]:
    return list(
        client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, max_results=500)
    )


def _dump(traces: list[Any]) -> str:
    return json.dumps([t.to_dict() for t in traces], default=str)


@pytest.mark.slow
def test_every_entry_is_a_trace_with_spans_expectations_and_feedback(
    project: Path, store: str, openai_server: FakeOpenAI
) -> None:
    args = ["eval", "--quiet", "--split", "test", "--output", "llm.json", *llm_overrides(openai_server),
            f"tracking.uri={store}"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads((project / "llm.json").read_text())
    entries = {e["id"]: e for e in summary["entries"]}
    client = MlflowClient(store)
    run = _run(client, "llm")
    assert run.info.run_name == "test · bm25 · k5 · floors 0 · v2.1 · llm"
    traces = _traces(client, run)
    assert run.data.tags["doceval.traces"] == str(len(entries)) == str(len(traces))
    assert sorted(t.info.tags["doceval.entry_id"] for t in traces) == sorted(entries)
    judge_hash = summary["config"]["judge_id"]["hash"]
    judged = 0
    for t in traces:
        e = entries[t.info.tags["doceval.entry_id"]]
        assert t.info.client_request_id == e["id"] and t.info.tags["doceval.stage"] == e["stage"]
        assert t.info.request_metadata["mlflow.sourceRun"] == run.info.run_id
        spans = {s.name: s for s in t.data.spans}
        assert spans["probe"].parent_id is None and spans["probe"].inputs["question"] == e["question"]
        retriever = spans["search"]
        assert retriever.span_type == "RETRIEVER"
        assert [[d["id"], d["metadata"]["score"]] for d in retriever.outputs] == e["retrieved"]
        assert all(d["page_content"] for d in retriever.outputs)  # the passage text, from the corpus
        assert spans["router"].outputs["refused"] == e["router_refusal"]
        tokens = spans["answerer"].attributes.get("mlflow.chat.tokenUsage")
        answerer = e["usage"].get("answerer")
        if answerer:
            assert tokens["input_tokens"] == answerer["prompt_tokens"] > 0
        else:  # refused by the router: the answerer was never called
            assert tokens is None and e["refused"]
        got = {a.name: a for a in t.info.assessments}
        for label in ("relevant_ids", "reference_answer", "expected_apis", "forbidden_apis", "out_of_scope"):
            assert got[label].value == e[label] and got[label].source.source_type == "HUMAN"
        for metric, value in e["scores"].items():
            if value is None:
                assert metric not in got  # does not apply: no feedback, not a 0
            else:
                assert got[metric].value == pytest.approx(value) and got[metric].source.source_type == "CODE"
        assert got["refused"].value is e["refused"] and got["stage"].value == e["stage"]
        if e["verdict"] is not None:
            judged += 1
            verdict = got["answer_correct"]
            assert verdict.value is e["verdict"] and verdict.rationale == e["verdict_reason"]
            assert verdict.metadata["judge_config_hash"] == judge_hash
            assert verdict.source.source_type == "LLM_JUDGE"
            assert spans["judge"].attributes["mlflow.chat.tokenUsage"]["input_tokens"] > 0
        else:
            assert "answer_correct" not in got
    assert judged == summary["metrics"]["counts"]["n_judged"] > 0
    assert FAKE_KEY not in _dump(traces)

    # The golden set as an evaluation dataset of the experiment: a record per golden entry, labels as expectations.
    dataset_id = run.data.tags["doceval.golden_dataset_id"]
    backend = client._tracking_client.store
    records, _ = backend._load_dataset_records(dataset_id)
    golden = [
        json.loads(line)
        for line in (project / "data" / "golden" / "v2.1.jsonl").read_text().splitlines()
        if line.strip()
    ]
    assert len(records) == len(golden)
    by_entry = {r.tags["entry_id"]: r for r in records}
    g = golden[0]
    assert by_entry[g["id"]].inputs == {
        "question": g["question"],
        "library": g["library"],
        "version": g["version"],
    }
    assert by_entry[g["id"]].expectations["relevant_ids"] == g["relevant_ids"]
    assert run.info.experiment_id in backend.get_dataset_experiment_ids(dataset_id)


@pytest.mark.slow
def test_tracking_traces_false_logs_the_run_without_traces(project: Path, store: str) -> None:
    assert main(["eval", "--quiet", "--split", "test", "--output", "plain.json", *overrides(),
                 f"tracking.uri={store}", "tracking.traces=false"]) == 0  # fmt: skip
    client = MlflowClient(store)
    run = _run(client, "plain")
    assert _traces(client, run) == [] and "doceval.traces" not in run.data.tags


LEAKY = """
import os

def assistant(question, library, version, session_id):
    key = os.environ["OPENAI_API_KEY"]  # a system that echoes its configuration
    return {"answer": "debug: key=" + key, "refused": False, "sources": [{"id": "lib@1:a", "score": 0.9}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}, "debug": {"api_key": key, "k": key}}
"""


@pytest.fixture
def leaky(project: Path) -> Iterator[None]:
    (project / "leaky_agent.py").write_text(LEAKY, encoding="utf-8")
    yield
    sys.modules.pop("leaky_agent", None)


@pytest.mark.slow
def test_an_external_system_is_one_call_span_and_a_leaked_key_reaches_no_trace(
    project: Path, store: str, leaky: None
) -> None:
    assert main(["eval", "--quiet", "--split", "test", "--output", "ext.json", "agent=function",
                 "agent.target=leaky_agent:assistant", "floors=zero", f"tracking.uri={store}"]) == 0  # fmt: skip
    client = MlflowClient(store)
    traces = _traces(client, _run(client, "ext"))
    assert traces
    text = _dump(traces)
    assert FAKE_KEY not in text and "<redacted>" in text  # it was there, and it was scrubbed
    spans = {s.name: s for s in traces[0].data.spans}
    assert set(spans) == {"probe", "assistant call", "sources"}
    assert spans["sources"].span_type == "RETRIEVER" and spans["sources"].outputs[0]["id"] == "lib@1:a"
    assert spans["assistant call"].attributes["doceval.usage"] == {"prompt_tokens": 3, "completion_tokens": 2}


@pytest.mark.slow
def test_compare_run_ids_reads_the_traces_and_refuses_incomplete_ones(
    project: Path, store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    for name, retriever in (("base", "retriever=bm25"), ("new", "retriever=overlap")):
        assert main(["eval", "--quiet", "--split", "test", "--output", f"{name}.json", retriever, "floors=zero",
                     f"tracking.uri={store}"]) == 0  # fmt: skip
    client = MlflowClient(store)
    base, new = _run(client, "base"), _run(client, "new")
    capsys.readouterr()
    rc = main(["compare", "base.json", "new.json"])  # 3 when the default gate fails the new run
    from_files = capsys.readouterr().out
    assert main(["compare", base.info.run_id, new.info.run_id]) == rc
    from_runs = capsys.readouterr().out
    table = [line for line in from_files.splitlines() if line.startswith(("hit_rate", "mrr", "ndcg"))]
    assert table and all(line in from_runs for line in table)
    assert f"entries read from the traces of run {new.info.run_id}" in from_runs

    victim = _traces(client, new)[0].info.trace_id
    client.delete_traces(experiment_id=new.info.experiment_id, trace_ids=[victim])
    assert main(["compare", base.info.run_id, new.info.run_id]) == 2
    assert "traces are incomplete" in capsys.readouterr().err


@pytest.mark.slow
def test_bulk_trace_writes_store_what_start_trace_stores(tmp_path: Path, template_db: Path) -> None:
    """The batched writer builds MLflow's own rows; a trace written by it reads back exactly as one written by
    MLflow's ``start_trace`` (ids, times and locations aside)."""
    from doceval.tracking.trace_store import _bulk_start_traces, _one_transaction
    from doceval.tracking.traces import build_trace

    shutil.copyfile(template_db, tmp_path / "b.db")
    client = MlflowClient(f"sqlite:///{tmp_path / 'b.db'}")
    store = client._tracking_client.store
    entry = {"id": "e1", "split": "test", "library": "lib", "version": "1", "kind": "api", "question": "q?",
             "out_of_scope": False, "relevant_ids": ["lib@1:a"], "reference_answer": "use a", "expected_apis": ["a("],
             "expected_any": [], "forbidden_apis": ["b("], "retrieved": [["lib@1:a", 0.9]], "refused": False,
             "answer": "a()", "verdict": True, "verdict_reason": "names a", "judge_error": None, "memory_used": [],
             "system_error": None, "scores": {"hit_rate": 1.0, "mrr": 1.0, "answer_accuracy": 1.0},
             "stage": "ok", "router_refusal": None, "usage": {}}  # fmt: skip
    config = {"k": 5, "golden": {"path": "g.jsonl", "md5": "0" * 32}, "judge_id": {"hash": "h" * 16}}
    stored = []
    for mode in ("start_trace", "bulk"):
        exp = client.create_experiment(mode)
        run = client.create_run(exp)
        info, _ = build_trace(
            entry, run_id=run.info.run_id, experiment_id=exp, recorded=config, start_ms=1000
        )
        if mode == "bulk":
            with _one_transaction(store):
                assert _bulk_start_traces(store, [info])
        else:
            store.start_trace(info)
        got = store.get_trace_info(info.trace_id).to_dict()
        for key in ("trace_id", "trace_location"):
            got.pop(key)
        got["tags"].pop("mlflow.artifactLocation")
        got["tags"].pop("doceval.run_id")
        got["trace_metadata"].pop("mlflow.sourceRun")
        got["assessments"] = sorted(
            ({k: v for k, v in a.items() if k not in ("assessment_id", "trace_id", "create_time", "last_update_time")}
             for a in got["assessments"]),
            key=lambda a: a["assessment_name"],
        )  # fmt: skip
        stored.append(got)
    assert stored[0] == stored[1] and len(stored[0]["assessments"]) == 11
