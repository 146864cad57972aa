"""The Python API (`from doceval import evaluate, compare, gate`) is the CLI's code with the user's system as a
parameter: a retriever function or an assistant callable, on the user's own golden set and ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import doceval
from doceval import api
from doceval.config.compose import compose

ROOT = Path(__file__).resolve().parents[1]
DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days",
        "D3": "shipping is free over fifty dollars"}  # fmt: skip
ROWS = [
    {
        "id": "q1",
        "question": "how much are late fees",
        "relevant_ids": ["D1"],
        "reference_answer": "5 dollars",
    },
    {
        "id": "q2",
        "question": "when are returns accepted",
        "relevant_ids": ["D2", "D3"],
        "reference_answer": "30",
    },
    {"id": "q3", "question": "do you sell pizza", "relevant_ids": [], "reference_answer": ""},
]


@pytest.fixture
def golden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # a user's own project: no conf/, no corpus
    rows = [{**r, "out_of_scope": not r["relevant_ids"], "expected_apis": [], "forbidden_apis": [],
             "split": None, "kind": "lookup" if r["relevant_ids"] else "off_topic"} for r in ROWS]  # fmt: skip
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(rows), encoding="utf-8")  # a JSON array, no library/version
    return path


def overlap(question: str, k: int) -> list[tuple[str, float]]:
    words = set(question.split())
    scored = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return [(d, s) for d, s in sorted(scored, key=lambda x: -x[1]) if s >= 2][:k]


def ids_only(question: str, k: int) -> list[str]:
    return [d for d, _ in overlap(question, k)]


def test_top_level_names_are_the_api() -> None:
    assert doceval.evaluate is api.evaluate and doceval.compare is api.compare and doceval.gate is api.gate


def test_evaluate_a_retriever_function_hand_computed(golden: Path) -> None:
    s = doceval.evaluate(golden, retriever=overlap, k=2)
    m = s["metrics"]
    # q1: D1 at rank 1 (hit, rr 1, recall 1); q2: D2 (2 shared words) at rank 1, D3 not retrieved: recall 1/2.
    assert (m["hit_rate"], m["mrr"], m["recall"]) == (1.0, 1.0, 0.75)
    assert m["refused_correctly"] == 1.0 and m["cutoffs"]["hit_rate"] == 2  # q3 shares < 2 words: refused
    assert s["config"]["system"]["retriever"]["target"].endswith(":overlap")
    assert (
        s["config"]["floors"]["source"] == "config"
    )  # floors=zero: calibrated floors never reach a callable
    unscored = doceval.evaluate(golden, retriever=ids_only, k=2)
    assert unscored["metrics"]["hit_rate"] == 1.0 and unscored["config"]["floors"]["source"].startswith(
        "none"
    )
    assert all(score is None for e in unscored["entries"] for _, score in e["retrieved"])


def test_evaluate_an_assistant_compare_and_gate(golden: Path) -> None:
    sessions: list[str] = []

    def assistant(question: str, library: str, version: str, session_id: str) -> dict[str, Any]:
        sessions.append(session_id)
        hits = overlap(question, 3)
        answer = " ".join(DOCS[d] for d, _ in hits) or None
        return {"answer": answer, "sources": [{"id": d, "score": s} for d, s in hits], "refused": not hits}

    base = doceval.evaluate(golden, retriever=overlap, k=2)
    new = doceval.evaluate(golden, agent=assistant, k=2)
    assert len(set(sessions)) == 3  # a fresh session per entry
    assert new["metrics"]["hit_rate"] == 1.0 and new["metrics"]["overrefusal_rate"] == 0.0
    assert new["metrics"]["refusal_rate"] == 1.0 and new["metrics"]["counts"]["system_errors"] == 0
    result = doceval.compare(base, new)
    assert result.row("hit_rate").change == 0.0 and result.n_compared == 3
    assert doceval.gate(new, {"hit_rate": 0.6, "refused_correctly": 1.0}).passed
    assert not doceval.gate(new, {"recall": 0.9}).passed


def test_a_callables_settings_come_from_conf_and_its_overrides(golden: Path) -> None:
    """A user's callable runs with the deadline of conf/retriever/function.yaml, and an assistant with the reply
    cap of conf/agent/function.yaml, composed like any block: an override changes them."""
    conf = compose(["retriever=function"]).retriever
    default = doceval.evaluate(golden, retriever=overlap, k=2)
    assert default["config"]["retriever"]["timeout_s"] == conf.timeout_s == 120  # type: ignore[union-attr]
    tight = doceval.evaluate(golden, retriever=overlap, k=2, overrides=["retriever.timeout_s=7"])
    assert tight["config"]["retriever"]["timeout_s"] == 7

    def assistant(**_: Any) -> dict[str, Any]:
        return {"answer": "a" * 20_000, "sources": [], "refused": False}  # 20 kB: under conf/'s 4 MiB cap

    assert doceval.evaluate(golden, agent=assistant, k=2)["metrics"]["counts"]["system_errors"] == 0
    capped = doceval.evaluate(golden, agent=assistant, k=2, overrides=["agent.max_reply_bytes=9999"])
    assert capped["metrics"]["counts"]["system_errors"] == 3
    assert all("agent.max_reply_bytes=9999" in e["system_error"] for e in capped["entries"])


def test_both_systems_at_once_is_a_usage_error(golden: Path) -> None:
    with pytest.raises(doceval.errors.UsageError, match="not both"):
        doceval.evaluate(golden, retriever=overlap, agent=lambda **_: {})


def test_compose_through_the_api_matches_params_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert api.compose() == api.load_params(ROOT / "params.yaml")
    assert api.compose(["k=10"]).k == 10


@pytest.mark.slow
def test_compare_and_gate_take_mlflow_run_ids(golden: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the docstrings promise: a run id resolves through the tracking store (./mlruns/mlflow.db here)."""
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    from doceval import tracking

    summary = doceval.evaluate(golden, retriever=overlap, k=2)
    uri = tracking.tracking_uri(None, Path.cwd())
    run_id = tracking.log_run(summary, uri=uri, root=Path.cwd(), traces=False)
    result = doceval.gate(run_id, {"hit_rate": 0.5})
    assert result.passed is (summary["metrics"]["hit_rate"] >= 0.5)
    rows = doceval.compare(run_id, summary).rows  # the run against itself: nothing changed
    assert rows and all(r.change in (0.0, None) and r.wins == r.losses == 0 for r in rows)


