"""A gate config checked: the composed ``gate`` block, a gate YAML file, or a mapping written by hand (the API's
``config=``), into the typed :class:`doceval.config.schema.Gate` the gate applies (doceval.results.gating)."""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from doceval.config import schema
from doceval.config.compose import check_config
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.scoring.conversation_names import conversation_metric_names, naming_help
from doceval.scoring.registry import METRIC_NAMES

__all__ = ["MODES", "check_gate_config", "load_gate_config"]

MODES = ("significant", "point")  # non_regression.mode


def load_gate_config(path: str | Path) -> schema.Gate:
    """A gate config YAML (``conf/gate/*.yaml``, or a params.yaml with a ``gate`` block), checked by the schema
    and range rules of the composed ``gate`` block (thresholds in [0, 1], known keys and types; keys left out
    take :func:`check_gate_config`'s defaults), then as every gate is."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: gate config not found; pass an existing conf/gate/*.yaml")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{p}: not valid YAML ({exc}); fix the file or pass another gate config") from exc
    if isinstance(data, dict) and "thresholds" not in data and isinstance(data.get("gate"), dict):
        data = data["gate"]
    rules = check_gate_config(data, str(p))  # names first: its messages list the metrics and the patterns
    check_config({"gate": data}, str(p), complete=False)
    return rules


def check_gate_config(data: schema.Gate | Any, where: str = "gate config") -> schema.Gate:
    """A gate config checked, as the typed block: the composed ``gate`` block, or a gate mapping written by hand
    (a YAML file, the API's ``config=``), where a key left out means: no thresholds, non_regression off (point
    mode, alpha 0.05, tolerance 0), drift off, max_system_errors 0. Unknown keys or metric names are errors (a
    typo must not pass silently), and so is a gate that always passes."""
    if isinstance(data, schema.Gate):
        data = config_dict(data)  # the composed block passes the same checks as a hand-written one
    valid = f"valid metrics: {', '.join(METRIC_NAMES)}"
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: expected a mapping with 'thresholds' and 'non_regression'")
    unknown_keys = sorted(set(data) - {"thresholds", "non_regression", "drift", "max_system_errors",
                                       "for_assistants"})  # fmt: skip
    if unknown_keys:
        raise UsageError(
            f"{where}: unknown key(s) {', '.join(unknown_keys)}; expected thresholds, non_regression, drift, "
            "max_system_errors, for_assistants"
        )
    thresholds = data.get("thresholds") or {}
    if not isinstance(thresholds, Mapping):
        raise UsageError(f"{where}: thresholds must map metric names to numbers, e.g. hit_rate: 0.60")
    for m, t in thresholds.items():
        if m not in METRIC_NAMES and m not in conversation_metric_names():
            raise UsageError(f"{where}: thresholds.{m}: unknown metric; {valid}; {naming_help()}")
        if isinstance(t, bool) or not isinstance(t, int | float) or math.isnan(t):
            raise UsageError(f"{where}: thresholds.{m}: {t!r} is not a number")
    nr = data.get("non_regression") or {}
    if not isinstance(nr, Mapping):
        raise UsageError(f"{where}: non_regression must be a mapping (enabled, tolerance, metrics)")
    unknown_keys = sorted(set(nr) - {"enabled", "tolerance", "metrics", "mode", "alpha"})
    if unknown_keys:
        raise UsageError(
            f"{where}: non_regression: unknown key(s) {', '.join(unknown_keys)}; "
            "expected enabled, tolerance, metrics, mode, alpha"
        )
    mode = nr.get("mode", "point")
    if mode not in MODES:
        raise UsageError(
            f"{where}: non_regression.mode: {mode!r} is not one of {', '.join(MODES)} (significant: fail only "
            "on a drop beyond the tolerance that a paired test tells from noise; point: on any such drop)"
        )
    alpha = nr.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha <= 0.5:
        raise UsageError(f"{where}: non_regression.alpha: {alpha!r} must be a number in (0, 0.5], e.g. 0.05")
    enabled = nr.get("enabled", False)
    if not isinstance(enabled, bool):
        raise UsageError(f"{where}: non_regression.enabled: {enabled!r} is not true/false")
    tol = nr.get("tolerance", 0.0)
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
        raise UsageError(f"{where}: non_regression.tolerance: {tol!r} must be a number >= 0")
    nr_metrics = nr.get("metrics") or []
    if not isinstance(nr_metrics, list):
        raise UsageError(f"{where}: non_regression.metrics must be a list of metric names")
    for m in nr_metrics:
        if m not in METRIC_NAMES:
            raise UsageError(f"{where}: non_regression.metrics: {m!r} is an unknown metric; {valid}")
    if enabled and not nr_metrics:
        raise UsageError(f"{where}: non_regression is enabled but lists no metrics")
    if not thresholds and not enabled:
        raise UsageError(
            f"{where}: no thresholds and non_regression disabled: such a gate always passes; add thresholds"
        )
    return schema.Gate(
        thresholds=types.MappingProxyType({str(m): float(t) for m, t in thresholds.items()}),
        max_system_errors=_check_max_system_errors(data.get("max_system_errors", 0), where),
        non_regression=schema.NonRegression(
            enabled=enabled,
            tolerance=float(tol),
            metrics=tuple(str(m) for m in nr_metrics),
            mode=str(mode),
            alpha=float(alpha),
        ),
        drift=_check_drift(data.get("drift"), where, valid),
        for_assistants=_check_for_assistants(data.get("for_assistants"), where, valid),
    )


def _check_for_assistants(value: Any, where: str, valid: str) -> Mapping[str, str]:
    """``for_assistants``: metric -> the metric a rule on it asks instead for a user's assistant (left out: none)."""
    value = value or {}
    if not isinstance(value, Mapping) or not all(
        m in METRIC_NAMES and isinstance(to, str) and to in METRIC_NAMES for m, to in value.items()
    ):
        raise UsageError(f"{where}: for_assistants: {value!r} must map a metric to the metric asked instead for a "
                         f"user's assistant (e.g. refused_correctly: refusal_rate); {valid}")  # fmt: skip
    return types.MappingProxyType({str(m): str(to) for m, to in value.items()})


