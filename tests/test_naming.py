"""Naming a system (issue 40, C4; docs/design.md 8.7): a top-level `name` is the `system` tag `history --system`
filters on, the MLflow run name, compare's and the report's headers and JUnit's suite; without one, an HTTP
assistant on a loopback address stays one family when only its port changes, runs tagged before that rule
included."""

from __future__ import annotations

import ast
import copy
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_report import base_summary, new_summary

from doceval.cli.main import main
from doceval.common.naming import (
    OWN_AGENT,
    USER_FUNCTION,
    canonical_system,
    is_function_retriever,
    is_own_agent,
    system_label,
)
from doceval.config.compose import compose
from doceval.results import compare, format_compare, gate
from doceval.results.junit import junit_xml
from doceval.results.markdown import render_report


def _http(url: str, name: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "system": {"agent": {"name": "http", "url": url}},
        "retriever": {"name": "agent:http"},
    }


def test_the_label_of_a_system() -> None:
    assert system_label(_http("http://127.0.0.1:8765/answer")) == "http:http://127.0.0.1/answer"
    assert system_label(_http("http://localhost:9/answer")) == "http:http://localhost/answer"
    assert system_label(_http("http://[::1]:80/a")) == "http:http://[::1]/a"
    assert system_label(_http("https://api.example.com:8443/a")) == "http:https://api.example.com:8443/a"
    assert system_label(_http("http://127.0.0.1:8765/answer", "ravel-assistant")) == "ravel-assistant"
    # a tag logged before the rule (with the port) reads as the new one
    assert canonical_system("http:http://127.0.0.1:8765/answer") == "http:http://127.0.0.1/answer"
    assert canonical_system("bm25") == "bm25"
    assert compose(["name=ravel-assistant"]).name == "ravel-assistant"
    assert compose([]).name is None


def _summary(url: str, commit: str, name: str | None = None) -> dict[str, Any]:
    s = copy.deepcopy(new_summary())
    s["config"].update(_http(url, name))
    s["config"]["provenance"] = {**s["config"]["provenance"], "git_commit": commit, "git_dirty": False}
    return s


def test_headers_and_junit_carry_the_name() -> None:
    base, new = base_summary(), _summary("http://127.0.0.1:1/a", "abc", "ravel-assistant")
    out = format_compare(compare(base, new, base_label="b.json", new_label="n.json"))
    assert out.splitlines()[:2] == [
        "baseline: b.json (system dense)",
        "new:      n.json (system ravel-assistant)",
    ]
    assert "`ravel-assistant`" in render_report(new, None)
    suite = ET.fromstring(junit_xml(gate(new, compose([]).gate), new)).find("testsuite")
    assert suite is not None and suite.get("name") == "ravel-assistant"
    assert (
        ET.fromstring(junit_xml(gate(base, compose([]).gate), base)).find("testsuite").get("name")
        == "doceval gate"
    )  # type: ignore[union-attr]


@pytest.mark.slow
def test_history_keeps_a_local_assistant_when_its_port_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main the tag was `http:` + the URL, port included: a restart on a free port started a new family."""
    from doceval.tracking import log_run
    from doceval.tracking.shaping import run_title

    monkeypatch.chdir(tmp_path)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    commits = []
    for i in range(3):
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", f"c{i}"], cwd=tmp_path, check=True,
                       env={**env, "PATH": "/usr/bin:/bin"})  # fmt: skip
        commits.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True,
                                      check=True).stdout.strip())  # fmt: skip
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    # A run logged before the rule: its tag has the port.
    old = _summary("http://127.0.0.1:8765/answer", commits[0])
    log_run(
        old, uri=uri, root=tmp_path, extra_tags={"system": "http:http://127.0.0.1:8765/answer"}, traces=False
    )
    log_run(_summary("http://127.0.0.1:40111/answer", commits[1]), uri=uri, root=tmp_path, traces=False)
    named = _summary("http://127.0.0.1:40999/answer", commits[2], "ravel-assistant")
    assert "ravel-assistant" in run_title(named["config"])  # the MLflow run name log_configured_run gives it
    run_id = log_run(named, uri=uri, root=tmp_path, run_name=run_title(named["config"]), traces=False)
    history = ["history", "--tracking-uri", uri, "--metric", "hit_rate", "--plot", "h.png"]
    capsys.readouterr()
    for system in ("http:http://127.0.0.1:8765/answer", "http:http://127.0.0.1/answer"):
        assert main([*history, "--system", system]) == 0
        assert capsys.readouterr().out.startswith("2 runs: "), system
    assert main([*history, "--system", "ravel-assistant"]) == 0
    assert capsys.readouterr().out.startswith("1 runs: ")
    from mlflow import MlflowClient

    run = MlflowClient(uri).get_run(run_id)
    assert run.data.tags["system"] == "ravel-assistant" and run.info.run_name.startswith(
        "test · ravel-assistant"
    )


SRC = Path(__file__).resolve().parents[1] / "src" / "doceval"


def _name_comparisons(source: str) -> list[int]:
    """Lines comparing a value with the literal "docchat" or "function" (==, !=, in)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in (OWN_AGENT, USER_FUNCTION) for o in operands):
                lines.append(node.lineno)
    return lines


def test_own_agent_and_function_retriever_are_asked_through_one_predicate_each() -> None:
    """Whether the system is doceval's own agent, and whether the retriever is the user's function, is asked of
    is_own_agent / is_function_retriever (doceval.common.naming), never by comparing the names in place."""
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "naming.py" or path.parent.name != "common"
        for line in _name_comparisons(path.read_text(encoding="utf-8"))
    ]
    assert not found, "compare through doceval.common.naming's predicates instead:\n" + "\n".join(found)
    assert _name_comparisons('if cfg.agent.name != "docchat": pass') == [1]  # the scan sees one
    assert is_own_agent("docchat") and not is_own_agent("http") and not is_own_agent(None)
    assert is_function_retriever("function") and not is_function_retriever("bm25")
    for config in (compose([]), compose(["agent=http", "agent.url=http://127.0.0.1:9/ask"])):
        assert is_own_agent(config.agent.name) == (config.agent.name == "docchat")
    assert is_function_retriever(compose(["retriever=function"]).retriever.name)
