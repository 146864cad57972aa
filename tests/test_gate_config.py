"""doceval.results.gate_config: a gate written by hand (a file, the API's ``config=``) keeps its documented meaning
(design 8.3: a key left out is no thresholds, non_regression off in point mode, drift off, ...) and is checked by
the schema exactly as the composed ``gate`` block is, ranges included; the composed block is not checked again."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any

import pytest

from doceval import api
from doceval.config.compose import compose
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.results.gate_config import check_gate_config, load_gate_config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_gate_file_without_mode_is_point_and_leaves_the_rest_off(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "thresholds: {hit_rate: 0.6}\nnon_regression: {enabled: true, metrics: [hit_rate]}\n"
    )
    rules = load_gate_config(path)
    assert config_dict(rules) == {
        "thresholds": {"hit_rate": 0.6},
        "max_system_errors": 0,
        "non_regression": {"enabled": True, "tolerance": 0.0, "metrics": ["hit_rate"], "mode": "point",
                           "alpha": 0.05},
        "drift": {"enabled": False, "metrics": [], "tolerance": 0.02, "window": 10, "reference": "best"},
        "for_assistants": {},
    }  # fmt: skip
    # The shipped gate says significant: a file that does not is not read as the shipped one.
    assert compose([]).gate.non_regression.mode == "significant"
    # A null block or list is left out, as a `metrics:` with nothing after it.
    rules = load_gate_config(_write(tmp_path, "thresholds: {hit_rate: 0.6}\ndrift:\nnon_regression:\n"))
    assert config_dict(rules)["drift"] == {"enabled": False, "metrics": [], "tolerance": 0.02, "window": 10,
                                           "reference": "best"}  # fmt: skip


@pytest.mark.parametrize(
    ("gate", "needle"),
    [
        ({"thresholds": {"hit_rate": 1.5}}, "thresholds.hit_rate=1.5: expected a number >= 0 and <= 1"),
        ({"thresholds": {"hit_rate": 0.5}, "drift": {"window": 1}}, "drift.window=1: expected an integer >= 2"),
        ({"thresholds": {"hit_rate": 0.5}, "max_system_errors": -1}, "max_system_errors=-1: expected an integer"),
        ({"thresholds": {"hit_rate": 0.5}, "for_assistants": {"refused_correctly": "refusal"}},
         "for_assistants.refused_correctly=refusal: expected one of hit_rate"),
        ({"thresholds": {"hit_rate": 0.5}, "non_regression": {"tolerance": -0.1}},
         "non_regression.tolerance=-0.1: expected a number >= 0"),
    ],
)  # fmt: skip
def test_a_hand_written_gate_gets_the_composed_blocks_range_checks(gate: dict[str, Any], needle: str) -> None:
    with pytest.raises(UsageError, match="my gate: ") as err:
        check_gate_config(gate, "my gate")
    assert needle in str(err.value)
    summary = {"metrics": {"hit_rate": 0.7, "counts": {"n": 10}}, "entries": [], "config": {}}
    with pytest.raises(UsageError) as err:
        api.gate(summary, config=gate)
    assert needle in str(err.value)


def test_a_hand_written_gate_and_the_composed_block_get_the_same_message(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as composed:
        compose(["+gate.thresholds.hit_rte=0.5"])
    with pytest.raises(UsageError) as written:
        load_gate_config(_write(tmp_path, "thresholds: {hit_rte: 0.5}\n"))
    tail = "thresholds.hit_rte: unknown metric; valid metrics: hit_rate, recall"
    assert f"gate.{tail}" in str(composed.value) and f"{tail}" in str(written.value)
    assert str(composed.value).split(": ", 1)[1] == str(written.value).split(": ", 2)[2]


def test_the_composed_gate_is_taken_as_it_is_and_meaning_rules_hold_for_both() -> None:
    rules = compose([]).gate
    assert check_gate_config(rules) is rules  # validated when composed: never turned back into a dict
    with pytest.raises(UsageError, match="always passes"):
        check_gate_config(dataclasses.replace(rules, thresholds=types.MappingProxyType({})))
    with pytest.raises(UsageError, match="non_regression is enabled but lists no metrics"):
        check_gate_config({"non_regression": {"enabled": True}})
    with pytest.raises(UsageError, match="drift is enabled but lists no metrics"):
        check_gate_config({"thresholds": {"hit_rate": 0.5}, "drift": {"enabled": True}})
