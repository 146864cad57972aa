"""report.md's Conversations section (from the summary's ``metrics.conversations``, docs/design.md 4.6): every
metric over the turns and by turn position and needs_memory with intervals that resample whole conversations,
all turns correct with the first failing turn, and the memory benefit and leak when the run measured them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from doceval.common.text import md_text
from doceval.results.comparison import _num, _signed
from doceval.scoring.intervals import MIN_N_BREAKDOWN
from doceval.scoring.registry import LOWER_IS_BETTER, METRIC_NAMES

_GROUPS = (
    ("by_position", "1", "turn 1"),
    ("by_position", "2", "turn 2"),
    ("by_position", "3+", "turn 3+"),
    ("by_needs_memory", "false", "needs memory: no"),
    ("by_needs_memory", "true", "needs memory: yes"),
)
_MEMORY = (
    (
        "memory_benefit",
        "Memory benefit",
        ("with_memory", "memory_reset", "benefit"),
        "on turns that need memory: the metric with the conversation's memory minus the metric with memory reset "
        "before the turn (two replays, paired by turn)",
    ),
    (
        "standalone_ceiling",
        "Standalone ceiling",
        ("standalone", "memory_reset", "ceiling"),
        "on turns that need memory: the metric when the turn is asked as its standalone rewrite (the question a "
        "user would ask with no history, at its own pin) minus the metric with memory reset: what a perfect memory "
        "could recover",
    ),
    (
        "memory_recovery",
        "Memory recovery",
        ("benefit", "ceiling", "recovery"),
        "memory benefit / standalone ceiling over the turns all three replays scored: 1, memory does as well as a "
        "self-contained question; 0, no better than the bare follow-up. Interval: the ratios not rejected by the "
        "paired conversation-resampling interval of benefit - ratio x ceiling (Fieller's construction)",
    ),
    (
        "memory_leak",
        "Memory leak",
        ("isolated", "warm_memory", "leak"),
        "on turns that need no memory: the metric isolated minus the metric under `--warm-memory` (memory from "
        "other conversations, golden-set order); positive: memory from elsewhere made turns worse",
    ),
)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    rule = ["---"] + ["---:"] * (len(header) - 1)
    return ["| " + " | ".join(r) + " |" for r in (header, rule, *rows)]


def _ci(ci: Any, signed: bool = False) -> str:
    if not (isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci):
        return ""
    shown = _signed if signed else _num
    return f" [{shown(float(ci[0]))}, {shown(float(ci[1]))}]"


def _cell(block: Mapping[str, Any] | None, metric: str) -> str:
    """``0.7500 [0.588, 0.866]``; ``1.0000 (n<10)`` in a group too small for an interval; ``-``: no such
    group; ``n/a``: nothing in the group to measure it on."""
    if not isinstance(block, Mapping):
        return "-"
    value = block.get(metric)
    if value is None:
        return "n/a"
    if metric in (block.get("too_few") or []):
        return f"{_num(value)} (n<{MIN_N_BREAKDOWN})"
    return _num(value) + _ci((block.get("ci95") or {}).get(metric))


def _turn_table(block: Mapping[str, Any], metrics: Sequence[str]) -> list[str]:
    turns = block.get("turns") or {}
    groups = [(block.get(key) or {}).get(group) for key, group, _ in _GROUPS]
    shown = [m for m in metrics if turns.get(m) is not None]
    rows = []
    for m in shown:
        name = m + ("*" if m in LOWER_IS_BETTER else "")
        rows.append([name, _cell(turns, m), *(_cell(g, m) for g in groups)])
    out = _table(["metric", "all turns", *(label for _, _, label in _GROUPS)], rows)
    out += [
        "",
        "Each cell: the mean over turns and its 95% interval, resampling whole conversations (turns of one "
        f"conversation are not independent); (n<{MIN_N_BREAKDOWN}): too few turns for an interval; "
        "* lower is better.",
    ]
    hidden = [m for m in metrics if m not in shown]
    if hidden:
        out += ["", f"Not measured on any turn: {', '.join(hidden)}."]
    return out


def _per_conversation(per: Mapping[str, Any]) -> list[str]:
    value = per.get("all_turns_correct")
    shown = "not measured" if value is None else _num(value) + _ci(per.get("ci95"))
    out = [
        f"All turns correct: {shown} over {md_text(per.get('n_measured'))} conversations"
        + (f" ({md_text(per['n_not_measured'])} not measured)" if per.get("n_not_measured") else "")
        + " (a conversation counts when every turn is answered or refused correctly)."
    ]
    firsts = per.get("first_failing_turn") or {}
    if firsts:
        rows = [
            [("none (all correct)" if k == "none" else f"turn {md_text(k)}"), md_text(n)]
            for k, n in firsts.items()
        ]
        out += ["", *_table(["first failing turn", "conversations"], rows)]
    return out


def _memory_table(block: Mapping[str, Any], labels: tuple[str, str, str]) -> list[str]:
    first, second, change = labels
    rows = []
    reasons: dict[str, list[str]] = {}  # why a figure has no value, or no interval -> the metrics
    for m, row in block.items():
        if not isinstance(row, Mapping):
            continue
        value = row.get(change, row.get("value"))
        n_turns = row.get("n_turns", row.get("n"))
        if value is None:
            rows.append([md_text(m), "not measured", "-", "-", "-", md_text(n_turns or 0)])
            if row.get("not_measured"):
                reasons.setdefault(f"not measured: {row['not_measured']}", []).append(m)
            continue
        if row.get("interval_note"):
            reasons.setdefault(f"no interval: {row['interval_note']}", []).append(m)
        note = f" ({md_text(row['ci_note'])})" if row.get("ci_note") and not row.get("ci95") else ""
        rows.append(
            [
                md_text(m),
                _num(row.get(first)),
                _num(row.get(second)),
                _signed(value) + _ci(row.get("ci95"), signed=True) + note,
                md_text(row.get("ci_method") or "-"),
                md_text(n_turns),
            ]
        )
    header = [
        "metric",
        first.replace("_", " "),
        second.replace("_", " "),
        f"{change} [95% CI]",
        "interval",
        "n",
    ]
    notes = [f"{', '.join(ms)}: {md_text(why)}." for why, ms in reasons.items()]
    return [*_table(header, rows), *(["", *notes] if notes else [])]


def conversations_section(metrics: Mapping[str, Any], shown: Sequence[str] = METRIC_NAMES) -> list[str]:
    """The section's lines; none when the summary has no conversations block (a single-question run).
    ``shown``: the metrics a table lists (doceval.results.summaries.shown_metrics)."""
    block = metrics.get("conversations")
    if not isinstance(block, Mapping):
        return []
    out = ["", "## Conversations", ""]
    out.append(
        f"{md_text(block.get('n_conversations'))} conversations, {md_text(block.get('n_turns'))} turns, "
        f"{md_text(block.get('n_needs_memory'))} of which need an earlier turn (needs_memory)."
    )
    out += ["", *_turn_table(block, shown), "", *_per_conversation(block.get("per_conversation") or {})]
    for key, title, labels, what in _MEMORY:
        if isinstance(block.get(key), Mapping):
            out += ["", f"### {title}", "", f"{title}: {what}.", "", *_memory_table(block[key], labels)]
    return out
