"""The README's own-project recipe, end to end (issue 40's first "Done when", issue 45's recipe): from an empty
folder holding two versions of docs, a conversation set, a retriever function and an HTTP assistant started on a
free port (tests/fixtures/acme/), the README's commands run first time as written, block by block, read from
README.md itself (tests/readme_blocks.py): init with conversations, the corpus, a golden set drafted, reviewed and
accepted, `dvc repro` with its conversations stage, the Python API, the retriever and the assistant evaluated,
`doceval conversations agent=http ...` with memory benefit and leak, compare, an experiment, a sweep of an
assistant parameter, the gate with JUnit applying doceval.yaml's thresholds, and history across two commits with
the assistant restarted on another port under one `name`.

Nothing is substituted: the fixture files carry the names the README uses, and the assistant writes the port it
serves on to port.txt, which the README's `$(cat port.txt)` reads. What the test does between blocks is what a
user does by hand: it fills in the review sheet and starts (and stops, by its process id) the assistant."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from readme_blocks import commands, python_block

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "acme"
FILES = ("docs", "conversations.jsonl", "my_retriever.py", "assistant.py")
SOME_EXIT_3 = ("doceval compare", "doceval gate")  # a verdict: 0 PASS, 3 FAIL


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # doceval, dvc and mlflow of this environment
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "GIT_AUTHOR_NAME": "user", "GIT_AUTHOR_EMAIL": "user@example.com",
        "GIT_COMMITTER_NAME": "user", "GIT_COMMITTER_EMAIL": "user@example.com",
    }  # fmt: skip


def _sh(command: str, cwd: Path) -> tuple[int, str]:
    """Run one README command as a user's shell would; its exit code and output (stdout, then stderr)."""
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=900
    )
    ok = (0, 3) if command.startswith(SOME_EXIT_3) else (0,)
    assert done.returncode in ok, (
        f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.returncode, done.stdout + done.stderr


def _block(first: str, cwd: Path) -> list[tuple[int, str]]:
    return [_sh(command, cwd) for command in commands(first)]


class Assistant:
    """The fixture's HTTP assistant, started on a free port and stopped by its own process id."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port_file = folder, folder / "port.txt"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        self.port_file.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "assistant.py", "port.txt"], cwd=self.folder, env=_env()
        )
        for _ in range(600):  # the port file appears once the server listens
            if self.port_file.is_file() and self.port_file.read_text():
                return self.port_file.read_text()
            assert self.process.poll() is None, "the assistant exited before it listened"
            time.sleep(0.05)
        raise AssertionError("the assistant wrote no port in 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        self.process = None


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, Assistant]]:
    for name in FILES:
        source = FIXTURE / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    assistant = Assistant(tmp_path)
    try:
        yield tmp_path, assistant
    finally:
        assistant.stop()


def _review_everything_ok(sheet: Path) -> int:
    """What the reviewer does by hand: a verdict, and their name, on every row of the worksheet."""
    rows = [json.loads(line) for line in sheet.read_text(encoding="utf-8").splitlines()]
    assert rows and all(row["verdict"] is None for row in rows)
    for row in rows:
        row.update(verdict="OK", reviewer="the recipe test")
    sheet.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return len(rows)


def _summary(path: Path) -> dict:  # type: ignore[type-arg]
    summary: dict = json.loads(path.read_text())  # type: ignore[type-arg]
    return summary


def _rule_line(text: str) -> str:
    found = re.search(r"CI gate \([^)]*\): (PASS|FAIL)", text)
    assert found, text[-2000:]
    return found.group(0)


@pytest.mark.slow
def test_the_readme_recipe_runs_first_time_as_written(project: tuple[Path, Assistant]) -> None:
    folder, assistant = project
    # 1. The project (conversations included) and its corpus.
    (_, out), _ = _block("doceval init .", folder)
    assert "wrote doceval.yaml" in out and (folder / ".dvc").is_dir() and (folder / ".git").is_dir()
    assert "conversations" in (folder / "dvc.yaml").read_text()
    assert (folder / "data" / "docs" / "corpus.jsonl").is_file()

    # 2. The golden set: draft, review (by hand), accept, validate.
    (_, out), _ = _block("doceval golden draft", folder)
    assert "version_trap" in out and (folder / "drafts.qrels.jsonl").is_file()
    reviewed = _review_everything_ok(folder / "review.jsonl")
    (_, out), (_, valid) = _block("doceval golden accept", folder)
    assert "0 dropped as WRONG, 0 left out" in out and "valid against data/docs" in valid
    golden = [json.loads(line) for line in (folder / "golden.jsonl").read_text().splitlines()]
    assert golden and not any(entry.get("draft") for entry in golden) and reviewed >= len(golden)
    assert all(doc.startswith("acme@") for e in golden for doc in e.get("relevant_ids", []))

    # 3. Commit, then dvc repro (its conversations stage included) and the headline.
    _, _, (_, shown) = _block("git add -A && git commit -qm 'acme docs", folder)
    headline = json.loads((folder / "eval" / "metrics.json").read_text())
    assert isinstance(headline["hit_rate"], float)
    assert _summary(folder / "eval" / "summary.json")["config"]["retriever"]["name"] == "dense"
    replayed = _summary(folder / "eval" / "conversations" / "summary.json")["metrics"]["conversations"]
    assert "memory_benefit" in replayed and "memory_leak" in replayed
    assert re.search(r"^hit_rate@5 ", shown, re.MULTILINE) and "conversations=" in shown

    # The Python API block, in the project.
    api = subprocess.run([sys.executable, "-c", python_block()], cwd=folder, env=_env(), capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert api.returncode == 0, api.stderr[-3000:]
    assert "hit_rate" in api.stdout and api.stdout.strip().splitlines()[-1] in ("True", "False")

    # 4. The retriever function and the HTTP assistant (started on a free port; its port in port.txt).
    first_port = assistant.start()
    _block("doceval eval --output eval/runs/function.json", folder)
    function = _summary(folder / "eval" / "runs" / "function.json")
    assert function["config"]["system"]["retriever"]["target"] == "my_retriever:retrieve"
    served = _summary(folder / "eval" / "runs" / "http.json")
    assert served["metrics"]["counts"]["system_errors"] == 0 and isinstance(
        served["metrics"]["hit_rate"], float
    )
    assert served["config"]["name"] == "acme-assistant"

    # 5. Conversations through the assistant: memory benefit and leak.
    ((_, out),) = _block("doceval conversations", folder)
    assert "benefit" in out and "leak" in out
    memory = _summary(folder / "eval" / "runs" / "conversations" / "summary.json")["metrics"]["conversations"]
    assert memory["memory_benefit"]["hit_rate"]["benefit"] > 0  # follow-ups need the session's earlier turns
    assert memory["memory_leak"]["hit_rate"]["leak"] > 0  # the fixture's bug: one session mixes questions

    # 6. Compare, an experiment, a sweep of an assistant parameter.
    (code, out), _, (_, table), (_, swept) = _block("doceval compare", folder)
    assert (
        "hit_rate" in out
        and re.search(r"CI gate .*: (PASS|FAIL)", out)
        and code == (3 if "FAIL" in out else 0)
    )
    assert "retriever" in table and "bm25" in table  # the experiment's row
    assert subprocess.run(["doceval", "params", "--check"], cwd=folder, env=_env()).returncode == 0
    (points,) = sorted((folder / "eval" / "sweeps").glob("*/points.csv"))
    rows = list(csv.DictReader(points.open()))
    assert sorted(re.search(r"min_score=([\d.]+)", r["overrides"]).group(1) for r in rows) == ["0.05", "0.2"]  # type: ignore[union-attr]
    assert "min_score=0.2" in swept

    # 7. The gate in CI: doceval.yaml's threshold, the rule the report prints, JUnit.
    _, (code, out) = _block("echo '- gate.", folder)
    rule = _rule_line(out)
    # An assistant's run: refused_correctly is asked of the reply's own refusal (gate.for_assistants).
    assert "refusal_rate >= 0.30" in rule and code == (3 if rule.endswith("FAIL") else 0)
    assert "refused_correctly is asked of refusal_rate for an assistant" in " ".join(out.split())
    assert "doceval.yaml (gate.thresholds.refused_correctly=0.3)" in out
    report = (folder / "eval" / "report.md").read_text()
    # One rule, whichever run it judges: the report's run is the pipeline's own system, which is asked
    # refused_correctly itself; the assistant's run above is asked its own refusal.
    assert _rule_line(report).split(":")[0] == rule.split(":")[0].replace("refusal_rate", "refused_correctly")
    suite = ET.parse(folder / "gate.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "acme-assistant"
    assert {case.get("name") for case in suite.iter("testcase")} >= {"refusal_rate >= 0.30"}

    # 8. History across two commits, the assistant restarted on another port under one name.
    _block("git add -A && git commit -qm 'acme assistant", folder)
    assistant.stop()
    second_port = assistant.start()
    while second_port == first_port:  # the system's free port may come round again
        assistant.stop()
        second_port = assistant.start()
    *_, (_, history) = _block("git add -A && git commit -qm 'acme assistant", folder)
    assert "system acme-assistant" in history
    clean = re.findall(r"^([0-9a-f]{8})  \d{4}-\d\d-\d\d   ", history, re.MULTILINE)  # rows not marked dirty
    assert len(set(clean)) >= 2, history
