"""Conversations first-class in a user's project (issue 40, C2): `doceval init --conversations FILE` (or the same
on an existing project) writes `golden_conversations` and a conversations stage, and without it no dangling path
remains; `doceval conversations` takes Hydra overrides as `doceval eval` does and prints its figures; its errors
name `golden_conversations`; the report says which system, floors and golden set produced each section; the
report stage depends on every file it reads, in the repository's dvc.yaml and in init's."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_conversation_pipeline import DOCS, SINGLE_QUESTION, tiny_project
from test_memory_recovery import standalone_lines
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.config.compose import compose, load_params
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.stages import conversations, report

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "acme"
OVERRIDES = ["retriever=bm25", "floors=zero", "k=1", "bootstrap=200", "tracking.enabled=false"]
ASSISTANT = '''
def answer(question, library, version, session_id):
    """A user's assistant: answers every question from the pydantic 1.10 dict document."""
    return {"answer": "Call .dict() on it.", "sources": ["pydantic@1.10.17:pydantic.main.BaseModel.dict"],
            "refused": False}
'''


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The acme docs and golden set, and a conversation set with its qrels beside it, as cwd."""
    shutil.copytree(FIXTURE / "docs", tmp_path / "docs")
    shutil.copy(FIXTURE / "golden.jsonl", tmp_path / "golden.jsonl")
    (tmp_path / "conv.jsonl").write_text(standalone_lines(), encoding="utf-8")
    (tmp_path / "conv.qrels.jsonl").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _init(*extra: str) -> int:
    return main(["init", ".", "--docs", "docs", "--library", "acme", "--golden", "golden.jsonl", *extra])


def _stages(folder: Path) -> dict[str, Any]:
    stages: dict[str, Any] = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    return stages


def _outs(stage: dict[str, Any]) -> list[str]:
    return [
        o if isinstance(o, str) else next(iter(o))
        for o in [*stage.get("outs", []), *stage.get("metrics", [])]
    ]


def _unread_by_report(stages: dict[str, Any], eval_dir: str = "eval") -> list[str]:
    """The files the report reads that a stage of ``stages`` writes but the report stage does not depend on."""
    deps = stages["report"]["deps"]
    missing = []
    for path in (p.as_posix() for p in report.report_inputs(Path(eval_dir)).values()):
        written = any(path == out or path.startswith(out + "/") for s in stages.values() for out in _outs(s))
        covered = any(path == dep or path.startswith(dep + "/") for dep in deps)
        if written and not covered:
            missing.append(path)
    return missing


# ------------------------------------------------------------------------------------------- doceval init


def test_init_with_conversations_writes_the_key_the_stage_and_the_report_s_dependency(acme: Path) -> None:
    assert _init("--conversations", "conv.jsonl") == 0
    overrides = yaml.safe_load((acme / "doceval.yaml").read_text())["overrides"]
    assert "golden_conversations='conv.jsonl'" in overrides
    assert load_params(acme / "params.yaml").golden_conversations == "conv.jsonl"
    stages = _stages(acme)
    assert list(stages) == ["docs", "index", "retrieve", "calibrate", "evaluate", "conversations", "report"]
    stage = stages["conversations"]
    assert stage["cmd"] == "doceval stage conversations --quiet"
    assert {"${golden_conversations}", "conv.qrels.jsonl", "eval/calibration/floors.json"} <= set(
        stage["deps"]
    )
    assert "golden_conversations" in stage["params"]
    assert {"eval/conversations/summary.json", "eval/conversations/replays"} <= set(_outs(stage))
    assert _unread_by_report(stages) == []
    assert main(["params", "--check"]) == 0


def test_init_without_conversations_leaves_no_dangling_path(
    acme: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _init() == 0
    assert load_params(acme / "params.yaml").golden_conversations is None
    assert "conversations" not in _stages(acme) and _unread_by_report(_stages(acme)) == []
    capsys.readouterr()
    assert main(["conversations", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "golden_conversations is not set (null)" in err and "--conversations FILE" in err


def test_a_conversation_set_is_added_to_an_existing_project_once(
    acme: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _init() == 0
    assert main(["init", ".", "--conversations", "conv.jsonl"]) == 0
    assert "rewrote" in capsys.readouterr().out
    overrides = yaml.safe_load((acme / "doceval.yaml").read_text())["overrides"]
    assert "golden_conversations='conv.jsonl'" in overrides and "golden_conversations=null" not in overrides
    assert main(["params"]) == 0 and load_params(acme / "params.yaml").golden_conversations == "conv.jsonl"
    stages = _stages(acme)
    assert list(stages)[-2:] == ["conversations", "report"] and _unread_by_report(stages) == []
    assert main(["init", ".", "--conversations", "conv.jsonl"]) == 2
    assert "has a conversation set already" in capsys.readouterr().err


def test_the_repository_s_report_stage_depends_on_every_file_it_reads() -> None:
    assert _unread_by_report(_stages(ROOT)) == []
    outs = {o for s in _stages(ROOT).values() for o in _outs(s)}
    assert "eval/conversations/replays" in outs  # every replay is an output of the conversations stage


# ------------------------------------------------------------------------------------------- the command


def _tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tiny_project(tmp_path, {pin: list(items) for pin, items in DOCS.items()}, standalone_lines())
    (tmp_path / "data" / "golden" / "conversations.jsonl").write_text(standalone_lines(), encoding="utf-8")
    (tmp_path / "assistant.py").write_text(ASSISTANT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_the_command_takes_overrides_like_eval_and_prints_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tiny(tmp_path, monkeypatch)
    assert main(["conversations", "--quiet", *OVERRIDES]) == 0
    out = capsys.readouterr().out
    assert "memory (needs_memory turns" in out and "recovery" in out and "conversations=2 turns=5" in out
    written = tmp_path / "eval" / "runs" / "conversations"
    assert {p.name for p in (written / "replays").iterdir()} == {f"{n}.json" for n in conversations.REPLAYS}
    assert not (tmp_path / "eval" / "conversations").exists()  # the DVC stage's output is left alone
    # The user's own assistant, as `doceval eval agent=function` takes it.
    assert main(["conversations", "--quiet", "--output", "eval/runs/mine", *OVERRIDES,
                 "agent=function", "agent.target=assistant:answer"]) == 0  # fmt: skip
    summary = json.loads((tmp_path / "eval/runs/mine/summary.json").read_text())
    assert summary["config"]["system"]["agent"]["target"] == "assistant:answer"
    assert "memory_recovery" in summary["metrics"]["conversations"]
    assert main(["conversations", "--params", "other.yaml", *OVERRIDES]) == 2


def test_a_missing_conversation_set_is_named_by_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tiny(tmp_path, monkeypatch)
    assert main(["params", *OVERRIDES, "golden_conversations=data/golden/missing.jsonl"]) == 0
    capsys.readouterr()
    assert main(["conversations", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "golden_conversations=data/golden/missing.jsonl: no such file" in err
    assert "--golden" not in err


# ------------------------------------------------------------------------------------------- the report


def test_each_report_section_names_the_system_floors_and_golden_set_that_produced_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tiny_project(tmp_path)
    single = tmp_path / "single.jsonl"
    single.write_text(json.dumps(SINGLE_QUESTION) + "\n")
    eval_dir = Path(cfg.paths.eval)
    eval_dir.mkdir(parents=True)
    headline = evaluate(cfg, EvalOptions(progress=False, golden=single))
    (eval_dir / "summary.json").write_text(json.dumps(headline.to_dict()))
    # The conversations replayed with the user's assistant, not the headline's retriever.
    (tmp_path / "assistant.py").write_text(ASSISTANT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    overrides = [*OVERRIDES, "agent=function", "agent.target=assistant:answer", f"paths.eval={eval_dir}",
                 f"golden_conversations={cfg.golden_conversations}", f"paths.docs={cfg.paths.docs}",
                 f"paths.runs={cfg.paths.runs}", f"paths.index={cfg.paths.index}", f"paths.cache={cfg.paths.cache}"]  # fmt: skip
    conversations.run(compose(overrides, conf_dir=ROOT / "conf"), progress=False)
    path, _ = report.run(dataclasses.replace(cfg))
    text = path.read_text()
    title = text.splitlines()[2]
    assert "system under test `bm25`" in title
    section = text[text.index("## Conversations") :]
    line = section.splitlines()[2]
    assert line.startswith(f"From `{eval_dir / 'conversations' / 'summary.json'}`: system under test ")
    assert (
        "`function:assistant:answer`" in line
        and "floors `none (the assistant applies its own floors)`" in line
    )
    assert f"golden set `{cfg.golden_conversations}` (md5 `" in line
    assert "calibrated floors" not in section and "### Memory recovery" in section
