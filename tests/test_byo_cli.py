"""Bringing one's own system through the CLI, from a user's own folder (no conf/, no docs corpus):
`retriever=function` (plain, scored, factory with kwargs, library/version keywords), `agent=function|http`
(sessions, system errors, --max-errors and exit 4), and the bad inputs that must exit 2 before any work.
Metrics are checked against hand-computed values."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_agent import FakeAgent, running_agent
from tiny_project import run_eval as run

from doceval.cli import main

# A user's module: four passages scored by shared words (tests/test_engine_eval.py builds on it too).
SCORING_MODULE = """
DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days",
        "D3": "shipping is free over fifty dollars", "D4": "returns of gift cards are not accepted"}

def _scored(question, k, bar=2):
    words = set(question.split())
    hits = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return [(d, s) for d, s in sorted(hits, key=lambda x: (-x[1], x[0])) if s >= bar][:k]

def scored(question, k):
    return _scored(question, k)
"""
MODULE = (
    SCORING_MODULE
    + """
CALLS = []

def ids(question, k):
    return [d for d, _ in _scored(question, k)]

def make(min_score=2):
    def retrieve(question, k):
        return [d for d, _ in _scored(question, k, int(min_score))]
    return retrieve

def pinned(question, k, library=None, version=None):
    CALLS.append((library, version))
    return ids(question, k)

def assistant(question, library, version, session_id):
    hits = _scored(question, 3)
    return {"answer": " ".join(DOCS[d] for d, _ in hits) or None, "refused": not hits,
            "sources": [{"id": d, "score": s} for d, s in hits], "trace": "t-" + question[:3]}

def make_assistant(bar=2, auth_token=None):
    def answer(question, library, version, session_id):
        hits = _scored(question, 3, int(bar))
        return {"answer": " ".join(DOCS[d] for d, _ in hits) or None, "refused": not hits,
                "sources": [{"id": d, "score": s} for d, s in hits]}
    return answer

def broken(question, library, version, session_id):
    if "pizza" in question:
        raise RuntimeError("model offline")
    return assistant(question, library, version, session_id)
