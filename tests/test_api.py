"""The Python API is the CLI's code: composing, gating and comparing give what the commands print."""

from __future__ import annotations

from pathlib import Path

import pytest

from doceval import api
from doceval.harness.evaluate import evaluate as harness_evaluate
from doceval.results import gate as results_gate

ROOT = Path(__file__).resolve().parents[1]


def test_api_names_are_the_library_functions() -> None:
    assert api.evaluate is harness_evaluate and api.gate is results_gate


def test_compose_through_the_api_matches_params_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert api.compose() == api.load_params(ROOT / "params.yaml")
    assert api.compose(["k=10"])["k"] == 10
