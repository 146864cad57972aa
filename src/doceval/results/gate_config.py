"""A gate config made into the typed :class:`doceval.config.schema.Gate` the gate applies (doceval.results.gating):
the composed ``gate`` block as it is, or a gate written by hand (a YAML file, the API's ``config=``) filled in
with what a key it leaves out means (:data:`LEFT_OUT`) and validated by the schema, the one validator of every
block (doceval.config.validate): known keys, types, ranges, metric names. Then every gate passes the same rules
of meaning (a gate that always passes, a rule enabled on no metric)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from doceval.config import schema
from doceval.config.validate import validate_block
from doceval.errors import UsageError

__all__ = ["LEFT_OUT", "check_gate_config", "load_gate_config"]

# What a key left out of a gate written by hand means (docs/design.md 8.3): no thresholds, no system error
# allowed, non_regression off (point mode: what gates did before the key existed; alpha 0.05, tolerance 0),
# drift off, no metric swapped for an assistant. A composed gate leaves nothing out: conf/gate/ writes every key.
LEFT_OUT: Mapping[str, Any] = {
    "thresholds": {},
    "max_system_errors": 0,
    "non_regression": {"enabled": False, "tolerance": 0.0, "metrics": [], "mode": "point", "alpha": 0.05},
    "drift": {"enabled": False, "metrics": [], "tolerance": 0.02, "window": 10, "reference": "best"},
    "for_assistants": {},
}


def load_gate_config(path: str | Path) -> schema.Gate:
    """A gate config YAML (``conf/gate/*.yaml``, or a params.yaml with a ``gate`` block), as
    :func:`check_gate_config` reads a gate written by hand."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: gate config not found; pass an existing conf/gate/*.yaml")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{p}: not valid YAML ({exc}); fix the file or pass another gate config") from exc
    if isinstance(data, dict) and "thresholds" not in data and isinstance(data.get("gate"), dict):
        data = data["gate"]
    return check_gate_config(data, str(p))


def check_gate_config(data: schema.Gate | Any, where: str = "gate config") -> schema.Gate:
    """The typed gate: the composed block (validated when composed), or a mapping written by hand, whose keys
    left out take :data:`LEFT_OUT` and which the schema then checks as it checks the composed block (a typo,
    an unknown metric, a threshold outside [0, 1] is a UsageError naming ``where`` and the key). Either way, a
    gate that always passes, or a rule enabled on no metric, is a UsageError."""
    if isinstance(data, schema.Gate):
        rules = data
    elif isinstance(data, Mapping):
        rules = validate_block(schema.Gate, _filled(LEFT_OUT, data), where, path="")
    else:
        raise UsageError(f"{where}: expected a mapping with 'thresholds' and 'non_regression'")
    _check_meaning(rules, where)
    return rules


def _filled(left_out: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` with the keys it leaves out taken from ``left_out``, block by block; a null block or list is
    left out too (as a hand-written ``metrics:`` with nothing after it)."""
    out = dict(left_out)
    for key, value in given.items():
        default = left_out.get(key)
        if isinstance(default, Mapping) and isinstance(value, Mapping):
            out[key] = _filled(default, value)
        elif value is None and isinstance(default, Mapping | list):
            continue
        else:
            out[key] = value
    return out


def _check_meaning(rules: schema.Gate, where: str) -> None:
    if rules.non_regression.enabled and not rules.non_regression.metrics:
        raise UsageError(
            f"{where}: non_regression is enabled but lists no metrics; list them (e.g. "
            "non_regression.metrics: [hit_rate, mrr]) or set non_regression.enabled: false"
        )
    if rules.drift.enabled and not rules.drift.metrics:
        raise UsageError(
            f"{where}: drift is enabled but lists no metrics; list them (e.g. drift.metrics: "
            "[hit_rate]) or set drift.enabled: false"
        )
    if not rules.thresholds and not rules.non_regression.enabled:
        raise UsageError(
            f"{where}: no thresholds and non_regression disabled: such a gate always passes; add "
            "thresholds (e.g. thresholds: {hit_rate: 0.6})"
        )