def _check_max_system_errors(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(
            f"{where}: max_system_errors: {value!r} must be an integer >= 0 (the entries whose system call "
            "may fail before the gate fails the run; 0: none)"
        )
    return value


def _check_drift(drift: Any, where: str, valid: str) -> schema.Drift:
    """The drift rule (off by default): a metric that fell by more than ``tolerance`` from the best of the last
    ``window`` tracked runs of the same family (or from the pinned ``reference`` run id) fails the gate."""
    drift = drift or {}
    if not isinstance(drift, Mapping):
        raise UsageError(f"{where}: drift must be a mapping (enabled, metrics, tolerance, window, reference)")
    unknown = sorted(set(drift) - {"enabled", "metrics", "tolerance", "window", "reference"})
    if unknown:
        raise UsageError(f"{where}: drift: unknown key(s) {', '.join(unknown)}; expected enabled, metrics, "
                         "tolerance, window, reference")  # fmt: skip
    enabled = drift.get("enabled", False)
    if not isinstance(enabled, bool):
        raise UsageError(f"{where}: drift.enabled: {enabled!r} is not true/false")
    metrics = drift.get("metrics") or []
    if not isinstance(metrics, list) or any(m not in METRIC_NAMES for m in metrics):
        raise UsageError(f"{where}: drift.metrics: {metrics!r} must list metric names; {valid}")
    tol = drift.get("tolerance", 0.02)
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
        raise UsageError(f"{where}: drift.tolerance: {tol!r} must be a number >= 0")
    window = drift.get("window", 10)
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise UsageError(f"{where}: drift.window: {window!r} must be an integer >= 2 (runs looked back over)")
    reference = drift.get("reference", "best")
    if not isinstance(reference, str) or not reference:
        raise UsageError(f"{where}: drift.reference: {reference!r}: 'best' or a pinned MLflow run id")
    if enabled and not metrics:
        raise UsageError(f"{where}: drift is enabled but lists no metrics")
    return schema.Drift(enabled=enabled, metrics=tuple(str(m) for m in metrics), tolerance=float(tol),
                        window=window, reference=reference)  # fmt: skip