def test_the_api_scores_the_configured_split_and_all_on_request(
    golden: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40, C7: on main `split="all"` failed telling the user to pass split=all, and the default split was
    every entry while `doceval eval` scored the configured one (32 entries against 16)."""
    rows = json.loads(golden.read_text(encoding="utf-8"))
    rows[0]["split"], rows[1]["split"], rows[2]["split"] = "test", "calibration", "test"
    golden.write_text(json.dumps(rows), encoding="utf-8")
    default = doceval.evaluate(golden, retriever=overlap, k=2)
    assert [e["id"] for e in default["entries"]] == ["q1", "q3"] and default["config"]["split"] == "test"
    every = doceval.evaluate(golden, retriever=overlap, k=2, split="all")
    assert [e["id"] for e in every["entries"]] == ["q1", "q2", "q3"] and every["config"]["split"] is None
    assert [e["id"] for e in doceval.evaluate(golden, retriever=overlap, split="calibration")["entries"]] == [
        "q2"
    ]
    # The configured split, as `doceval eval split=calibration` would read it.
    chosen = doceval.evaluate(golden, retriever=overlap, overrides=["split=calibration"])
    assert [e["id"] for e in chosen["entries"]] == ["q2"]


def test_the_api_writes_no_tracking_store_unasked(golden: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    doceval.evaluate(golden, retriever=overlap, k=2, split="all")
    assert not (golden.parent / "mlruns").exists()


def test_evaluate_config_returns_the_summary_evaluate_does(golden: Path) -> None:
    """The harness returns the typed summary; the API hands users its read-only dict, from either entry point."""
    options = api.EvalOptions(golden=golden, progress=False, split="__config__")
    cfg = api._users_system(api._composed((), overlap, None, 2, False, False), options, overlap, None)
    s = api.evaluate_config(cfg, options)
    assert isinstance(s, doceval.Summary) and isinstance(s.typed, doceval.summary.Summary)
    assert s["metrics"] == doceval.evaluate(golden, retriever=overlap, k=2)["metrics"]
    assert json.loads(json.dumps(s))["entries"] == s.typed.to_dict()["entries"]
