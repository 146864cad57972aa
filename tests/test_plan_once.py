"""Plan once, run once: one `doceval evaluate` (the DVC stage: the evaluation, ANN vs exact, the trade-off and
tracking) loads the golden set, the corpus and the candidates once each, and asks the system under test once
per entry. The loaders counted are the real ones (wrapped where every doceval module bound them), and the
system is a real user's retriever function that records its calls."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_checks_before_work import ROWS, _golden_text
from test_conversation_surfaces import GOLDEN as CONVERSATIONS
from test_conversation_surfaces import MemoryAssistant
from test_eval_cli import DOCS
from tiny_project import make_tiny_project

import doceval
import doceval.harness.candidate_cache as candidates_module
import doceval.inputs.corpus as corpus_module
import doceval.inputs.golden as golden_module
from doceval.cli import main
from doceval.config.schema import Config

USER_MODULE_NAME = "plan_once_userret"  # a name no other test imports (sys.modules is shared)
# A retriever over the fixture's documents (the share of the question's words a document holds) that appends
# every question it is asked to calls.log.
USER_MODULE = f"""
import re

DOCS = {{f"{{pin}}:{{path}}": set(re.findall("[a-z]+", (path + " " + text).lower()))
        for pin, items in {DOCS!r}.items() for path, text in items}}

def retrieve(question, k):
    with open("calls.log", "a", encoding="utf-8") as fh:
        fh.write(question + "\\n")
    words = set(re.findall("[a-z]+", question.lower()))
    scored = [(d, len(words & tokens) / len(words)) for d, tokens in DOCS.items()]
    return [(d, s) for d, s in sorted(scored, key=lambda x: -x[1]) if s > 0][:k]
"""


# One out-of-scope calibration entry per library: a user's function has no score bound, and a library with no
# out-of-scope entry would get a floor of -inf, which the calibrate stage cannot write.
CALIBRATION_OOS = {"id": "u4", "question": "which pizza is the best model of pizza", "library": "pydantic",
                   "version": "2.8.2", "out_of_scope": True, "relevant_ids": [], "expected_apis": [],
                   "forbidden_apis": [], "split": "calibration", "kind": "off_topic"}  # fmt: skip


def _project(root: Path, *overrides: str) -> Path:
    """The tiny project after params, retrieve and calibrate (tracking off), then params with tracking as
    configured by ``overrides``: ready for the evaluate stage."""
    root.mkdir()
    make_tiny_project(root, DOCS, _golden_text([*ROWS, CALIBRATION_OOS]))
    (root / f"{USER_MODULE_NAME}.py").write_text(USER_MODULE, encoding="utf-8")
    os.chdir(root)
    assert main(["params", *overrides, "tracking.enabled=false"]) == 0
    for stage in ("retrieve", "calibrate"):
        assert main([stage, "--quiet"]) == 0, stage
    assert main(["params", *overrides]) == 0
    return root


@pytest.fixture
def chdir_back(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cwd = Path.cwd()
    yield
    os.chdir(cwd)
    sys.modules.pop(USER_MODULE_NAME, None)


def count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> Counter[str]:
    """Wrap the real ``module.name`` wherever a doceval module bound it (``from ... import name``), counting
    each call by its arguments' text; the wrapped function still does all the work."""
    real: Callable[..., Any] = getattr(module, name)
    calls: Counter[str] = Counter()

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[" ".join(map(str, [*args, *kwargs.values()]))] += 1
        return real(*args, **kwargs)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("doceval") and getattr(mod, name, None) is real:
            monkeypatch.setattr(mod, name, counted)
    return calls


