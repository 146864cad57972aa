"""A run's journals (doceval.common.journal): a journal path that is not a file is exit 2 (issue 39 H12), and two
identical runs at once never share one journal (H20)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.common.journal import Journal, load_records
from doceval.errors import UsageError

DOCS = {
    "pydantic@2.8.2": [("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nA dict of the model.")]
}
GOLDEN = "".join(
    json.dumps({"id": f"a{i}", "question": f"dict of the model {i}", "library": "pydantic", "version": "2.8.2",
                "relevant_ids": ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump"], "split": "test",
                "kind": "lookup", "reference_answer": "model_dump", "out_of_scope": False,
                "expected_apis": ["model_dump"], "forbidden_apis": []}) + "\n"
    for i in range(4)
)  # fmt: skip
# The user's assistant; with HOLD set it waits for the file HOLD names before answering (the first run).
AGENT = """
import os, pathlib, time

def answer(question, library=None, version=None, session_id=None):
    hold = os.environ.get("DOCEVAL_TEST_HOLD")
    if hold:
        pathlib.Path(hold + ".asked").touch()
        while not pathlib.Path(hold).exists():
            time.sleep(0.05)
    return {"answer": "model_dump", "sources": ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump"],
            "refused": False}
"""
RUN = ["eval", "--no-track", "--quiet", "--split", "test", "agent=function", "agent.target=my_agent:answer"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_tiny_project(tmp_path, DOCS, GOLDEN)
    (tmp_path / "my_agent.py").write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DOCEVAL_TEST_HOLD", raising=False)
    monkeypatch.delitem(
        sys.modules, "my_agent", raising=False
    )  # this project's module, not an earlier test's
    return tmp_path


def test_a_journal_path_that_is_a_directory_is_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """IsADirectoryError was a traceback (exit 1); the message names the path and the fix."""
    assert main([*RUN, "--output", "first.json"]) == 0
    (journal,) = (project / "data" / "runs" / "eval").glob("*/journal.jsonl")
    journal.unlink()
    (journal.parent / "finished.json").unlink()
    journal.mkdir()
    capsys.readouterr()
    assert main([*RUN, "--output", "second.json"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{journal.relative_to(project)}: is a directory, not a journal file" in err and "paths.runs" in err
    )
    assert "Traceback" not in err
    with pytest.raises(UsageError, match="is a directory"):
        load_records(journal, dict, "a record")
    with pytest.raises(UsageError, match="is a directory"):
        Journal(journal)


@pytest.mark.slow
def test_a_second_identical_run_never_shares_the_first_ones_journal(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two identical runs at once both asked the system and appended to one journal (18 lines for 10 ids):
    the second exits 2 naming the first while it holds the journals."""
    hold = project / "release"
    env = {**os.environ, "DOCEVAL_TEST_HOLD": str(hold), "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen([sys.executable, "-m", "doceval.cli.main", *RUN, "--output", "first.json"],
                             cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not Path(str(hold) + ".asked").exists():  # the first run holds the lock and is asking
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        assert main([*RUN, "--output", "second.json"]) == 2
        err = capsys.readouterr().err
        assert "journals in" in err and f"held by another process (pid {first.pid} (" in err
        assert not (project / "second.json").exists()
        hold.touch()
        out, errors = first.communicate(timeout=60)
        assert first.returncode == 0, errors
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    (journal,) = (project / "data" / "runs" / "eval").glob("*/journal.jsonl")
    assert len(journal.read_text().splitlines()) == 4  # one reply per entry: only the first run wrote
    assert main([*RUN, "--output", "third.json"]) == 0  # once it is done, the next run goes ahead
