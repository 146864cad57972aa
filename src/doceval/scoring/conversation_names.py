"""A summary's conversation figures (``metrics.conversations``, doceval.scoring.conversations) read by their flat
names; the naming itself (``conversations.<metric>``, ``conversations.turn1.<metric>``, ...) is declared, numpy-
free, in :mod:`doceval.common.metric_names`, so the configuration can check a gate's thresholds without the
scorers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from doceval.common.metric_names import (
    MEMORY_FIGURES,
    MEMORY_GROUPS,
    METRIC_NAMES,
    POSITION_GROUPS,
    PREFIX,
    conversation_metric_names,
    is_conversation_metric,
    lower_is_better,
    naming_help,
)

__all__ = [
    "MEMORY_FIGURES",
    "PREFIX",
    "ConversationFigure",
    "conversation_figures",
    "conversation_metric_names",
    "figure_value",
    "is_conversation_metric",
    "lower_is_better",
    "naming_help",
]


class ConversationFigure(NamedTuple):
    value: float | None  # None: not measured
    ci95: tuple[float, float] | None
    n: int | None  # turns (or conversations, for all_turns_correct) it was measured on
    ci_note: str | None = None  # why a figure has no interval: "too few differing conversations (n=1)"


def _ci(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and None not in value:
        return float(value[0]), float(value[1])
    return None


def _num(value: Any) -> float | None:
    return None if value is None or isinstance(value, bool) else float(value)


def _turn_group(block: Mapping[str, Any], prefix: str) -> dict[str, ConversationFigure]:
    counts = block.get("counts") or {}
    ci95 = block.get("ci95") or {}
    return {
        f"{prefix}.{m}": ConversationFigure(_num(block.get(m)), _ci(ci95.get(m)), counts.get(f"n_{m}"))
        for m in METRIC_NAMES
    }


def _memory_group(block: Mapping[str, Any], figure: str, key: str) -> dict[str, ConversationFigure]:
    out = {}
    for m, row in block.items():
        if isinstance(row, Mapping):
            value = row.get(key, row.get("value"))
            n = row.get("n_turns", row.get("n"))
            note = row.get("ci_note")
            out[f"{PREFIX}.{figure}.{m}"] = ConversationFigure(
                _num(value), _ci(row.get("ci95")), n, note if isinstance(note, str) else None
            )
    return out


def conversation_figures(metrics: Mapping[str, Any]) -> dict[str, ConversationFigure]:
    """Every flat figure of a summary's ``metrics`` (empty when it has no conversations block)."""
    block = metrics.get(PREFIX)
    if not isinstance(block, Mapping):
        return {}
    out = _turn_group(block.get("turns") or {}, PREFIX)
    for groups, parts in (("by_position", POSITION_GROUPS), ("by_needs_memory", MEMORY_GROUPS)):
        for key, group in (block.get(groups) or {}).items():
            if key in parts and isinstance(group, Mapping):
                out.update(_turn_group(group, f"{PREFIX}.{parts[key]}"))
    per = block.get("per_conversation") or {}
    out[f"{PREFIX}.all_turns_correct"] = ConversationFigure(
        _num(per.get("all_turns_correct")), _ci(per.get("ci95")), per.get("n_measured")
    )
    for figure, key in MEMORY_FIGURES.items():
        if isinstance(block.get(figure), Mapping):
            out.update(_memory_group(block[figure], figure, key))
    return out


def figure_value(metrics: Mapping[str, Any], name: str) -> float | None:
    """A metric's value in a summary's ``metrics`` by any valid name (None: not measured)."""
    if not is_conversation_metric(name):
        value = metrics.get(name)
        return None if value is None else float(value)
    figure = conversation_figures(metrics).get(name)
    return None if figure is None else figure.value
