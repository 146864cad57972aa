"""The names of a summary's conversation figures (``metrics.conversations``, doceval.scoring.conversations)
as flat metrics: one naming for the MLflow run metrics, the gate's thresholds and ``doceval history``.

- ``conversations.<metric>``: every metric over all turns;
- ``conversations.turn1.<metric>``, ``conversations.turn2.<metric>``, ``conversations.turn3_plus.<metric>``:
  by turn position (1, 2, 3+);
- ``conversations.needs_memory.<metric>``, ``conversations.no_memory_needed.<metric>``: by ``needs_memory``;
- ``conversations.all_turns_correct``: the share of conversations with every turn correct;
- ``conversations.memory_benefit.<metric>``, ``conversations.standalone_ceiling.<metric>``,
  ``conversations.memory_recovery.<metric>``, ``conversations.memory_leak.<metric>``: the memory figures
  (recovery: benefit / ceiling; positive leak: memory from other conversations made the turn worse, so lower is
  better).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from doceval.scoring.registry import LOWER_IS_BETTER, METRIC_NAMES, names

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

PREFIX = "conversations"
POSITION_GROUPS = {"1": "turn1", "2": "turn2", "3+": "turn3_plus"}  # by_position keys -> name part
MEMORY_GROUPS = {"true": "needs_memory", "false": "no_memory_needed"}  # by_needs_memory keys -> name part
# memory figure rows: the value is under "benefit" / "ceiling" / "recovery" / "leak" (scoring.conversations), or
# "value" in a block written as {metric: {"value", "ci95", "n"}}.
MEMORY_FIGURES = {
    "memory_benefit": "benefit",
    "standalone_ceiling": "ceiling",
    "memory_recovery": "recovery",
    "memory_leak": "leak",
}


class ConversationFigure(NamedTuple):
    value: float | None  # None: not measured
    ci95: tuple[float, float] | None
    n: int | None  # turns (or conversations, for all_turns_correct) it was measured on
    ci_note: str | None = None  # why a figure has no interval: "too few differing conversations (n=1)"


def conversation_metric_names() -> tuple[str, ...]:
    """Every valid flat name, in display order (whatever a summary holds)."""
    out = [f"{PREFIX}.{m}" for m in METRIC_NAMES]
    for part in (*POSITION_GROUPS.values(), *MEMORY_GROUPS.values()):
        out += [f"{PREFIX}.{part}.{m}" for m in METRIC_NAMES]
    out.append(f"{PREFIX}.all_turns_correct")
    for figure in MEMORY_FIGURES:
        out += [f"{PREFIX}.{figure}.{m}" for m in names("memory")]
    return tuple(out)


def is_conversation_metric(name: str) -> bool:
    return name.startswith(PREFIX + ".")


def lower_is_better(name: str) -> bool:
    """A flat name's direction: its base metric's, and a memory leak is lower-is-better."""
    if name.startswith(f"{PREFIX}.memory_leak."):
        return True
    return name.rsplit(".", 1)[-1] in LOWER_IS_BETTER


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


def naming_help() -> str:
    """The conversation names as patterns, for an error that lists what is valid."""
    positions = "|".join(POSITION_GROUPS.values())
    memory = "|".join(MEMORY_GROUPS.values())
    figures = "|".join(MEMORY_FIGURES)
    return (
        f"on conversations: {PREFIX}.METRIC, {PREFIX}.{{{positions}}}.METRIC, {PREFIX}.{{{memory}}}.METRIC, "
        f"{PREFIX}.all_turns_correct, {PREFIX}.{{{figures}}}.{{{'|'.join(names('memory'))}}}"
    )


def figure_value(metrics: Mapping[str, Any], name: str) -> float | None:
    """A metric's value in a summary's ``metrics`` by any valid name (None: not measured)."""
    if not is_conversation_metric(name):
        value = metrics.get(name)
        return None if value is None else float(value)
    figure = conversation_figures(metrics).get(name)
    return None if figure is None else figure.value
