"""One composed configuration for every command (issue 40, C1; docs/design.md 8.3): `doceval gate`, `doceval
compare`, `doceval history` and the report apply the gate composed from conf/ -> doceval.yaml -> the command's
own gate overrides, and say where its rules came from; an explicit gate file is checked by the same schema and
range rules as the composed block."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_report import base_summary, new_summary

from doceval import api
from doceval.cli import main as cli_main
from doceval.config.compose import compose
from doceval.stages import report

# NEW: hit_rate 0.75, refused_correctly 0.5 (tests/test_report.py).
PROJECT = "overrides:\n  - gate.thresholds.hit_rate=0.95\n  - gate.thresholds.refused_correctly=0.5\n"
COMPOSED = "CI gate (hit_rate >= 0.95 and refused_correctly >= 0.50): FAIL"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project folder: no conf/ (the packaged one applies), a doceval.yaml raising hit_rate's bar."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DOCEVAL_CONF", raising=False)
    (tmp_path / "doceval.yaml").write_text(PROJECT, encoding="utf-8")
    for name, summary in (("base.json", base_summary()), ("new.json", new_summary())):
        (tmp_path / name).write_text(json.dumps(summary), encoding="utf-8")
    return tmp_path


def test_gate_applies_doceval_yaml_and_says_so(project: Path, capsys: Any) -> None:
    """On main `doceval gate` read conf/gate/default.yaml (hit_rate >= 0.60) whatever doceval.yaml said, while
    the report applied doceval.yaml's 0.95."""
    junit = project / "junit.xml"
    assert cli_main(["gate", "new.json", "--junit", str(junit)]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0] == COMPOSED
    source = ("the packaged conf/gate/default.yaml + doceval.yaml (gate.thresholds.hit_rate=0.95 "
              "gate.thresholds.refused_correctly=0.5)")  # fmt: skip
    assert out[1] == f"  rules from: {source}"
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["gate_source"] == source


def test_a_command_override_comes_last(project: Path, capsys: Any) -> None:
    assert cli_main(["gate", "new.json", "gate.thresholds.hit_rate=0.7"]) == 0
    out = capsys.readouterr().out
    assert "CI gate (hit_rate >= 0.70 and refused_correctly >= 0.50): PASS" in out
    assert "+ doceval gate (gate.thresholds.hit_rate=0.7)" in out
    assert cli_main(["gate", "new.json", "k=3"]) == 2
    assert "only gate overrides apply here" in capsys.readouterr().err
    assert cli_main(["gate", "new.json", "--config", "g.yaml", "gate.thresholds.hit_rate=0.7"]) == 2


def test_compare_applies_the_same_gate(project: Path, capsys: Any) -> None:
    assert cli_main(["compare", "base.json", "new.json"]) == 3
    out = capsys.readouterr().out
    assert COMPOSED in out and "rules from: the packaged conf/gate/default.yaml + doceval.yaml" in out


def test_the_report_prints_the_same_rule_and_its_source(project: Path) -> None:
    cfg = compose([])
    (project / "eval").mkdir()
    (project / "eval" / "summary.json").write_text(json.dumps(new_summary()), encoding="utf-8")
    path, verdict = report.run(cfg, gate_source="params.yaml, composed from X")
    assert verdict.line == COMPOSED
    assert "Rules from `params.yaml, composed from X`." in path.read_text(encoding="utf-8")


def test_the_api_gate_composes_too(project: Path) -> None:
    assert api.gate(new_summary()).line == COMPOSED


def test_an_explicit_gate_file_takes_the_composed_blocks_rules(project: Path, capsys: Any) -> None:
    """On main a --config file skipped the range check the composed block has (a threshold of 1.5 never
    passes)."""
    (project / "wide.yaml").write_text("thresholds: {hit_rate: 1.5}\n", encoding="utf-8")
    assert cli_main(["gate", "new.json", "--config", "wide.yaml"]) == 2
    err = capsys.readouterr().err
    assert "wide.yaml: thresholds.hit_rate=1.5" in err and "<= 1" in err  # as the file spells the key
    (project / "ok.yaml").write_text("thresholds: {hit_rate: 0.5, conversations.turn2.hit_rate: 0.5}\n")
    assert cli_main(["gate", "new.json", "--config", "ok.yaml"]) == 3  # the conversation figure: not measured
    assert "rules from: ok.yaml" in capsys.readouterr().out
