"""The inner loop's start-up budget (issue 26): a 10-entry ``doceval eval --no-track`` loads none of the heavy
libraries it does not use. torch (the embedder), mlflow (tracking), openai (LLM calls) and SciPy (Jeffreys
intervals only) each cost 0.3-3.6 s to import; one stray top-level import would undo the budget without
failing anything else. Each run is a fresh interpreter that prints what it imported."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import doceval

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(doceval.__file__).resolve().parents[1]  # the doceval under test, handed to the child
# scipy.special (0.25 s, the mid-P tails) may load; scipy.optimize and scipy.stats may not.
HEAVY = (
    "torch",
    "mlflow",
    "openai",
    "scipy.optimize",
    "scipy.stats",
    "sentence_transformers",
    "qdrant_client",
    "qdrant_edge",
)
EVAL = ["eval", "--golden", "examples/askdocs/golden.jsonl", "--split", "all", "--no-track", "--quiet"]

# Runs doceval's CLI in-process (as the console script does), then writes the names of every module it loaded
# to argv[1].
RUN_AND_LIST = """
import json, sys
from doceval.cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:  # --help
    code = exc.code
with open(sys.argv[1], "w") as f:
    json.dump({"exit": code, "modules": sorted(sys.modules)}, f)
"""


def loaded_modules(tmp_path: Path, *args: str) -> list[str]:
    listing = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", RUN_AND_LIST, str(listing), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(listing.read_text())
    assert result["exit"] == 0, proc.stderr[-2000:]
    modules: list[str] = result["modules"]
    return modules


def heavy(modules: list[str]) -> list[str]:
    """The heavy packages among ``modules`` (a package counts when it was imported itself: the mid-P root finder
    loads the one extension module ``scipy.optimize._zeros`` without its 0.5 s package)."""
    return sorted(set(modules) & set(HEAVY))


@pytest.fixture(scope="module")
def assistant_url() -> Iterator[str]:
    """examples/http_agent/server.py on a free port of 127.0.0.1, stopped by its pid afterwards."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "http_agent" / "server.py"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 20.0)
        assert ready, "the example server printed no URL"
        yield proc.stdout.readline().strip() + "/ask"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize(
    "system",
    [
        ["retriever=function", "retriever.target=examples.askdocs.retrievers:overlap", "floors=zero"],
        ["agent=function", "agent.target=examples.askdocs.assistant:answer"],
    ],
    ids=["retriever=function", "agent=function"],
)
def test_a_no_track_eval_imports_no_heavy_library(tmp_path: Path, system: list[str]) -> None:
    modules = loaded_modules(tmp_path, *EVAL, "--output", str(tmp_path / "run.json"), *system, "k=3",
                             f"paths.runs={tmp_path / 'runs'}")  # fmt: skip
    assert "doceval.scoring.aggregate" in modules  # it did score
    assert heavy(modules) == []


@pytest.mark.slow
def test_a_no_track_eval_of_an_http_assistant_imports_no_heavy_library(
    tmp_path: Path, assistant_url: str
) -> None:
    modules = loaded_modules(tmp_path, *EVAL, "--output", str(tmp_path / "run.json"), "agent=http",
                             f"agent.url={assistant_url}", "k=3", f"paths.runs={tmp_path / 'runs'}")  # fmt: skip
    assert "doceval.system.external.http" in modules
    assert heavy(modules) == []


@pytest.mark.slow
def test_help_imports_no_heavy_library(tmp_path: Path) -> None:
    modules = loaded_modules(tmp_path, "--help")
    assert heavy(modules) == [] and "numpy" not in modules and "hydra" not in modules  # argparse only