"""
)
ROWS = [
    ("q1", "how much are late fees per day", ["D1"]),  # D1 shares 5 words (are late fees per day), D2/D4 1
    ("q2", "are returns accepted after thirty days", ["D2", "D4"]),  # D2 shares 5 words, D4 3
    ("q3", "do you sell pizza", []),  # unanswerable: shares no word with any passage
    ("q4", "is shipping free", ["D3"]),  # D3 shares 3 words
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "userret.py").write_text(MODULE, encoding="utf-8")
    rows = [{"id": i, "question": q, "out_of_scope": not rel, "relevant_ids": rel,
             "reference_answer": "see the handbook" if rel else "", "expected_apis": [], "forbidden_apis": [],
             "split": None, "kind": "lookup" if rel else "off_topic"} for i, q, rel in ROWS]  # fmt: skip
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    yield tmp_path
    import sys

    sys.modules.pop("userret", None)


def test_function_retriever_scored_hand_computed(project: Path) -> None:
    rc, s = run("retriever=function", "retriever.target=userret:scored", "k=1")
    assert rc == 0 and s is not None
    m = s["metrics"]
    # k=1: q1 D1 (hit), q2 D2 (hit, recall 1/2), q4 D3 (hit); q3 refused (no passage shares 2 words).
    assert (m["hit_rate"], m["recall"], m["mrr"]) == (1.0, pytest.approx(5 / 6), 1.0)
    assert m["refused_correctly"] == 1.0 and m["overrefusal_rate"] == 0.0
    retriever = s["config"]["system"]["retriever"]
    assert retriever["target"] == "userret:scored" and len(retriever["source_sha256"]) == 64
    assert s["entries"][1]["retrieved"] == [["D2", 5.0]]  # the function's own score, kept


def test_bare_ids_run_without_floors_and_say_so(project: Path) -> None:
    rc, s = run("retriever=function", "retriever.target=userret:ids", "k=2")
    assert rc == 0 and s is not None
    assert s["config"]["floors"]["source"].startswith("none: the retriever returns ids without scores")
    assert s["metrics"]["recall"] == 1.0  # q2: D2 and D4 both in the top 2
    assert all(score is None for e in s["entries"] for _, score in e["retrieved"])
    assert run("retriever=function", "retriever.target=userret:ids", "--score-floor", "0.5")[0] == 2


def test_factory_kwargs_change_the_evidence_bar(project: Path) -> None:
    _, strict = run(
        "retriever=function", "retriever.target=userret:make", "+retriever.kwargs.min_score=4", "k=2"
    )
    _, loose = run(
        "retriever=function", "retriever.target=userret:make", "+retriever.kwargs.min_score=1", "k=2"
    )
    assert strict is not None and loose is not None
    # min_score=4: q4 (3 shared words) is refused, an over-refusal; min_score=1 answers every in-scope entry,
    # and q3 (no shared word) is refused either way.
    assert strict["metrics"]["hit_rate"] == pytest.approx(2 / 3) and loose["metrics"]["hit_rate"] == 1.0
    assert strict["metrics"]["overrefusal_rate"] == pytest.approx(1 / 3)
    assert loose["metrics"]["refused_correctly"] == 1.0
    assert strict["config"]["system"]["retriever"]["kwargs"] == {"min_score": 4}


def test_library_and_version_keywords_reach_a_function_that_takes_them(project: Path) -> None:
    rc, _ = run("retriever=function", "retriever.target=userret:pinned")
    assert rc == 0
    import userret  # type: ignore[import-not-found]

    assert set(userret.CALLS) == {("docs", "1")}  # entries without a pin get the default one


def test_agent_function_scores_its_sources_and_answers(project: Path) -> None:
    rc, s = run("agent=function", "agent.target=userret:assistant", "k=2")
    assert rc == 0 and s is not None
    m = s["metrics"]
    assert (m["hit_rate"], m["recall"], m["refusal_rate"], m["overrefusal_rate"]) == (1.0, 1.0, 1.0, 0.0)
    e = s["entries"][0]
    assert e["extra"] == {"trace": "t-how"} and e["session_id"]
    assert len({x["session_id"] for x in s["entries"]}) == 4  # one session per entry


def test_system_errors_are_counted_never_scored_and_max_errors_exits_4(project: Path) -> None:
    rc, s = run("agent=function", "agent.target=userret:broken")
    assert rc == 0 and s is not None
    assert s["metrics"]["counts"]["system_errors"] == 1
    q3 = next(e for e in s["entries"] if e["id"] == "q3")
    assert "model offline" in q3["system_error"] and all(v is None for v in q3["scores"].values())
    assert s["metrics"]["refused_correctly"] is None  # the only out-of-scope entry errored: nothing to score
    rc, s = run("agent=function", "agent.target=userret:broken", "--max-errors", "0")
    assert rc == 4 and s is not None and s["complete"] is False
    assert "system errors" in s["incomplete"]["reason"]


def test_http_agent_sessions_and_warm_memory(project: Path) -> None:
    with running_agent() as srv:
        rc, s = run("agent=http", f"agent.url={srv.url}")
        assert rc == 0 and s is not None
        sessions = [r["session_id"] for r in srv.requests[1:]]  # the first request is the reachability probe
        assert len(sessions) == 4 and len(set(sessions)) == 4
        srv.requests.clear()
        rc, _ = run("agent=http", f"agent.url={srv.url}", "--warm-memory")
        assert rc == 0 and len({r["session_id"] for r in srv.requests[1:]}) == 1


def test_http_agent_faults_become_system_errors(project: Path) -> None:
    with running_agent() as srv:
        srv: FakeAgent
        srv.always["do you sell pizza"] = "bad_json"
        srv.always["is shipping free"] = "no_refused"
        rc, s = run("agent=http", f"agent.url={srv.url}", "agent.max_retries=0")
    assert rc == 0 and s is not None
    assert s["metrics"]["counts"]["system_errors"] == 2
    errors = {e["id"]: e["system_error"] for e in s["entries"] if e["system_error"]}
    assert set(errors) == {"q3", "q4"} and "refused" in errors["q4"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["retriever=function", "retriever.target=nosuchmod:f"], "nosuchmod"),
        (["retriever=function", "retriever.target=userret:DOCS"], "not a function"),
        (["retriever=function", "retriever.target=userret:make", "+retriever.kwargs.bogus=1"], "bogus"),
        (["retriever=function"], "retriever.target=MODULE:ATTR"),
        (["agent=function", "agent.target=userret:nope"], "nope"),
        (["agent=http", "agent.url=http://127.0.0.1:9/ask"], "agent.url"),
        (["agent=http"], "agent.url=URL"),
    ],
)
def test_bad_systems_exit_2_naming_the_key(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc, s = run(*args)
    assert rc == 2 and s is None
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_a_kwargs_sweep_tunes_the_users_own_evidence_bar(project: Path) -> None:
    """`doceval sweep -m +retriever.kwargs.NAME=...` runs the user's retriever live at every point."""
    argv = ["sweep", "-m", "+retriever.kwargs.min_score=1,4", "retriever=function", "retriever.target=userret:make",
            "golden=golden.jsonl", "k=2", "--no-track", "--quiet", "--jobs", "1"]  # fmt: skip
    assert main(argv) == 0
    (points,) = list((project / "eval" / "sweeps").glob("*/points.csv"))
    text = points.read_text()
    assert "min_score=1" in text and "min_score=4" in text
    # Each point's n and every metric's 95% interval (issue 40, C9: on main the table and CSV had neither).
    rows = list(csv.DictReader(io.StringIO(text)))
    assert all(
        r["n_in_scope"] and r["hit_rate_ci_lo"] and r["hit_rate_ci_hi"] and r["hit_rate_n"] for r in rows
    )
    assert float(rows[0]["hit_rate_ci_lo"]) <= float(rows[0]["hit_rate"]) <= float(rows[0]["hit_rate_ci_hi"])


