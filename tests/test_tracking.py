"""doceval.tracking against real MLflow 3.17: a temp sqlite store, a real `mlflow server`, no mocks."""

from __future__ import annotations

import copy
import csv
import http.server
import io
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_agent import serving
from mlflow.tracking import MlflowClient
from tiny_project import make_tiny_project

import doceval
from doceval import tracking
from doceval.cli.main import main
from doceval.common.redact import forget_secrets
from doceval.errors import UsageError

SENTINEL = "sk-doceval-sentinel-7f3a9c1e55d2"
# The tests that need the real `mlflow server` (started once for the module, only when one of them is selected).
SERVER_TESTS = ("test_real_mlflow_server", "test_mlflow_never_prints_the_credentials_of_its_tracking_uri")


@pytest.fixture(autouse=True)
def _quiet_mlflow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)


def make_summary(split: str | None = "test", recall: float = 0.75, golden_md5: str = "0123456789abcdef0123456789abcdef") -> dict[str, Any]:  # fmt: skip
    return {
        "metrics": {
            "recall_at_k": recall,
            "mrr": 0.5,
            "answer_accuracy": None,
            "not_judged": True,
            "counts": {"n_entries": 3, "n_in_scope": 2, "n_out_of_scope": 1, "judge_errors": 0},
            "ci95": {"recall_at_k": [0.5, 1.0], "mrr": [0.25, 0.75], "answer_accuracy": None},
            "by_library": {
                "numpy": {"recall_at_k": 1.0, "mrr": 1.0, "answer_accuracy": None, "n": 1},
                "pandas": {"recall_at_k": 0.5, "mrr": 0.0, "answer_accuracy": None, "n": 2},
            },
            "by_pin": {"numpy@2.1": {"recall_at_k": 1.0, "n": 1}},
        },
        "config": {
            "split": split,
            "k": 5,
            "retriever": {"name": "dense", "model": "all-MiniLM-L6-v2"},
            "floors": {
                "global": 0.3,
                "per_library": {"numpy": 0.35, "pandas": 0.4},
                "source": "calibrated:eval/calibration/floors.json",
                "provenance": {"split": "calibration", "objective": "f1"},
            },
            "golden": {"path": "data/golden/v1.jsonl", "md5": golden_md5},
            "candidates": {"index_hash": "idx-hash-42", "candidates_k": 20},
            "provenance": {"git_commit": "deadbeefcafe", "git_dirty": True, "versions": {"mlflow": "3.17.2"}},
            "answerer": {"name": "extractive"},
            "judge": {"name": "none"},
            "usage": {
                "by_role": {
                    "answerer": {"prompt_tokens": 100, "completion_tokens": 20, "requests": 3, "cost_usd": 0.01},
                    "judge": {"prompt_tokens": 50, "completion_tokens": 5, "requests": 3, "cost_usd": 0.002},
                },
                "cache": {"hits": 1, "misses": 5},
            },
        },
        "entries": [
            {"id": "q1", "split": split, "library": "numpy", "version": "2.1", "kind": "api", "out_of_scope": False,
             "refused": False, "answer": "use np.sum", "scores": {"recall_at_k": 1.0, "mrr": 1.0, "answer_accuracy": None}},
            {"id": "q2", "split": split, "library": "pandas", "version": "2.2", "kind": "api", "out_of_scope": False,
             "refused": False, "answer": "df.merge", "scores": {"recall_at_k": 1.0, "mrr": 0.0, "answer_accuracy": None}},
            {"id": "q3", "split": split, "library": "pandas", "version": "2.2", "kind": "oos", "out_of_scope": True,
             "refused": True, "answer": None, "scores": {"recall_at_k": None, "mrr": None, "answer_accuracy": None}},
        ],
    }  # fmt: skip


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    uri: str
    log: Path


