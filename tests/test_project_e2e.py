"""The README's own-docs recipe, end to end (issue 29's "Done when"): from an empty folder holding only a
two-version docs folder and a golden set, `doceval init` and `dvc repro` evaluate it with the default dense
retriever (the real MiniLM), then a retriever function, an HTTP assistant, a sweep and `doceval history` run
there on the installed doceval. RECIPE is what the README shows, command for command."""

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
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "acme"
PORT = "$(cat port.txt)"  # the assistant writes the free port it serves on
RECIPE = [
    "doceval init . --docs docs --library acme --golden golden.jsonl --git --dvc",
    "git add -A && git commit -qm 'acme docs and golden set'",
    "dvc repro",
    "doceval eval --output eval/runs/function.json retriever=function retriever.target=my_retriever:retrieve",
    f"doceval eval --output eval/runs/http.json agent=http agent.url=http://127.0.0.1:{PORT}/ask",
    "doceval sweep --jobs 1 -m floors.global=0.2,0.4",
    "git add -A && git commit -qm 'runs' && doceval eval --output eval/runs/latest.json",
    "doceval history",
]


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


def _sh(command: str, cwd: Path) -> str:
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, (
        f"{command}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def _metrics(path: Path) -> dict[str, object]:
    metrics: dict[str, object] = json.loads(path.read_text())["metrics"]
    return metrics


@pytest.mark.slow
def test_the_own_docs_recipe_runs_end_to_end(tmp_path: Path) -> None:
    for name in ("docs", "golden.jsonl", "my_retriever.py", "assistant.py"):
        source = FIXTURE / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    init, commit, repro, function, http, sweep, track, history = RECIPE

    out = _sh(init, tmp_path)
    assert "wrote doceval.yaml" in out and (tmp_path / ".dvc").is_dir() and (tmp_path / ".git").is_dir()
    _sh(commit, tmp_path)
    _sh(repro, tmp_path)
    headline = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert isinstance(headline["hit_rate"], float) and headline["hit_rate"] > 0
    assert isinstance(headline["refused_correctly"], float)
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["config"]["retriever"]["name"] == "dense"
    assert summary["metrics"]["counts"]["n_entries"] == 9  # the test split of the fixture
    assert (tmp_path / "eval" / "report.md").is_file() and (tmp_path / "mlruns" / "mlflow.db").is_file()

    _sh(function, tmp_path)
    assert isinstance(_metrics(tmp_path / "eval/runs/function.json")["hit_rate"], float)

    server = subprocess.Popen([sys.executable, "assistant.py", "port.txt"], cwd=tmp_path, env=_env())
    try:
        for _ in range(300):  # the port file appears once the server listens
            if (tmp_path / "port.txt").is_file() and (tmp_path / "port.txt").read_text():
                break
            time.sleep(0.05)
        _sh(http, tmp_path)
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    served = _metrics(tmp_path / "eval/runs/http.json")
    assert isinstance(served["hit_rate"], float) and served["counts"]["system_errors"] == 0  # type: ignore[index]

    out = _sh(sweep, tmp_path)
    assert "floors.global=0.2" in out and "floors.global=0.4" in out
    points = sorted((tmp_path / "eval" / "sweeps").glob("*/points.csv"))
    assert len(points) == 1 and len(list(csv.DictReader(points[0].open()))) == 2

    _sh(track, tmp_path)
    out = _sh(history, tmp_path)
    found = re.search(r"^(\d+) runs: ", out, re.MULTILINE)
    assert found and int(found.group(1)) >= 2, out  # the repro's evaluate and the tracked eval, two commits


def test_the_readme_shows_the_recipe_command_for_command() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    at = 0
    for command in RECIPE:  # in the order the test runs them
        found = readme.find(command, at)
        assert found >= 0, f"README.md does not show {command!r} after the recipe's earlier commands"
        at = found + len(command)
