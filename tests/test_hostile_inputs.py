"""Issue 27's audit, case by case: every input that once gave a traceback, a silent wrong number, a wrong exit
code or invalid JSON, replayed through the CLI and the Python API on a tiny project. Each case names the
audit's bullet it closes; the detailed tests live in tests/test_strict_io.py, test_system_limits.py,
test_output_safety.py, test_secret_leaks.py and test_journal_resume.py."""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tiny_project import make_tiny_project

import doceval.api as api
from doceval.cli.main import main
from doceval.errors import UsageError

DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nGenerate a dictionary of the model."),
        ("pydantic.fields.Field", "def Field(default)\n\nCreate a field with a default value and metadata."),
    ],
}
A = "pydantic@2.8.2:pydantic.main.BaseModel.model_dump"
B = "pydantic@2.8.2:pydantic.fields.Field"


def _entry(i: int, question: str, relevant: list[str], **extra: Any) -> dict[str, Any]:
    return {"id": f"e{i}", "question": question, "library": "pydantic", "version": "2.8.2", "out_of_scope": False,
            "relevant_ids": relevant, "expected_apis": [], "forbidden_apis": [], "split": "test", "kind": "lookup",
            "reference_answer": "use model_dump", **extra}  # fmt: skip


GOLDEN = [
    _entry(0, "dictionary of the model", [A]),
    _entry(1, "field with a default value", [B]),
    _entry(2, "please raise now", [A]),
    _entry(3, "metadata of a field", [B]),
]
# The user's hostile systems: each misbehaves on the question "please raise now" only.
HOSTILE = (
    f"DOC_A, DOC_B = {A!r}, {B!r}\n"
    + """
import sys

def _ok(question):
    return [DOC_A, DOC_B]

def raises(question, k):
    if "raise" in question:
        raise RuntimeError("boom")
    return _ok(question)

def exits_0(question, k):
    if "raise" in question:
        sys.exit(0)
    return _ok(question)

def exits_3(question, k):
    if "raise" in question:
        raise SystemExit(3)
    return _ok(question)

def huge_score(question, k):
    return [(DOC_A, 10**400 if "raise" in question else 1.0)]

def empty_id(question, k):
    return [""] if "raise" in question else _ok(question)

def agent_exits_0(question, library, version, session_id):
    if "raise" in question:
        sys.exit(0)
    return {"answer": "model_dump", "sources": _ok(question), "refused": False}

def agent_surrogate(question, library, version, session_id):
    return {"answer": "model_dump \\ud800 " + question, "sources": _ok(question), "refused": False}

def agent_nan(question, library, version, session_id):
    score = float("nan") if "raise" in question else float("inf") if "default" in question else 1.0
    return {"answer": "model_dump", "sources": [{"id": DOC_A, "score": score}], "refused": False}
"""
)


@dataclass
class Case:
    bullet: str  # the audit's heading the case closes
    argv: list[str]
    code: int
    says: list[str] = field(default_factory=list)  # words stderr/stdout must contain
    errors: int | None = None  # system errors the summary must count (None: no summary expected)