def test_an_untagged_golden_set_runs_whole_under_the_default_split(project: Path) -> None:
    out = Path("default.json")
    argv = ["eval", "--golden", "golden.jsonl", "--no-track", "--quiet", "--output", str(out),
            "retriever=function", "retriever.target=userret:ids"]  # fmt: skip
    assert main(argv) == 0  # split=test by default; every entry is untagged, so all four run
    assert len(json.loads(out.read_text())["entries"]) == 4


def test_an_assistant_factory_takes_agent_kwargs_and_records_them_redacted(project: Path) -> None:
    """Issue 40, C10: on main `agent=function` had no kwargs (`+agent.kwargs.bar=4` was an unknown key)."""
    _, strict = run("agent=function", "agent.target=userret:make_assistant", "+agent.kwargs.bar=4",
                    "+agent.kwargs.auth_token=tok-Secret-123456", "k=2")  # fmt: skip
    _, loose = run("agent=function", "agent.target=userret:make_assistant", "+agent.kwargs.bar=1", "k=2")
    assert strict is not None and loose is not None
    # bar=4: q4 (3 shared words) is refused; bar=1 answers every in-scope entry.
    assert strict["metrics"]["hit_rate"] == pytest.approx(2 / 3) and loose["metrics"]["hit_rate"] == 1.0
    agent = strict["config"]["system"]["agent"]
    assert agent["kwargs"] == {"bar": 4, "auth_token": "<redacted>"} and len(agent["source_sha256"]) == 64
    assert "tok-Secret-123456" not in Path("out.json").read_text()
    assert strict["config"]["run_key"] != loose["config"]["run_key"]  # each point its own journals


def test_http_params_are_sent_only_when_set_and_recorded_redacted(project: Path) -> None:
    """Issue 40, C10: on main an HTTP assistant had no request parameters (`+agent.params.x` unknown)."""
    with running_agent() as srv:
        assert run("agent=http", f"agent.url={srv.url}")[0] == 0
        assert all("params" not in body for body in srv.requests)  # the body as before when none are set
        srv.requests.clear()
        rc, s = run("agent=http", f"agent.url={srv.url}", "+agent.params.temperature=0.2",
                    "+agent.params.api_key=key-Secret-987654")  # fmt: skip
    assert rc == 0 and s is not None
    assert all(
        body["params"] == {"temperature": 0.2, "api_key": "key-Secret-987654"} for body in srv.requests
    )
    assert s["config"]["system"]["agent"]["params"] == {"temperature": 0.2, "api_key": "<redacted>"}
    assert "key-Secret-987654" not in Path("out.json").read_text()


@pytest.mark.slow
def test_a_sweep_over_the_assistants_kwargs(project: Path) -> None:
    argv = ["sweep", "-m", "+agent.kwargs.bar=1,4", "agent=function", "agent.target=userret:make_assistant",
            "golden=golden.jsonl", "split=all", "k=2", "--no-track", "--quiet", "--jobs", "1"]  # fmt: skip
    assert main(argv) == 0
    (points,) = list((project / "eval" / "sweeps").glob("*/points.csv"))
    rows = {r["overrides"]: r for r in csv.DictReader(io.StringIO(points.read_text()))}
    hit = {key.split("bar=")[1].split()[0]: float(r["hit_rate"]) for key, r in rows.items()}
    assert hit == {"1": 1.0, "4": pytest.approx(2 / 3)}
