"""The PR check of docs/ci.md as a test (issue 42, "Done when"): a pytest check written with doceval.evaluate,
compare and gate against the summary main stored fails on a real regression and passes on an unchanged rerun,
with the judge served by the local OpenAI-compatible test server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from answer_side import feature, judge_overrides, own_golden
from openai_server import FakeOpenAI

import doceval

N_IN, N_OUT = 30, 6
BROKEN = set(range(0, N_IN, 3))  # the PR breaks every third feature: 10 of 30 entries


def main_assistant(question: str, library: Any, version: Any, session_id: str) -> dict[str, Any]:
    """main's assistant: the right source and API in scope, a refusal out of scope."""
    i = feature(question)
    if i is None:
        return {"answer": None, "sources": [], "refused": True}
    return {"answer": f"Call `api_{i}()`.", "sources": [f"doc-{i}"], "refused": False}


def pr_assistant(question: str, library: Any, version: Any, session_id: str) -> dict[str, Any]:
    """The PR's assistant: a retrieval change that loses the right source (and so the answer) on some features."""
    i = feature(question)
    if i in BROKEN:
        return {"answer": "Call `something_else()`.", "sources": ["doc-unrelated"], "refused": False}
    return main_assistant(question, library, version, session_id)


def pr_check(golden: Path, agent: Any, judge: list[str]) -> doceval.results.GateResult:
    """What docs/ci.md's test does: evaluate the PR, compare it with main's stored summary, gate it."""
    main = doceval.load_summary("main-summary.json")
    pr = doceval.evaluate(golden, agent=agent, split="all", overrides=judge)
    print(doceval.results.format_compare(doceval.compare(main, pr)))
    return doceval.gate(pr, baseline=main)


def test_the_pr_check_fails_on_a_real_regression_and_passes_on_an_unchanged_rerun(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    openai_server: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    golden = own_golden(tmp_path, N_IN, N_OUT)
    judge = judge_overrides(openai_server.base_url)
    main = doceval.evaluate(golden, agent=main_assistant, split="all", overrides=judge)
    assert main.metrics["answer_accuracy"] == 1.0 and main.metrics["hit_rate"] == 1.0
    Path("main-summary.json").write_text(json.dumps(main))  # what CI keeps from main's run

    unchanged = pr_check(golden, main_assistant, judge)
    assert unchanged.passed, unchanged.line
    assert any(c.startswith("no regression") for c in unchanged.conditions)  # the baseline was used

    broken = pr_check(golden, pr_assistant, judge)
    assert not broken.passed
    failed = {f.metric for f in broken.failures}
    assert (
        "hit_rate" in failed and "mrr" in failed
    )  # 10 of 30 entries worse: the paired test tells it from noise
    out = capsys.readouterr().out
    assert "answer_accuracy (unvalidated)" in out  # the test server's judge was never validated: said so
    assert "ok -> relevant_not_in_top_k" in out  # compare names the entries that moved