@pytest.mark.slow
def test_the_evaluate_stage_loads_each_input_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chdir_back: None
) -> None:
    """A built-in retriever from the candidate cache, calibrated floors (so the trade-off runs, with its
    second evaluation at one global floor) and tracking with traces (the traces' document texts)."""
    root = _project(tmp_path / "project", "retriever=bm25")
    # Every section that reads an input is imported before the wrap, as the stage imports it.
    import doceval.harness.tradeoff
    import doceval.stages.ann
    import doceval.stages.evaluate
    import doceval.tracking.configured  # noqa: F401

    golden = count_calls(monkeypatch, golden_module, "parse_golden")
    corpus = count_calls(monkeypatch, corpus_module, "load_corpus")
    candidates = count_calls(monkeypatch, candidates_module, "load_candidates")
    assert main(["evaluate", "--quiet"]) == 0
    assert golden == Counter({"data/golden/v2.1.jsonl False": 1})  # the path, allow_drafts=False
    assert corpus == Counter({"data/docs": 1})
    assert candidates == Counter({"data/runs": 1})
    trade = json.loads((root / "eval" / "tradeoff" / "tradeoff.json").read_text())
    assert trade["per_library_vs_global"]["rows"]  # the trade-off ran, with its global-floor evaluation
    assert (root / "mlruns" / "mlflow.db").is_file()  # and tracking, with the traces


def test_the_evaluate_stage_asks_the_users_retriever_once_per_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chdir_back: None
) -> None:
    """A user's retriever runs live on the test split, once per entry, though the trade-off evaluates the same
    entries again at one global floor: it reuses the run's candidates. Planning asks it nothing."""
    target = f"retriever.target={USER_MODULE_NAME}:retrieve"
    root = _project(tmp_path / "project", "retriever=function", target, "tracking.enabled=false")
    (root / "calls.log").unlink()  # the retrieve stage's calls (every entry, for the calibrate stage)
    import doceval.harness.plan

    planned = doceval.harness.plan.plan_run(_params(root), doceval.harness.plan.EvalOptions(progress=False))
    assert planned.awaits_retrieval and planned.candidates is None and not (root / "calls.log").exists()
    assert main(["evaluate", "--quiet"]) == 0
    summary = json.loads((root / "eval" / "summary.json").read_text())
    assert summary["config"]["floors"]["source"].startswith("calibrated")  # so the trade-off ran
    assert (root / "eval" / "tradeoff" / "tradeoff.json").is_file()
    asked = Counter((root / "calls.log").read_text(encoding="utf-8").splitlines())
    test_questions = {e["question"] for e in ROWS if e["split"] in ("test", None)}
    assert asked == Counter({q: 1 for q in test_questions})


def _params(root: Path) -> Config:
    from doceval.config.compose import load_params

    return load_params(root / "params.yaml")


def test_limit_keeps_every_conversation_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39 H14: --limit 1 kept turn 1 of a 3-turn conversation and reported all_turns_correct for it.
    A limit counts the golden set's records: a conversation is one, with all its turns (the dry run too)."""
    monkeypatch.chdir(tmp_path)  # the runs' journals (data/runs/eval/) stay out of the checkout
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in CONVERSATIONS), encoding="utf-8")
    one = doceval.evaluate(path, agent=MemoryAssistant(), k=2, overrides=["limit=1"])
    assert [e["id"] for e in one["entries"]] == ["conv-a#1", "conv-a#2", "conv-a#3"]
    assert one["metrics"]["conversations"]["n_conversations"] == 1
    two = doceval.evaluate(path, agent=MemoryAssistant(), k=2, overrides=["limit=2"])
    assert [e["id"] for e in two["entries"]] == ["conv-a#1", "conv-a#2", "conv-a#3", "q-single"]
    (tmp_path / "conv_agent.py").write_text(
        "def answer(question, library, version, session_id):\n"
        "    return {'answer': 'x', 'sources': [], 'refused': True}\n"
    )
    code = main(["eval", "--dry-run", "--golden", str(path), "--split", "all", "--limit", "1", "agent=function",
                 "agent.target=conv_agent:answer"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "system     (your assistant)             3" in out