FN = ["retriever=function", "floors=zero", "k=2"]
AGENT = ["agent=function"]
CASES = {
    # Tracebacks (exit 1 where exit 2 is promised) and user code choosing doceval's exit code
    "retriever raises: one system error, not an aborted run": Case(
        "Tracebacks", [*FN, "retriever.target=hostile:raises"], 0, [], errors=1),
    "retriever sys.exit(0): a system error, never exit 0 without a summary": Case(
        "Wrong verdicts and exit codes", [*FN, "retriever.target=hostile:exits_0"], 0, [], errors=1),
    "retriever SystemExit(3): never the gate's FAIL code": Case(
        "Wrong verdicts and exit codes", [*FN, "retriever.target=hostile:exits_3"], 0, [], errors=1),
    "agent sys.exit(0)": Case(
        "Wrong verdicts and exit codes", [*AGENT, "agent.target=hostile:agent_exits_0"], 0, [], errors=1),
    "a score of 10**400": Case("Tracebacks", [*FN, "retriever.target=hostile:huge_score"], 0, [], errors=1),
    "an empty id from a retriever, as from an agent": Case(
        "Inconsistencies", [*FN, "retriever.target=hostile:empty_id"], 0, [], errors=1),
    "a lone surrogate in a reply": Case(
        "Tracebacks", [*AGENT, "agent.target=hostile:agent_surrogate"], 0, [], errors=0),
    "NaN and Infinity scores from an agent": Case(
        "Invalid JSON", [*AGENT, "agent.target=hostile:agent_nan"], 0, [], errors=2),
    "Hydra: an unclosed list": Case("Tracebacks", ["k=[1,"], 2, ["k=[1,"]),
    "Hydra: a bare word": Case("Tracebacks", ["retriever=bm25", "foo"], 2, ["foo"]),
    "Hydra: an unquoted ?a=b": Case("Tracebacks", ["agent=http", "agent.url=http://127.0.0.1:9/x?a=b"], 2,
                                    ["agent.url"]),
    "Hydra: a header name with a space": Case(
        "Tracebacks", ["agent=http", "agent.url=http://127.0.0.1:9/x", "+agent.headers_env.My Header=X"], 2,
        ["Header"]),
    "--score-floor nan": Case("Tracebacks", ["retriever=bm25", "--score-floor", "nan"], 2, ["--score-floor"]),
    "relevance.threshold=5": Case("Tracebacks", ["retriever=bm25", "relevance.threshold=5"], 2,
                                  ["relevance.threshold"]),
    "relevance.threshold=0": Case("Tracebacks", ["retriever=bm25", "relevance.threshold=0"], 2,
                                  ["relevance.threshold"]),
    # Inconsistencies, one rule for both paths
    "--floor for an unknown library with a function retriever": Case(
        "Inconsistencies", [*FN, "retriever.target=hostile:raises", "--floor", "nosuchlib=0.3"], 2, ["nosuchlib"]),
    "agent=function with retriever=function": Case(
        "Inconsistencies", [*AGENT, "agent.target=hostile:agent_nan", "retriever=function",
                            "retriever.target=hostile:raises"], 2, ["retriever=function"]),
    "--split nope on an untagged set": Case("Inconsistencies", ["retriever=bm25", "--golden", "untagged.jsonl",
                                                                "--split", "nope"], 2, ["--split"]),
}  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps(e) + "\n" for e in GOLDEN))
    (tmp_path / "hostile.py").write_text(HOSTILE)
    untagged = [{**e, "split": None} for e in GOLDEN]
    (tmp_path / "untagged.jsonl").write_text("".join(json.dumps(e) + "\n" for e in untagged))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _strict(text: str) -> Any:
    """JSON as JavaScript reads it: NaN and Infinity are not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("name", list(CASES))
def test_audit_case(name: str, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = CASES[name]
    flags, overrides = [], []
    for i, arg in enumerate(case.argv):  # a flag and its value go before the overrides
        (flags if arg.startswith("--") or (i and case.argv[i - 1].startswith("--")) else overrides).append(
            arg
        )
    split = [] if "--split" in flags else ["--split", "test"]
    code = main(["eval", "--quiet", "--no-track", *split, "--output", "out.json", *flags, *overrides])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == case.code, text
    assert "Traceback" not in text
    for word in case.says:
        assert word in text
    out = project / "out.json"
    if case.errors is None:
        assert not out.exists()  # a run that failed leaves nothing a gate could take for it
        return
    summary = _strict(out.read_text())  # strict JSON: no NaN, no Infinity
    assert summary["metrics"]["counts"]["system_errors"] == case.errors
    assert len(summary["entries"]) == len(GOLDEN)
    errored = [e for e in summary["entries"] if e["system_error"]]
    assert all(all(v is None for v in e["scores"].values()) for e in errored)  # scored by no metric


def test_an_output_that_is_a_device_is_refused_and_left_alone(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files destroyed: run as root, `--output /dev/null` used to become a regular file holding the summary."""
    code = main(
        ["eval", "--quiet", "--no-track", "--output", "/dev/null", *FN, "retriever.target=hostile:raises"]
    )
    assert code == 2 and "--output /dev/null" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_bom_is_accepted_in_qrels_as_in_the_golden_set(project: Path) -> None:
    qrels = [{"id": e["id"], "doc_id": e["relevant_ids"][0], "grade": 2, "judged_by": "test", "reason": "answers"}
             for e in GOLDEN]  # fmt: skip
    text = "\ufeff" + "".join(json.dumps(q) + "\n" for q in qrels)
    (project / "data" / "golden" / "v2.1.qrels.jsonl").write_text(text, encoding="utf-8")
    golden = project / "data" / "golden" / "v2.1.jsonl"
    golden.write_text("\ufeff" + golden.read_text(encoding="utf-8"), encoding="utf-8")
    assert (
        main(["eval", "--quiet", "--no-track", "--output", "out.json", "retriever=bm25", "floors=zero"]) == 0
    )
    assert _strict(Path("out.json").read_text())["metrics"]["hit_rate"] is not None


def test_the_gate_fails_a_run_with_system_errors(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["eval", "--quiet", "--no-track", "--output", "out.json", *FN, "retriever.target=hostile:raises"]
        )
        == 0
    )
    code = main(["gate", "out.json"])
    assert code == 3 and "system error" in capsys.readouterr().out.lower()


API_CASES = {
    "evaluate(5)": lambda: api.evaluate(5),  # type: ignore[arg-type]
    "evaluate(None)": lambda: api.evaluate(None),  # type: ignore[arg-type]
    "a list of rows": lambda: api.evaluate([{"id": "a"}]),  # type: ignore[arg-type]
    'overrides="k=3"': lambda: api.evaluate("golden.jsonl", overrides="k=3"),
    'max_errors="2"': lambda: api.evaluate("golden.jsonl", max_errors="2"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", list(API_CASES))
def test_python_api_bad_arguments_are_usage_errors(name: str, project: Path) -> None:
    with pytest.raises(UsageError) as info:
        API_CASES[name]()
    assert str(info.value)  # names the argument and the fix (the wording is tested in test_strict_io)


def test_no_summary_holds_non_finite_numbers(project: Path) -> None:
    """An assistant's run has no floors: the summary says so with null and a reason, never -Infinity."""
    assert main(["eval", "--quiet", "--no-track", "--output", "out.json", *AGENT,
                 "agent.target=hostile:agent_surrogate"]) == 0  # fmt: skip
    summary = _strict(Path("out.json").read_text())
    floors = summary["config"]["floors"]
    assert floors["global"] is None and not any(
        isinstance(v, float) and not math.isfinite(v) for v in floors.values()
    )