@pytest.fixture(scope="module")
def mlflow_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server | None]:
    """A real `mlflow server` on a free 127.0.0.1 port, started by the first (slow) test that asks for it: an
    unmarked test of this module must not start a process (tests/slow_rule.py)."""
    if not any(item.name in SERVER_TESTS for item in request.session.items):
        yield None
        return
    base = tmp_path_factory.mktemp("server")
    port = free_port()
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [str(Path(sys.executable).with_name("mlflow")), "server",
           "--backend-store-uri", f"sqlite:///{base / 'server.db'}",
           "--default-artifact-root", (base / "art").as_uri(),
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]  # fmt: skip
    log = base / "server.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield Server(proc, f"http://127.0.0.1:{port}", log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and its uvicorn worker
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow sqlite db (schema migrated, no doceval experiments), created once per session.

    Creating + migrating a db costs ~5 s, so most tests start from a copy; test (g) creates its own from
    scratch (concurrently) and so covers first-time creation."""
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


def new_store(tmp_path: Path, template_db: Path) -> str:
    (tmp_path / "mlruns").mkdir(exist_ok=True)
    shutil.copyfile(template_db, tmp_path / "mlruns" / "mlflow.db")
    uri = tracking.tracking_uri(None, tmp_path)
    tracking.ensure_store(uri, tmp_path)
    return uri


def golden_file(tmp_path: Path) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text('{"id": "q1"}\n{"id": "q2"}\n{"id": "q3"}\n', encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------------ URIs


def test_tracking_uri_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tracking.tracking_uri(None, tmp_path)
    assert default == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"
    assert default.startswith("sqlite:////")  # absolute
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert tracking.tracking_uri(None, tmp_path) == "http://127.0.0.1:5999"
    assert tracking.tracking_uri("http://example.invalid:5000", tmp_path) == "http://example.invalid:5000"
    # relative sqlite paths and bare paths are made absolute against root
    assert (
        tracking.tracking_uri("sqlite:///store/x.db", tmp_path)
        == f"sqlite:///{tmp_path.resolve()}/store/x.db"
    )
    assert tracking.tracking_uri("runs", tmp_path) == f"sqlite:///{tmp_path.resolve()}/runs/mlflow.db"
    # inside `dvc exp run --temp/--queue` the cwd is a temp copy; DVC_ROOT names the parent repo
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "repo"))
    assert (
        tracking.tracking_uri(None, tmp_path / "exp-tmp")
        == f"sqlite:///{tmp_path.resolve()}/repo/mlruns/mlflow.db"
    )
    monkeypatch.delenv("DVC_ROOT")
    assert tracking.experiment_name("calibration") == "doceval-calibration"
    assert tracking.experiment_name("test") == "doceval-test"
    assert tracking.experiment_name("dev") == "doceval-dev"
    assert tracking.experiment_name(None) == "doceval-all"
    with pytest.raises(UsageError, match="cannot be opened"):  # MLflow 3.17 refuses the old file store
        tracking.ensure_store((tmp_path / "fs").as_uri(), tmp_path)


# ------------------------------------------------------------------------------------------------ (a)


@pytest.mark.slow
def test_log_run_contents_and_split_experiments(tmp_path: Path, template_db: Path) -> None:
    uri = new_store(tmp_path, template_db)
    golden = golden_file(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("# report\n", encoding="utf-8")
    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "recall.png").write_bytes(b"\x89PNG fake")
    summary = make_summary("test")
    before = copy.deepcopy(summary)
    test_id = tracking.log_run(summary, uri=uri, root=tmp_path, run_name="dense-test", golden_path=golden,
                               artifacts={"report.md": report, "plots": plots, "figs/pr.png": plots / "recall.png"}, extra_tags={"stage": "evaluate"})  # fmt: skip
    assert summary == before  # the caller's summary is not mutated
    cal_id = tracking.log_run(
        make_summary("calibration", recall=0.6), uri=uri, root=tmp_path, golden_path=golden
    )

    client = MlflowClient(uri)
    run = client.get_run(test_id)
    exp_test = client.get_experiment(run.info.experiment_id)
    exp_cal = client.get_experiment(client.get_run(cal_id).info.experiment_id)
    assert exp_test.name == "doceval-test" and exp_cal.name == "doceval-calibration"
    assert (
        exp_test.artifact_location == (tmp_path / "mlruns" / "artifacts" / "doceval-test").resolve().as_uri()
    )
    # calibration and test runs are kept apart
    assert [r.info.run_id for r in client.search_runs([exp_test.experiment_id])] == [test_id]
    assert [r.info.run_id for r in client.search_runs([exp_cal.experiment_id])] == [cal_id]
    assert run.info.run_name == "dense-test" and run.info.status == "FINISHED"

    params = run.data.params
    assert params["split"] == "test" and params["k"] == "5"
    assert params["retriever.name"] == "dense"
    assert params["floors.global"] == "0.3" and params["floors.per_library.pandas"] == "0.4"
    assert params["floors.source"] == "calibrated:eval/calibration/floors.json"
    assert params["golden.md5"] == "0123456789abcdef0123456789abcdef"
    assert not any(k.startswith(("usage", "provenance")) for k in params)

    m = run.data.metrics
    assert m["recall_at_k"] == 0.75 and m["mrr"] == 0.5
    assert "answer_accuracy" not in m  # null stays absent, never 0
    assert "not_judged" not in m  # a flag, not a metric (it is a tag)
    assert m["n_entries"] == 3 and m["n_out_of_scope"] == 1 and m["judge_errors"] == 0
    assert m["recall_at_k_ci_lo"] == 0.5 and m["recall_at_k_ci_hi"] == 1.0
    assert "answer_accuracy_ci_lo" not in m
    assert m["numpy.recall_at_k"] == 1.0 and m["pandas.mrr"] == 0.0 and m["pandas.n"] == 2
    assert "numpy.answer_accuracy" not in m
    assert m["usage.answerer.prompt_tokens"] == 100 and m["usage.judge.cost_usd"] == 0.002
    assert m["usage.total.requests"] == 6

    tags = run.data.tags
    assert tags["split"] == "test" and tags["retriever"] == "dense"
    assert tags["git_commit"] == "deadbeefcafe" and tags["git_dirty"] == "true"
    assert tags["golden_md5"] == "0123456789abcdef0123456789abcdef"
    assert tags["index_hash"] == "idx-hash-42"
    assert tags["floors_source"] == "calibrated:eval/calibration/floors.json"
    assert tags["doceval_version"] == doceval.__version__
    assert tags["stage"] == "evaluate" and tags["not_judged"] == "true"

    names = {a.path for a in client.list_artifacts(test_id)}
    assert {"summary.json", "entries.csv", "config.yaml", "report.md", "plots", "figs"} <= names
    assert [a.path for a in client.list_artifacts(test_id, "plots")] == ["plots/recall.png"]
    assert [a.path for a in client.list_artifacts(test_id, "figs")] == ["figs/pr.png"]
    table = list(csv.DictReader(io.StringIO(Path(client.download_artifacts(test_id, "entries.csv", str(tmp_path / "dl"))).read_text())))  # fmt: skip
    assert [r["id"] for r in table] == ["q1", "q2", "q3"]
    assert table[2]["out_of_scope"] == "True" and table[2]["recall_at_k"] == "" and table[1]["mrr"] == "0.0"
    assert list(table[0])[:7] == ["id", "split", "kind", "pin", "question", "out_of_scope", "refused"]

    assert run.inputs is not None
    (ds,) = run.inputs.dataset_inputs
    assert ds.dataset.name == "golden" and ds.dataset.digest == "0123456789abcdef0123456789abcdef"
    assert {t.key: t.value for t in ds.tags}["mlflow.data.context"] == "evaluation"
    assert json.loads(ds.dataset.profile or "null") == {"num_rows": 3}


# ------------------------------------------------------------------------------------------------ (b)


@pytest.mark.slow
def test_parent_with_children(tmp_path: Path, template_db: Path) -> None:
    uri = new_store(tmp_path, template_db)
    parent = tracking.start_parent("sweep-floors", uri=uri, root=tmp_path, split="calibration",
                                   tags={"sweep": "floors.global"})  # fmt: skip
    kids = [
        tracking.log_run(
            make_summary("calibration", recall=r),
            uri=uri,
            root=tmp_path,
            run_name=f"floor={r}",
            parent_run_id=parent,
            extra_tags={"sweep.point": str(r)},
        )  # fmt: skip
        for r in (0.2, 0.4)
    ]
    client = MlflowClient(uri)
    p = client.get_run(parent)
    assert p.info.status == "FINISHED" and p.data.tags["sweep"] == "floors.global"
    assert client.get_experiment(p.info.experiment_id).name == "doceval-calibration"
    found = client.search_runs([p.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    assert sorted(r.info.run_id for r in found) == sorted(kids)
    for kid in kids:
        run = client.get_run(kid)
        assert run.data.tags["mlflow.parentRunId"] == parent
        assert run.info.experiment_id == p.info.experiment_id


# ------------------------------------------------------------------------------------------------ (d)


def test_check_reachable_closed_port_is_quick(tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(UsageError, match="cannot be reached.*unset MLFLOW_TRACKING_URI"):
        tracking.check_reachable(uri)
    with pytest.raises(UsageError, match="cannot be reached"):
        tracking.log_run(make_summary(), uri=uri, root=tmp_path)  # fails fast, no MLflow retry storm
    assert time.monotonic() - t0 < 10
    # a server that accepts connections but never answers must not hang past the timeout either
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(UsageError, match="cannot be reached") as err:
            tracking.check_reachable(f"http://user:s3cr3tpw@127.0.0.1:{port}", timeout_s=1)
        assert time.monotonic() - t0 < 3
        assert "s3cr3tpw" not in str(err.value)  # credentials in the URI are not echoed
    tracking.check_reachable(tracking.tracking_uri(None, tmp_path))  # local sqlite: nothing to probe


# ------------------------------------------------------------------------------------------------ (e)


@pytest.mark.slow
def test_secrets_never_reach_the_store(
    tmp_path: Path, template_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCEVAL_TEST_KEY", SENTINEL)
    uri = new_store(tmp_path, template_db)
    summary = make_summary("test")
    summary["config"]["answerer"] = {
        "name": "openai", "api_key_env": "DOCEVAL_TEST_KEY", "model": "m",
        "leaked_field": SENTINEL,                                  # equal to the key: dropped / redacted
        "base_url": f"http://proxy.local/v1?token={SENTINEL}",    # containing it: dropped / redacted
        "api_key": "literal-api-key-value-123",                    # an api_key key: never logged
    }  # fmt: skip
    summary["entries"][0]["answer"] = f"the key is {SENTINEL}"
    extra = tmp_path / "notes.txt"
    extra.write_text(f"debug: {SENTINEL}\n", encoding="utf-8")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "agent.log").write_text(f"Authorization: Bearer {SENTINEL}\n", encoding="utf-8")
    flat = {"answerer.api_key_env": "DOCEVAL_TEST_KEY", "answerer.leaked_field": SENTINEL,
            "judge.api_key": "literal-api-key-value-123", "k": 5}  # fmt: skip
    first = tracking.log_run(summary, uri=uri, root=tmp_path, golden_path=golden_file(tmp_path),
                             artifacts={"notes.txt": extra, "logs": tmp_path / "logs"}, extra_tags={"oops": SENTINEL, "my_api_key": "x1"})  # fmt: skip
    run_ids = [first, tracking.log_run(summary, uri=uri, root=tmp_path, flat_config=flat)]
    client = MlflowClient(uri)
    run = client.get_run(run_ids[0])
    assert run.data.params["answerer.api_key_env"] == "DOCEVAL_TEST_KEY"  # the variable's name is fine
    assert run.data.params["answerer.name"] == "openai"
    assert "answerer.leaked_field" not in run.data.params and "answerer.base_url" not in run.data.params
    assert "answerer.api_key" not in run.data.params
    assert "oops" not in run.data.tags and "my_api_key" not in run.data.tags
    flat_params = client.get_run(run_ids[1]).data.params
    assert flat_params == {"answerer.api_key_env": "DOCEVAL_TEST_KEY", "k": "5"}
    assert {"notes.txt", "logs"} <= {a.path for a in client.list_artifacts(run_ids[0])}

    store = tmp_path / "mlruns"
    files = [p for p in store.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in files) and any(p.name == "summary.json" for p in files)
    for path in files:
        data = path.read_bytes()
        assert SENTINEL.encode() not in data, path
        assert b"literal-api-key-value-123" not in data, path


# ------------------------------------------------------------------------------------------------ (f)


@pytest.mark.slow
def test_load_summary_round_trip(tmp_path: Path, template_db: Path) -> None:
    uri = new_store(tmp_path, template_db)
    summary = make_summary("test")
    run_id = tracking.log_run(summary, uri=uri, root=tmp_path)
    loaded = tracking.load_summary_from_run(run_id, uri, tmp_path)
    # The entries come back from the run's traces (checked against summary.json), saying so.
    assert loaded.pop("entries_source") == f"traces of run {run_id}"
    assert {k: v for k, v in loaded.items() if k != "entries"} == {
        k: v for k, v in summary.items() if k != "entries"
    }
    by_id = {e["id"]: e for e in loaded["entries"]}
    for e in summary["entries"]:
        assert {k: v for k, v in by_id[e["id"]]["scores"].items() if v is not None} == {
            k: v for k, v in e["scores"].items() if v is not None
        }
        assert by_id[e["id"]]["refused"] is e["refused"] and by_id[e["id"]]["answer"] == e["answer"]
    assert tracking.load_summary_from_run(run_id, uri, tmp_path) == summary | {
        "entries_source": f"traces of run {run_id}",
        "entries": loaded["entries"],
    }
    with pytest.raises(UsageError, match="not found"):
        tracking.load_summary_from_run("0" * 32, uri, tmp_path)


# ------------------------------------------------------------------------------------------------ (g)


def _writer(uri: str, root: str, barrier: Any, index: int) -> None:
    barrier.wait(timeout=60)
    tracking.ensure_store(uri, Path(root))
    tracking.log_run(make_summary("test", recall=index / 10), uri=uri, root=Path(root), run_name=f"w{index}")


@pytest.mark.slow
def test_ensure_store_idempotent_and_concurrent(tmp_path: Path) -> None:
    uri = tracking.tracking_uri(None, tmp_path)
    ctx = mp.get_context("spawn")  # like joblib/loky workers: fresh interpreters
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(uri, str(tmp_path), barrier, i)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]

    tracking._ENSURED.clear()  # force the real work again: idempotent on an existing store
    tracking.ensure_store(uri, tmp_path)
    tracking.ensure_store(uri, tmp_path)
    client = MlflowClient(uri)
    names = [e.name for e in client.search_experiments()]
    assert names.count("doceval-test") == 1 and names.count("doceval-calibration") == 1
    test_exp = client.get_experiment_by_name("doceval-test")
    assert test_exp is not None
    runs = client.search_runs([test_exp.experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["w0", "w1"]
    assert all(r.info.status == "FINISHED" for r in runs)


# ------------------------------------------------------------------------------------------------ (c)


@pytest.mark.slow
def test_real_mlflow_server(tmp_path: Path, mlflow_server: Server | None) -> None:
    assert mlflow_server is not None
    uri = mlflow_server.uri
    _wait_for(mlflow_server)
    tracking.check_reachable(uri)
    tracking.ensure_store(uri, tmp_path)
    run_id = tracking.log_run(make_summary("test"), uri=uri, root=tmp_path, run_name="via-server",
                              golden_path=golden_file(tmp_path))  # fmt: skip

    def api(path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{uri}/api/2.0/mlflow/{path}", data=data,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as resp:
            out: dict[str, Any] = json.load(resp)
            return out

    got = api("runs/get?" + urllib.parse.urlencode({"run_id": run_id}))["run"]
    tags = {t["key"]: t["value"] for t in got["data"]["tags"]}
    assert tags["split"] == "test" and tags["git_commit"] == "deadbeefcafe"
    assert tags["golden_md5"] == "0123456789abcdef0123456789abcdef" and tags["index_hash"] == "idx-hash-42"
    assert got["info"]["status"] == "FINISHED" and got["info"]["run_name"] == "via-server"
    metrics = {m["key"]: m["value"] for m in got["data"]["metrics"]}
    assert metrics["recall_at_k"] == 0.75 and "answer_accuracy" not in metrics
    exp = api("experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": "doceval-test"}))
    found = api("runs/search", {"experiment_ids": [exp["experiment"]["experiment_id"]],
                                "filter": "tags.golden_md5 = '0123456789abcdef0123456789abcdef'"})  # fmt: skip
    assert [r["info"]["run_id"] for r in found["runs"]] == [run_id]
    assert api("experiments/get-by-name?experiment_name=doceval-calibration")["experiment"]["name"]
    assert tracking.load_summary_from_run(run_id, uri, tmp_path)["metrics"]["recall_at_k"] == 0.75

    # The entries as traces through the server's REST API: one each, with its retriever span and assessments.
    summary = make_summary("test")
    summary["entries"][0]["retrieved"] = [["numpy@2.1:numpy.sum", 0.91], ["numpy@2.1:numpy.add", 0.5]]
    summary["entries"][0]["relevant_ids"] = ["numpy@2.1:numpy.sum"]
    run_id = tracking.log_run(
        summary, uri=uri, root=tmp_path, run_name="traced", golden_path=golden_file(tmp_path)
    )
    client = MlflowClient(uri)
    traces = list(client.search_traces(locations=[exp["experiment"]["experiment_id"]], run_id=run_id))
    assert sorted(t.info.tags["doceval.entry_id"] for t in traces) == ["q1", "q2", "q3"]
    q1 = next(t for t in traces if t.info.tags["doceval.entry_id"] == "q1")
    search = next(sp for sp in q1.data.spans if sp.span_type == "RETRIEVER")
    assert [[d["id"], d["metadata"]["score"]] for d in search.outputs] == summary["entries"][0]["retrieved"]
    got = {a.name: a.value for a in q1.info.assessments}
    assert got["relevant_ids"] == ["numpy@2.1:numpy.sum"] and got["mrr"] == 1.0 and got["refused"] is False
    assert len(tracking.load_summary_from_run(run_id, uri, tmp_path)["entries"]) == 3


def test_header_variables_of_an_http_agent_are_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """agent.headers_env maps header names to variable NAMES; every variable's value is scrubbed."""
    monkeypatch.setenv("MY_AGENT_TOKEN", "Bearer agent-secret-123456")
    cfg = {
        "agent": {
            "name": "http",
            "url": "http://127.0.0.1:1/ask",
            "headers_env": {"Authorization": "MY_AGENT_TOKEN"},
        }
    }
    secrets = tracking.secret_values(cfg)
    assert "Bearer agent-secret-123456" in secrets
    assert "agent-secret-123456" not in json.dumps(
        tracking.scrub({"note": "Bearer agent-secret-123456"}, secrets)
    )


