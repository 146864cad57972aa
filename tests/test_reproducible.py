"""Pipeline outputs are a function of their inputs (issue 40, C9; docs/design.md 6.4): the retrieve, calibrate,
evaluate and report stages, run in two copies of one project (one a git repository at some commit, one not),
write byte-identical files, so `dvc repro` in a fresh clone leaves dvc.lock's hashes and eval/report.md as
committed. What changes per run (each entry's timing, the commit, the clock) goes to the stage's MLflow run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from test_eval_cli import DOCS, GOLDEN
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.harness.summary import pipeline_record

OUTPUTS = ("eval/summary.json", "eval/metrics.json", "eval/calibration/floors.json", "eval/calibration/floors.png",
           "eval/calibration/summary.json", "eval/report.md", "data/runs/candidates/candidates.jsonl",
           "data/runs/candidates/meta.json", "eval/ann_vs_exact.json", "eval/tradeoff/tradeoff.json",
           "eval/tradeoff/tradeoff.png")  # fmt: skip


def _golden() -> str:
    rows = [dict(e, split=e["split"] or "test") for e in GOLDEN]
    # an off-topic question to calibrate refusal on
    rows.append({**rows[4], "id": "u3", "split": "calibration"})
    return "".join(
        json.dumps({**e, "reference_answer": "ref " + " ".join(e["expected_apis"])}) + "\n" for e in rows
    )


def _run_stages(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    monkeypatch.chdir(root)
    assert main(["params", "retriever=bm25", "tracking.enabled=false", "calibration.min_entries=1"]) == 0
    for stage in ("retrieve", "calibrate", "evaluate"):
        assert main([stage, "--quiet"]) == 0, stage
    assert main(["report"]) == 0
    return {name: (root / name).read_bytes() for name in OUTPUTS}


@pytest.mark.slow
def test_two_runs_of_the_same_inputs_write_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On main each entry's timing, the git commit and dirty flag (summary.json) and the time and commit of the
    calibration (floors.json, quoted by report.md) made every run's files differ."""
    (tmp_path / "a").mkdir()
    first = make_tiny_project(tmp_path / "a", DOCS, _golden())
    second = tmp_path / "b"
    shutil.copytree(first, second, symlinks=True)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run(["git", *args], cwd=second, env=env, check=True, capture_output=True)
    a = _run_stages(first, monkeypatch)
    b = _run_stages(second, monkeypatch)
    assert [name for name in OUTPUTS if a[name] != b[name]] == []
    summary = json.loads(a["eval/summary.json"])
    assert "timing" not in summary["entries"][0] and "git_commit" not in summary["config"]["provenance"]
    assert "created" not in json.loads(a["eval/calibration/floors.json"])["provenance"]


def test_the_pipeline_record_keeps_what_the_inputs_decide() -> None:
    summary = {"metrics": {"hit_rate": 1.0}, "complete": True,
               "config": {"k": 5, "provenance": {"git_commit": "abc", "git_dirty": True, "python": "3.11.7",
                                                 "platform": "Linux", "versions": {"doceval": "1"}},
                          "usage": {"by_role": {"judge": {"calls": 2}}, "this_invocation": {"x": 1},
                                    "cache": {"hits": 1}, "resumed": 3, "journal": {"mode": "resumed"}}},
               "entries": [{"id": "a", "timing": {"start": 1.0}, "scores": {}}]}  # fmt: skip
    record = pipeline_record(summary)
    assert record["config"]["provenance"] == {"versions": {"doceval": "1"}}
    assert record["config"]["usage"] == {"by_role": {"judge": {"calls": 2}}}
    assert record["entries"] == [{"id": "a", "scores": {}}] and record["metrics"] == summary["metrics"]
    assert summary["entries"][0]["timing"] == {"start": 1.0}  # the whole summary is MLflow's, untouched


def test_make_repro_ends_with_the_headline_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main `make repro` ended with `dvc metrics show` over every key (lines ~9,550 characters wide)."""
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nrepro:", 1)[1].split("\n\n", 1)[0].strip().splitlines()
    assert recipe[-1].split("#")[0].split() == ["$(VENV)/doceval", "show"]
    (tmp_path / "a").mkdir()
    _run_stages(make_tiny_project(tmp_path / "a", DOCS, _golden()), monkeypatch)
    capsys.readouterr()
    assert main(["show"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("split=test k=5 system=bm25") and out[2].startswith("---")
    assert any(line.startswith("hit_rate@5 ") for line in out) and max(map(len, out)) <= 120
    assert not any(line.startswith("conversations=") for line in out)  # no conversations stage ran here
