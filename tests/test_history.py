"""History and diagnosis: a synthetic history of tracked runs over several commits (a temporary git repository
and a real MLflow store) where a slow decline passes the single-baseline gate and fails the drift rule; the
history table and plot; dirty runs left out on request; the failure stage of every kind of entry by hand; and
compare's transition table."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_eval_cli import eval_args, overrides
from test_eval_cli import project as project  # noqa: F401 - the tiny project fixture

from doceval.cli.main import main
from doceval.results.comparison import compare, format_compare
from doceval.scoring.failures import STAGES, failure_stage, stage_counts, transitions


def _git(root: Path, *args: str, date: str | None = None) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", **({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {})}  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def _history(project: Path, n: int, step: float) -> tuple[str, list[str], dict[str, Any]]:
    """n commits, one tracked run each, hit_rate falling by ``step`` per commit; returns (uri, commits, summary)."""
    from doceval.tracking import log_run

    assert main(eval_args("--split", "test", *overrides())) == 0
    base = json.loads((project / "out.json").read_text())
    uri = f"sqlite:///{project / 'mlruns.db'}"
    _git(project, "init", "-q")
    commits = []
    for i in range(n):
        _git(project, "commit", "-q", "--allow-empty", "-m", f"c{i}", date=f"2026-11-{i + 1:02d}T12:00:00")
        commits.append(_git(project, "rev-parse", "HEAD"))
        s = copy.deepcopy(base)
        s["metrics"]["hit_rate"] = 0.80 - step * i
        s["metrics"]["ci95"]["hit_rate"] = [0.70 - step * i, 0.90 - step * i]
        s["config"]["provenance"] = {
            **s["config"]["provenance"],
            "git_commit": commits[-1],
            "git_dirty": i == 2,
        }
        log_run(s, uri=uri, root=project, run_name=f"run{i}")
    return uri, commits, base


@pytest.mark.slow
def test_history_table_plot_and_dirty_runs(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri, commits, _ = _history(project, 5, 0.01)
    capsys.readouterr()
    assert main(["history", "--tracking-uri", uri, "--metric", "hit_rate", "--plot", "h.png"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line[:8] in {c[:8] for c in commits}]
    assert [line[:8] for line in lines] == [c[:8] for c in commits]  # commit order
    # the value, its interval, the change from the previous run; the dirty run shown
    assert "0.780 [0.68,0.88] -0.010" in out and "yes" in lines[2]
    assert (project / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        main(["history", "--tracking-uri", uri, "--metric", "hit_rate", "--exclude-dirty", "--plot", "h.png"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("4 runs") and commits[2][:8] not in out
    assert main(["history", "--tracking-uri", uri, "--last", "2", "--plot", "h.png"]) == 0
    assert capsys.readouterr().out.startswith("2 runs")
    assert main(["history", "--tracking-uri", uri, "--metric", "hits"]) == 2


@pytest.mark.slow
def test_history_outside_a_git_repository_says_it_needs_a_commit(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from doceval.tracking import log_run

    assert main(eval_args("--split", "test", *overrides())) == 0
    summary = json.loads((project / "out.json").read_text())
    summary["config"]["provenance"]["git_commit"] = None  # what a run in a folder without git records
    uri = f"sqlite:///{project / 'mlruns.db'}"
    for i in range(2):
        log_run(summary, uri=uri, root=project, run_name=f"run{i}")
    capsys.readouterr()
    assert main(["history", "--tracking-uri", uri, "--plot", "h.png"]) == 2
    err = capsys.readouterr().err
    assert "2 tracked runs" in err and "git commit" in err and "git init" in err


@pytest.mark.slow
def test_history_picks_a_family_by_system_or_run_name(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from doceval.tracking import log_run

    uri, commits, base = _history(project, 3, 0.01)
    other = copy.deepcopy(base)
    other["config"]["retriever"]["name"] = "overlap"  # another system under test, logged last
    other["config"]["provenance"] = {**other["config"]["provenance"], "git_commit": commits[-1]}
    log_run(other, uri=uri, root=project, run_name="overlap-try")
    capsys.readouterr()
    history = ["history", "--tracking-uri", uri, "--metric", "hit_rate", "--plot", "h.png"]
    assert main(history) == 0
    assert capsys.readouterr().out.startswith("1 runs: ")  # the newest run's family: overlap's
    assert main([*history, "--system", "bm25"]) == 0
    assert capsys.readouterr().out.startswith("3 runs: ")
    assert main([*history, "--run-name", "run0"]) == 0
    assert capsys.readouterr().out.startswith("3 runs: ")
    assert main([*history, "--run-name", "overlap-try"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 runs: ") and "system overlap" in out
    assert main([*history, "--system", "nosuch"]) == 2
    assert "--system nosuch" in capsys.readouterr().err


@pytest.mark.slow
def test_a_slow_decline_passes_the_baseline_gate_and_fails_the_drift_rule(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, commits, base = _history(project, 6, 0.01)
    now = copy.deepcopy(base)
    now["metrics"]["hit_rate"] = 0.80 - 0.01 * 6
    now["config"]["provenance"]["git_commit"] = "f" * 40
    (project / "now.json").write_text(json.dumps(now))
    prev = copy.deepcopy(base)
    prev["metrics"]["hit_rate"] = 0.80 - 0.01 * 5
    (project / "prev.json").write_text(json.dumps(prev))
    gate = project / "gate.yaml"
    gate.write_text("thresholds: {hit_rate: 0.5}\nnon_regression: {enabled: true, tolerance: 0.02, metrics: [hit_rate], "
                    "mode: point}\ndrift: {enabled: false, metrics: [hit_rate], tolerance: 0.03, window: 10}\n")  # fmt: skip
    args = ["gate", "now.json", "--config", str(gate), "--baseline", "prev.json", "--tracking-uri", uri]
    assert main(args) == 0  # one step of 0.01 is within the 0.02 tolerance
    gate.write_text(gate.read_text().replace("drift: {enabled: false", "drift: {enabled: true"))
    capsys.readouterr()
    assert main(args) == 3
    out = capsys.readouterr().out
    assert (
        "hit_rate drifted by 0.0600 from 0.8000" in out and commits[0][:8] in out and commits[-1][:8] in out
    )
    assert "no drift > 0.03 in hit_rate" in out
    # a pinned release run as the reference
    gate.write_text(gate.read_text().replace("window: 10}", "window: 10, reference: nope}"))
    assert main(args) == 0
    assert "not in the tracked history" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ failure stages


def _row(**over: Any) -> dict[str, Any]:
    row = {"id": "e", "library": "lib", "kind": "lookup", "out_of_scope": False, "refused": False,
           "refusal_reason": None, "retrieved": [["d", 0.9]], "answer": "use `load()`", "expected_apis": ["load("],
           "expected_any": [], "forbidden_apis": ["loads("], "verdict": True, "system_error": None,
           "scores": {"hit_rate": 1.0}}  # fmt: skip
    row.update(over)
    return row


@pytest.mark.parametrize(
    ("over", "stage"),
    [
        ({}, "ok"),
        ({"out_of_scope": True, "refused": True}, "correct_refusal"),
        ({"out_of_scope": True}, "hallucinated_out_of_scope"),
        ({"system_error": "timeout"}, "system_error"),
        (
            {
                "refused": True,
                "refusal_reason": "router: library 'x' is not indexed",
                "retrieved": [],
                "router_refusal": "router: library 'x' is not indexed",
            },
            "router_refused",
        ),  # fmt: skip
        (
            {"refused": True, "refusal_reason": "search: no passage cleared the floor 0.5", "retrieved": []},
            "no_candidate_above_floor",
        ),
        ({"refused": True, "sources": [], "refusal_reason": "I don't know"}, "system_refused"),
        ({"scores": {"hit_rate": 0.0}}, "relevant_not_in_top_k"),
        ({"answer": "call parse()"}, "answer_missing_expected_api"),
        ({"answer": "use load() or loads()"}, "answer_uses_forbidden_api"),
        ({"verdict": False}, "judged_incorrect"),
    ],
)
def test_failure_stage_by_hand(over: dict[str, Any], stage: str) -> None:
    assert failure_stage(_row(**over)) == stage


@pytest.mark.parametrize(
    ("cause", "stage"),
    [("router", "router_refused"), ("floor", "no_candidate_above_floor"), ("answerer", "system_refused"),
     ("system", "system_refused")],
)  # fmt: skip
def test_a_refusal_stage_comes_from_its_typed_cause_not_its_text(cause: Any, stage: str) -> None:
    # The reason's text is what the system said; a prefix in it means nothing.
    row = _row(refused=True, refusal_reason="search: router: anything", retrieved=[["d", 0.9]])
    assert failure_stage(row, cause) == stage
    assert (
        failure_stage(_row(refused=True, refusal_reason="router: x", retrieved=[["d", 0.9]]))
        == "system_refused"
    )


def test_every_stage_is_reachable_and_counted() -> None:
    rows = [_row(id="a"), _row(id="b", verdict=False), _row(id="c", kind="version_trap", verdict=False)]
    counts = stage_counts(rows, "kind")
    assert counts["lookup"]["ok"] == 1 and counts["lookup"]["judged_incorrect"] == 1
    assert counts["version_trap"]["judged_incorrect"] == 1
    assert set(STAGES) >= {failure_stage(_row())}


def test_compare_shows_the_stage_transitions_with_ids(project: Path) -> None:
    assert main(eval_args("--split", "test", *overrides())) == 0
    base = json.loads((project / "out.json").read_text())
    assert all(e["stage"] in STAGES for e in base["entries"])
    new = copy.deepcopy(base)
    moved = [e for e in new["entries"] if not e["out_of_scope"] and e["stage"] != "relevant_not_in_top_k"]
    assert moved
    for e in moved:
        e["scores"]["hit_rate"] = 0.0
        e["stage"] = failure_stage(e)
    result = compare(base, new, n_boot=100)
    assert result.transitions and result.transitions[0]["to"] == "relevant_not_in_top_k"
    assert sorted(result.transitions[0]["ids"]) == sorted(e["id"] for e in moved)
    text = format_compare(result)
    assert f"{len(moved):3d} {result.transitions[0]['from']} -> relevant_not_in_top_k" in text
    assert transitions(base["entries"], base["entries"]) == []


@pytest.mark.slow
def test_runs_say_what_they_are(project: Path) -> None:
    """A configured run is named split · system · k · floors · golden version, described by its headline."""
    import mlflow

    uri = f"sqlite:///{project / 'names.db'}"
    assert main(["eval", "--quiet", "--output", "mine.json", "--split", "test", *overrides(),
                 f"tracking.uri={uri}"]) == 0  # fmt: skip
    summary = json.loads((project / "mine.json").read_text())
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("doceval-test")
    run = client.search_runs([exp.experiment_id])[0]
    assert run.info.run_name == "test · bm25 · k5 · floors 0 · v2.1 · mine"
    note = run.data.tags["mlflow.note.content"]
    hit, ci = summary["metrics"]["hit_rate"], summary["metrics"]["ci95"]["hit_rate"]
    assert (
        note.startswith(f"hit_rate {hit:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]")
        and "answer_accuracy not judged" in note
    )


def test_same_golden_without_the_configured_golden_set_is_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39 H12: --same-golden hashes the configured golden set; without it, FileNotFoundError was a
    traceback (exit 1). The message names the file and the ways out."""
    (project / "data" / "golden" / "v2.1.jsonl").unlink()
    assert main(["history", "--same-golden", "--tracking-uri", f"sqlite:///{project / 'mlruns.db'}"]) == 2
    err = capsys.readouterr().err
    assert (
        "--same-golden: the configured golden set data/golden/v2.1.jsonl (the `golden` key) cannot be read"
        in err
    )
    assert "--golden-md5" in err and "Traceback" not in err