# ------------------------------------------------------------------------------------------- issue 39 H6, H12

TRACKING_PASSWORD = "Tr4ck1ng-Pa55w0rd-0451"
TINY_DOCS = {
    "pydantic@2.8.2": [("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nA dict of the model.")]
}
TINY_GOLDEN = json.dumps({"id": "a1", "question": "dict of the model", "library": "pydantic", "version": "2.8.2",
                          "relevant_ids": ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump"], "split": "test",
                          "kind": "lookup", "reference_answer": "model_dump", "out_of_scope": False,
                          "expected_apis": ["model_dump"], "forbidden_apis": []}) + "\n"  # fmt: skip


class _NotMlflow(http.server.BaseHTTPRequestHandler):
    """A web server that answers everything (its /health too) with a 404 page, as a wrong port would."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = b"<!DOCTYPE html><html><body><h1>404 Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


def test_a_tracking_uri_that_answers_but_is_not_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """H12: a URI where some web server answers: exit 2 naming it (credentials masked) and the fix, for every
    command that reads or writes runs (history was a traceback, exit 1)."""
    make_tiny_project(tmp_path, TINY_DOCS, TINY_GOLDEN)
    monkeypatch.chdir(tmp_path)
    with serving(_NotMlflow) as server:
        uri = f"http://alice:{TRACKING_PASSWORD}@127.0.0.1:{server.server_address[1]}"
        with pytest.raises(UsageError, match="answers, but not as an MLflow tracking server"):
            tracking.check_reachable(uri)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        for argv in (
            ["history", "--metric", "hit_rate"],
            ["eval", "--quiet", "retriever=bm25", "floors=zero"],
        ):
            forget_secrets()
            assert main(argv) == 2, argv
            out, err = capfd.readouterr()
            assert "not as an MLflow tracking server" in err and "Traceback" not in out + err
            assert TRACKING_PASSWORD not in out + err and "<!DOCTYPE" not in err


@pytest.mark.slow
def test_mlflow_never_prints_the_credentials_of_its_tracking_uri(
    tmp_path: Path,
    mlflow_server: Server | None,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """H6: MLflow itself prints "View run ... at: http://user:pass@host/..." for an http store: the
    credentials of MLFLOW_TRACKING_URI are registered from the environment and masked in what it prints."""
    assert mlflow_server is not None
    _wait_for(mlflow_server)
    make_tiny_project(tmp_path, TINY_DOCS, TINY_GOLDEN)
    monkeypatch.chdir(tmp_path)
    host = mlflow_server.uri.split("://", 1)[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://alice:{TRACKING_PASSWORD}@{host}")
    forget_secrets()
    code = main(["eval", "--quiet", "--output", "run.json", "retriever=bm25", "floors=zero"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "View run" in out + err  # MLflow printed its line: the path under test ran
    assert TRACKING_PASSWORD not in out + err and "Traceback" not in out + err
    assert TRACKING_PASSWORD not in (tmp_path / "run.json").read_text()


def _wait_for(server: Server) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{server.uri}/health", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if server.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("mlflow server did not start:\n" + server.log.read_text()[-3000:])
        time.sleep(0.25)
