"""The run key's ``code`` (docs/design.md section 7.3): the hash of the import closure of the modules that made the
journals' answers and verdicts (doceval.harness.evaluate.journaled_modules, doceval.common.provenance.code_hash),
not a hand-kept list of files. Issue 44 M5: a hand-kept list missed scoring/reference_judge.py, so a changed
reference judge resumed its old verdicts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_eval_cli import DOCS, GOLDEN
from tiny_project import make_tiny_project

from doceval.common.imports import SRC, import_closure
from doceval.common.provenance import code_hash
from doceval.config import schema
from doceval.harness.evaluate import journaled_modules

REFERENCE = schema.JudgeReference(name="reference", threshold=0.5, facts_threshold=0.0)


def copy_of_the_package(tmp_path: Path) -> Path:
    """A copy of the installed doceval source (``<copy>/doceval``): the files a test changes are the copy's."""
    src = tmp_path / "src"
    shutil.copytree(SRC / "doceval", src / "doceval", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: {old!r} is not there once; has the code moved?"
    path.write_text(text.replace(old, new), encoding="utf-8")


def prepend(path: Path, line: str) -> None:
    path.write_text(line + path.read_text(encoding="utf-8"), encoding="utf-8")


def test_the_journals_code_is_the_answerers_and_judges_closure_not_the_harness() -> None:
    for user_assistant in (False, True):
        modules = journaled_modules(user_assistant, REFERENCE)
        assert code_hash(modules, ["prompts"])  # raises for a module that is not there (a renamed one)
        closure = set(import_closure(*modules))
        # the reference judge, its key-facts rule and its embedder: a change to any of them changes verdicts
        assert {
            "doceval.scoring.reference_judge",
            "doceval.scoring.key_facts",
            "doceval.index.embed",
        } <= closure
        assert {"doceval.scoring.judging", "doceval.common.journal"} <= closure
        # neither the report renderers nor the summary nor the evaluation around them: their edits keep the
        # paid answers and verdicts
        assert not {m for m in closure if m.startswith("doceval.results")}
        assert not closure & {"doceval.harness.evaluate", "doceval.harness.summary", "doceval.stages.report"}
    assert "doceval.system.docchat.answerers" in import_closure(*journaled_modules(False, REFERENCE))
    unjudged = import_closure(*journaled_modules(False, schema.JudgeNone(name="none")))
    assert "doceval.scoring.judging" not in unjudged  # no judge: a judge's change keeps the answers


def test_the_code_hash_moves_with_the_judge_and_not_with_a_report_renderer(tmp_path: Path) -> None:
    src = copy_of_the_package(tmp_path)
    modules = journaled_modules(False, REFERENCE)
    before = code_hash(modules, ["prompts"], src)
    assert before == code_hash(modules, ["prompts"], SRC)  # the same files: the same hash wherever they lie
    prepend(src / "doceval" / "results" / "markdown.py", "# a report renderer's comment, edited\n")
    assert code_hash(modules, ["prompts"], src) == before
    prepend(src / "doceval" / "scoring" / "key_facts.py", "# the key-facts rule's comment, edited\n")
    after_key_facts = code_hash(modules, ["prompts"], src)
    assert after_key_facts != before
    (src / "doceval" / "prompts" / "judge.txt").write_text("another prompt\n", encoding="utf-8")
    assert code_hash(modules, ["prompts"], src) != after_key_facts
    with pytest.raises(ValueError, match="no module doceval.scoring.gone"):
        code_hash(["doceval.scoring.gone"], (), src)


@pytest.mark.slow
def test_a_changed_reference_judge_is_asked_again_on_resume(tmp_path: Path) -> None:
    """Issue 44 M5 as it was found: change doceval/scoring/reference_judge.py so every verdict is False, rerun
    with --resume: the journal's old verdicts must not come back (they did: the same run key). Each run is a
    subprocess importing a copy of the package, the second after the copy's judge was changed."""
    refs = {e["id"]: " ".join(f"Call `{a}()`." for a in e["expected_apis"]) for e in GOLDEN}
    (tmp_path / "project").mkdir()
    project = make_tiny_project(tmp_path / "project", DOCS,
                                "".join(json.dumps({**e, "reference_answer": refs[e["id"]]}) + "\n"
                                        for e in GOLDEN))  # fmt: skip
    src = copy_of_the_package(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "doceval.cli.main", "eval", "--no-track", "--quiet", "--output", "out.json",
               "--split", "test", "retriever=bm25", "floors=zero", "judge=reference"]  # fmt: skip

    def run(*extra: str) -> dict[str, Any]:
        proc = subprocess.run(
            [*command, *extra], cwd=project, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary: dict[str, Any] = json.loads((project / "out.json").read_text())
        return summary

    first = run()
    judged = [e for e in first["entries"] if e["verdict"] is not None]
    assert judged, "the first run judged nothing: the test would prove nothing"
    edit(src / "doceval" / "scoring" / "reference_judge.py",
         "        strings = self.labels.get(probe.id)\n",
         '        return False, "every verdict False", None\n        strings = self.labels.get(probe.id)\n')  # fmt: skip
    second = run("--resume")
    assert second["config"]["run_key"] != first["config"]["run_key"]
    again = [e for e in second["entries"] if e["verdict"] is not None]
    assert [e["id"] for e in again] == [e["id"] for e in judged]
    assert all(e["verdict"] is False and e["verdict_reason"] == "every verdict False" for e in again)
    assert second["metrics"]["answer_accuracy"] == 0.0
