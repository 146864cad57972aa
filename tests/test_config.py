"""Hydra configuration: params.yaml matches conf/, every group option and experiment composes, bad overrides
are usage errors that list the options."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from doceval.cli.main import main
from doceval.config.compose import compose, flatten
from doceval.config.objects import config_dict
from doceval.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir())


def test_params_yaml_is_composed_from_conf() -> None:
    committed = yaml.safe_load((ROOT / "params.yaml").read_text())
    composed = config_dict(compose([], conf_dir=CONF))
    # The engine is an execution choice ($DOCEVAL_ENGINE), never written into params.yaml (design 6.3).
    assert "engine" not in committed and composed.pop("engine") == {"name": "local"}
    assert committed == composed, "params.yaml drifted from conf/: run `doceval params`"


@pytest.mark.parametrize(
    "group,option",
    [(g, p.stem) for g in GROUPS if g != "experiment" for p in sorted((CONF / g).glob("*.yaml"))],
)
def test_every_group_option_composes_to_the_chosen_option(group: str, option: str) -> None:
    """The block composed for `group=option` is that option's file (not the default's), key for key."""
    cfg = config_dict(compose([f"{group}={option}"], conf_dir=CONF))
    chosen = yaml.safe_load((CONF / group / f"{option}.yaml").read_text()) or {}
    chosen.pop("defaults", None)
    assert chosen, f"conf/{group}/{option}.yaml is empty"
    assert {key: cfg[group].get(key) for key in chosen} == chosen


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_composes_and_only_changes_what_it_says(experiment: str) -> None:
    base = flatten(compose([], conf_dir=CONF))
    cfg = flatten(compose([f"experiment={experiment}"], conf_dir=CONF))
    changed = {k for k in set(base) | set(cfg) if base.get(k) != cfg.get(k)}
    assert changed, f"experiment {experiment} changes nothing"
    text = (CONF / "experiment" / f"{experiment}.yaml").read_text()
    for key in changed:
        top = key.split(".")[0]
        assert top in text, f"{experiment} changed {key} without naming {top}"


def test_unknown_group_option_lists_the_choices() -> None:
    with pytest.raises(UsageError) as err:
        compose(["retriever=nope"], conf_dir=CONF)
    message = str(err.value)
    assert "retriever/nope" in message and "bm25" in message and "hybrid" in message


def test_cli_reports_unknown_option_with_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["eval", "--no-track", "retriever=nope"]) == 2
    assert "Available options in 'retriever'" in capsys.readouterr().err


def test_params_check_detects_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").symlink_to(CONF)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({**config_dict(compose([], conf_dir=CONF)), "k": 99})
    )
    assert main(["params", "--check"]) == 2
    assert main(["params"]) == 0
    assert main(["params", "--check"]) == 0


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("append", "conf/config.yaml:{line}: not valid YAML (expected ',' or ']'"),
        ("not utf-8", "conf/config.yaml: cannot read the Hydra config (not UTF-8 text"),
        ("a directory", "conf/config.yaml: is not a file (a directory or a dangling link)"),
    ],
)
def test_an_invalid_conf_config_yaml_is_exit_2_naming_it(
    damage: str,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 39 H12: a YAML error in ./conf/config.yaml was a traceback (exit 1); one that is a directory was
    silently passed over for the shipped conf/."""
    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    config = tmp_path / "conf" / "config.yaml"
    lines = len(config.read_text(encoding="utf-8").splitlines())
    if damage == "append":
        config.write_text(config.read_text(encoding="utf-8") + "k: [1\n", encoding="utf-8")
    elif damage == "not utf-8":
        config.write_bytes(config.read_bytes() + b"note: \xff\xfe\n")
    else:
        config.unlink()
        config.mkdir()
    monkeypatch.chdir(tmp_path)
    for argv in (["params"], ["eval", "--no-track", "k=3"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert expected.format(line=lines + 2) in err and "Traceback" not in err
