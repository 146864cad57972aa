"""`doceval stage NAME`: the eight DVC stages under one namespace, named as in dvc.yaml; their 0.1.0 spellings
(`doceval index`, `doceval judge agreement`, bare `doceval docs` / `doceval conversations`, `eval --corpus`) work as
before with one deprecation line on stderr, and the user commands that share a name print none."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from doceval.app.project import conversations_stage, dvc_pipeline
from doceval.cli.main import build_parser, main
from doceval.cli.stage import STAGES

ROOT = Path(__file__).resolve().parents[1]
# The 0.1.0 spelling of each stage command.
OLD = {name: [name] for name in STAGES} | {"judge": ["judge", "agreement"]}
SITE = {"guide.md": "# Submitting jobs\n\nCall `enqueue(job)` to queue a job.\n"}


def _stage_cmd(cmd: str) -> list[str]:
    """dvc.yaml's cmd as words, without its trailing comment."""
    return cmd.split("#", 1)[0].split()


def _func(words: list[str]) -> object:
    args, _ = build_parser().parse_known_args(words)
    return args.func


@pytest.mark.parametrize("pipeline", ["repository", "init"])
def test_every_dvc_stage_runs_doceval_stage_of_its_own_name(pipeline: str) -> None:
    """`dvc repro NAME` runs `doceval stage NAME`: the repository's dvc.yaml and the one `doceval init` writes,
    each command parsed to the stage's own (not a deprecated alias)."""
    if pipeline == "repository":
        stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    else:
        stages = dvc_pipeline(["docs"], ["${golden_conversations}"])["stages"]
        assert stages["conversations"] == conversations_stage(["${golden_conversations}"])
    assert set(stages) <= set(STAGES)
    for name, stage in stages.items():
        words = _stage_cmd(stage["cmd"])
        assert words[:3] == ["doceval", "stage", name], stage["cmd"]
        assert _func(words[1:]) is STAGES[name][0]


def test_the_stage_namespace_holds_the_eight_stages_in_pipeline_order() -> None:
    assert list(STAGES) == [
        "docs",
        "index",
        "retrieve",
        "calibrate",
        "evaluate",
        "conversations",
        "judge",
        "report",
    ]


@pytest.mark.parametrize("name", list(STAGES))
def test_an_old_stage_spelling_runs_the_same_command_with_one_deprecation_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both spellings on a folder without params.yaml: the same exit code and output; the old one adds exactly
    one stderr line naming the new spelling, the new one prints no deprecation."""
    monkeypatch.chdir(tmp_path)
    new_code = main(["stage", name, "--quiet"])
    new = capsys.readouterr()
    old_code = main([*OLD[name], "--quiet"])
    old = capsys.readouterr()
    assert new_code == old_code == 2  # params.yaml not found, named
    assert "deprecated" not in new.err and new.out == old.out
    notes = [line for line in old.err.splitlines() if "deprecated" in line]
    assert notes == [f"doceval: `doceval {' '.join(OLD[name])}` is deprecated and goes in 0.3.0: "
                     f"use `doceval stage {name}`"]  # fmt: skip
    rest = [line for line in old.err.splitlines() if "deprecated" not in line]
    old_prefix, new_prefix = f"doceval {OLD[name][0]}: error:", f"doceval stage {name}: error:"
    assert rest == [line.replace(new_prefix, old_prefix) for line in new.err.splitlines()]
    assert new.err.startswith(new_prefix) and "params.yaml" in new.err


def test_docs_with_a_folder_is_the_users_command_and_prints_no_deprecation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    for page, text in SITE.items():
        (site / page).write_text(text, encoding="utf-8")
    assert main(["docs", "--quiet", "--folder", "site", "--library", "mylib", "--version", "1.0"]) == 0
    assert (tmp_path / "data" / "folders" / "mylib@1.0" / "corpus.jsonl").is_file()
    assert "deprecated" not in capsys.readouterr().err
    # --only (some configured pins) is the user's too: refused here (no params.yaml), still without the line
    assert main(["docs", "--quiet", "--only", "mylib@1.0"]) == 2
    assert "deprecated" not in capsys.readouterr().err


def test_conversations_with_overrides_is_the_users_command_and_prints_no_deprecation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Overrides or --output compose a configuration (the user's command); `stage conversations` never does:
    a word after it is not an override."""
    monkeypatch.chdir(tmp_path)
    assert main(["conversations", "--params", "other.yaml", "k=3"]) == 2  # refused before any work
    err = capsys.readouterr().err
    assert "--params reads a composed params file" in err and "deprecated" not in err
    assert main(["conversations", "--output", "out", "--params", "other.yaml"]) == 2
    assert "deprecated" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["stage", "conversations", "k=3"])
    assert exc.value.code == 2 and "unrecognized arguments: k=3" in capsys.readouterr().err


def test_eval_golden_is_the_golden_set_and_corpus_its_deprecated_alias(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    new = parser.parse_known_args(["eval", "--golden", "g.jsonl"])[0]
    assert new.golden == "g.jsonl" and "deprecated" not in capsys.readouterr().err
    old = parser.parse_known_args(["eval", "--corpus", "g.jsonl"])[0]
    assert vars(old) == vars(new)
    assert capsys.readouterr().err.splitlines() == [
        "doceval: `doceval eval --corpus` is deprecated and goes in 0.3.0: use `doceval eval --golden`"
    ]


def test_an_error_names_the_stage_command_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["stage", "report", "--params", "missing.yaml"]) == 2
    assert capsys.readouterr().err.startswith("doceval stage report: error: ")


@pytest.mark.slow  # runs sed, as a user would
def test_the_changelogs_sed_migrates_a_0_1_0_dvc_yaml(tmp_path: Path) -> None:
    """The `sed` of CHANGELOG.md's "Migrating from 0.1.0" turns every 0.1.0 stage command into the new one:
    today's dvc.yaml written back in 0.1.0's spellings comes back byte for byte."""
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    old = text
    for name, words in OLD.items():
        old = old.replace(f"cmd: doceval stage {name}", f"cmd: doceval {' '.join(words)}")
    assert old != text and "doceval stage" not in old
    (tmp_path / "dvc.yaml").write_text(old, encoding="utf-8")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    migrating = changelog[changelog.index("### Migrating from 0.1.0") :]
    script = migrating[migrating.index("```bash\n") + 8 : migrating.index("```\n")]
    subprocess.run(["bash", "-c", textwrap.dedent(script)], cwd=tmp_path, check=True)
    assert (tmp_path / "dvc.yaml").read_text(encoding="utf-8") == text
