"""The real tools end to end on a tiny fixture project: `dvc repro` (twice), a parallel Hydra sweep with MLflow
parent/child runs, and `dvc exp run -S`. The fixture is a copy of this repository's dvc.yaml, conf/ and src/
with a markdown docs folder instead of wheels, so it runs offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

DOCS = {
    "models.md": """# Models

Declare a model by subclassing BaseThing and adding typed attributes.

## Serialisation

Call dump_thing() to turn a model into a plain dictionary; pass exclude to drop fields.

## Validation

Use check_value to validate a single attribute before assignment.
""",
    "cli.md": """# Commands

Create a command with the command decorator and add options with option().

## Options

An option takes a default value and a help text; flags are boolean options.
""",
}

GOLDEN = [
    (
        "c1",
        "how do I turn a model into a dictionary",
        False,
        ["tinylib@1.0:models.serialisation"],
        "calibration",
    ),
    ("c2", "adding options with a default to a command", False, ["tinylib@1.0:cli.options"], "calibration"),
    ("c3", "how do I validate one attribute", False, ["tinylib@1.0:models.validation"], "calibration"),
    ("c4", "what is the capital of France", True, [], "calibration"),
    (
        "t1",
        "convert model to dictionary and drop fields",
        False,
        ["tinylib@1.0:models.serialisation"],
        "test",
    ),
    ("t2", "boolean flags for my command", False, ["tinylib@1.0:cli.options"], "test"),
    ("t3", "how to declare a model class", False, ["tinylib@1.0:models.models"], "test"),
    ("t4", "recommend a good pizza place", True, [], "test"),
]


def _turn(question: str, doc: str | None, kind: str, needs_memory: bool) -> dict[str, object]:
    return {"question": question, "library": "tinylib", "version": "1.0", "out_of_scope": doc is None,
            "relevant_ids": [f"tinylib@1.0:{doc}"] if doc else [], "reference_answer": "see docs" if doc else "",
            "expected_apis": [], "forbidden_apis": [], "kind": kind, "needs_memory": needs_memory}  # fmt: skip


CONVERSATIONS = [
    {"id": "conv-1", "split": "test", "kind": "conversation", "turns": [
        _turn("how do I turn a model into a dictionary", "models.serialisation", "first_turn", False),
        _turn("and how do I drop fields there", "models.serialisation", "follow_up_reference", True)]},
    {"id": "conv-2", "split": "test", "kind": "conversation", "turns": [
        _turn("boolean flags for my command", "cli.options", "first_turn", False),
        _turn("what is the capital of France", None, "off_topic", False)]},
]  # fmt: skip


def _env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["HF_HUB_OFFLINE"] = "1"
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "doceval-test"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "test@example.invalid"
    return env


def run(
    cmd: list[str], project: Path, check: bool = True, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, cwd=project, env=_env(project), text=True, capture_output=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git + DVC repository shaped like this one, with tiny docs and golden set, after one `dvc repro`."""
    root = tmp_path_factory.mktemp("pipeline")
    for name in ("conf", "src"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "dvc.yaml", root / "dvc.yaml")
    shutil.copy(ROOT / ".gitignore", root / ".gitignore")
    docs = root / "tinydocs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    golden = root / "data" / "golden" / "v2.1.jsonl"
    golden.parent.mkdir(parents=True)
    lines = []
    for gid, question, oos, rel, split in GOLDEN:
        lines.append(json.dumps({
            "id": gid, "question": question, "library": "tinylib", "version": "1.0", "out_of_scope": oos,
            "relevant_ids": rel, "reference_answer": "" if oos else "see docs", "expected_apis": [],
            "forbidden_apis": [], "split": split, "kind": "off_topic" if oos else "lookup",
        }))  # fmt: skip
    golden.write_text("\n".join(lines) + "\n")
    # The conversation set the conversations stage replays (its test split): a follow-up and an off-topic turn.
    (golden.parent / "conversations.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS))
    # Labelled answers for the judge stage: a right and a wrong one per in-scope entry, on both splits.
    labels = root / "data" / "judge" / "v1.jsonl"
    labels.parent.mkdir(parents=True)
    labels.write_text("".join(
        json.dumps({"id": f"{gid}-{v}", "entry_id": gid, "category": "correct" if v == "ok" else "refusal",
                    "candidate": "see docs" if v == "ok" else "I don't know.", "verdict":
                    "correct" if v == "ok" else "incorrect", "reason": "fixture", "split": split,
                    "labelled_by": "fixture"}) + "\n"
        for gid, _, oos, _, split in GOLDEN if not oos for v in ("ok", "no")
    ))  # fmt: skip
    run(["git", "init", "-q"], root)
    run(["dvc", "init", "-q"], root)
    run(["dvc", "config", "core.analytics", "false"], root)
    shutil.copy(ROOT / ".dvc" / "config", root / ".dvc" / "config")
    # The docs group points at the folder; everything else stays the shipped default (dense retriever).
    (root / "conf" / "docs" / "tiny.yaml").write_text(
        f"chunk_chars: 1500\nfolders: [{{path: {docs}, library: tinylib, version: '1.0'}}]\nlibraries: []\n"
        "golden_set: data/golden/v2.1.jsonl\n"
    )
    config = (root / "conf" / "config.yaml").read_text().replace("  - docs: default", "  - docs: tiny")
    # the judge stage measures against the one label file written above
    shipped = "labels: [data/judge/v1.jsonl, data/judge/v2.jsonl]"
    assert shipped in config
    config = config.replace(shipped, "labels: [data/judge/v1.jsonl]")
    held_out = "held_out: [data/judge/v3.jsonl]"  # no file held out as a whole here: the stage says so
    assert held_out in config
    config = config.replace(held_out, "held_out: []")
    (root / "conf" / "config.yaml").write_text(config)
    run(["doceval", "params"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "fixture"], root)
    run(["dvc", "repro"], root)
    return root


@pytest.mark.slow
def test_dvc_repro_produces_the_headline_numbers(project: Path) -> None:
    metrics = json.loads((project / "eval" / "metrics.json").read_text())
    assert metrics["split"] == "test"
    assert metrics["n_in_scope"] == 3 and metrics["n_out_of_scope"] == 1
    for key in ("hit_rate", "recall", "mrr", "ndcg", "refused_correctly"):
        assert metrics[key] is not None and 0.0 <= metrics[key] <= 1.0
    assert metrics["answer_accuracy"] is None  # no judge: not judged, never 0
    floors = json.loads((project / "eval" / "calibration" / "floors.json").read_text())
    assert floors["provenance"]["split"] == "calibration"
    summary = json.loads((project / "eval" / "summary.json").read_text())
    assert summary["config"]["floors"]["source"].startswith("calibrated:")
    assert summary["config"]["floors"]["per_library"] == floors["per_library"]
    report = (project / "eval" / "report.md").read_text()
    assert report.startswith("# doceval report")
    assert "## Refusal trade-off" in report and "## Judge agreement (reference judge)" in report
    trade = json.loads((project / "eval" / "tradeoff" / "tradeoff.json").read_text())
    assert set(trade["libraries"]) == {"(pooled)", "tinylib"} and trade["per_library_vs_global"]["rows"]
    assert json.loads((project / "eval" / "judge" / "reference.json").read_text())["n_rows"] == 6
    lock = (project / "dvc.lock").read_text()
    assert "data/golden/v2.1.jsonl" in lock and "md5:" in lock
    # The conversations stage: its own summary and DVC metrics, and a section of the report.
    conversations = json.loads((project / "eval" / "conversations" / "metrics.json").read_text())
    assert conversations["n_conversations"] == 2 and conversations["n_turns"] == 4
    assert 0.0 <= conversations["conversations.hit_rate"] <= 1.0
    assert "conversations.memory_benefit.hit_rate" in conversations
    assert "## Conversations" in report and "conversations:" in lock
    # Every replay is kept, a DVC output of the stage (the fixture's set has no standalone rewrites).
    replays = project / "eval" / "conversations" / "replays"
    assert {p.name for p in replays.iterdir()} == {"memory_reset.json", "warm_memory.json", "standalone.json"}
    assert "not_measured" in json.loads((replays / "standalone.json").read_text())
    assert conversations["conversations.memory_recovery.hit_rate"] is None
    assert "eval/conversations/replays" in lock


@pytest.mark.slow
def test_second_repro_does_nothing(project: Path) -> None:
    proc = run(["dvc", "repro"], project)
    assert "Running stage" not in proc.stdout
    status = run(["dvc", "status"], project)
    assert "up to date" in status.stdout.lower()


@pytest.mark.slow
def test_parallel_sweep_logs_parent_and_children(project: Path) -> None:
    proc = run(["doceval", "sweep", "-m", "floors.global=0.0,0.2,0.4,0.6", "--jobs", "2"], project)
    assert "4 points" in proc.stdout
    parent = proc.stdout.split("mlflow: parent run ")[1].split()[0]
    sweep_dir = sorted((project / "eval" / "sweeps").iterdir())[-1]
    points = [json.loads(p.read_text()) for p in sorted((sweep_dir / "points").glob("*.json"))]
    assert len(points) == 4
    refused = [p["metrics"]["refused_correctly"] for p in sorted(points, key=lambda p: p["overrides"][-1])]
    assert refused == sorted(refused)  # a higher floor never refuses fewer out-of-scope questions
    assert (sweep_dir / "sweep.png").stat().st_size > 0

    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    children = client.search_runs(
        [client.get_experiment_by_name("doceval-calibration").experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent}'",
    )
    assert len(children) == 4


@pytest.mark.slow
def test_dvc_exp_run_with_a_hydra_override(project: Path) -> None:
    run(["dvc", "exp", "run", "-S", "retriever=bm25", "--name", "bm25"], project)
    shown = run(["dvc", "exp", "show", "--json"], project).stdout
    assert "bm25" in shown


@pytest.mark.slow
def test_sweep_over_a_split_with_no_entries_is_a_usage_error(project: Path) -> None:
    proc = run(["doceval", "sweep", "-m", "floors.global=0.1,0.2", "split=all", "split.name=holdout"], project,
               check=False)  # fmt: skip
    assert proc.returncode == 2
    assert (
        "no entries are tagged 'holdout'" in proc.stderr and "known splits: calibration, test" in proc.stderr
    )


@pytest.mark.slow
def test_compare_two_logged_mlflow_runs_by_id(project: Path) -> None:
    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    # The evaluate stage's run (the conversations stage logs its own to the same experiment).
    test_runs = client.search_runs([client.get_experiment_by_name("doceval-test").experiment_id],
                                   filter_string="tags.stage = 'evaluate'")  # fmt: skip
    calibration = client.search_runs([client.get_experiment_by_name("doceval-calibration").experiment_id],
                                     filter_string="tags.stage = 'calibrate'")  # fmt: skip
    assert test_runs and calibration
    run_id = test_runs[0].info.run_id
    assert test_runs[0].data.tags["split"] == "test" and calibration[0].data.tags["split"] == "calibration"
    proc = run(["doceval", "compare", run_id, "eval/summary.json"], project, check=False)
    assert proc.returncode in (0, 3), proc.stderr  # the gate decides; the comparison itself worked
    assert "hit_rate" in proc.stdout and "+0.0000" in proc.stdout  # the run and its own summary agree
    assert "CI gate (" in proc.stdout
