"""`compare` on conversations: which turn positions changed (failure stages paired by turn id) and the change in
all turns correct, paired by conversation (conversations are independent, their turns are not)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from doceval.scoring.conversations import (
    CORRECT_STAGES,
    UNMEASURED_STAGES,
    first_failing_turn,
    position_label,
    turn_rows,
)
from doceval.scoring.failures import failure_stage
from doceval.scoring.intervals import paired_change
from doceval.scoring.stats import win_tie_loss

Row = Mapping[str, Any]


@dataclass
class PositionChange:
    position: str  # "1", "2", "3+"
    n_turns: int  # turns at this position in both runs
    better: int  # failed (or could not be checked) in BASE, correct in NEW
    worse: int  # correct in BASE, failed in NEW
    other: int  # stage changed otherwise (one failure for another, a system error)


@dataclass
class AllTurnsCorrectChange:
    base: float | None
    new: float | None
    change: float | None
    ci: tuple[float, float] | None  # paired 95% interval (Newcombe) of new - base over conversations
    p_value: float | None  # exact McNemar, no change
    wins: int  # conversations all correct in NEW only
    ties: int
    losses: int
    n_paired: int  # conversations measured in both runs


def _stage(row: Row) -> str:
    return str(row.get("stage") or failure_stage(row))


def position_changes(base: Sequence[Row], new: Sequence[Row]) -> list[PositionChange]:
    """Per turn position, how many turns (paired by id) went from failing to correct, the reverse, or changed
    stage otherwise; empty when neither run has conversations."""
    before = {r["id"]: r for r in turn_rows(base)}
    groups: dict[str, list[int]] = {}
    for r in turn_rows(new):
        if r["id"] not in before:
            continue
        counts = groups.setdefault(position_label(int(r["turn"])), [0, 0, 0, 0])
        counts[0] += 1
        old, now = _stage(before[r["id"]]), _stage(r)
        if old == now:
            continue
        if now in CORRECT_STAGES and old not in CORRECT_STAGES:
            counts[1] += 1
        elif old in CORRECT_STAGES and now not in CORRECT_STAGES and now not in UNMEASURED_STAGES:
            counts[2] += 1
        else:
            counts[3] += 1
    return [PositionChange(p, *groups[p]) for p in sorted(groups)]


def _all_correct(rows: Sequence[Row]) -> dict[str, float]:
    """Per conversation: 1.0 when every turn was correct, 0.0 when one failed; left out when not measured."""
    by_conversation: dict[str, list[Row]] = {}
    for r in turn_rows(rows):
        by_conversation.setdefault(str(r["conversation"]), []).append(r)
    out = {}
    for conversation, turns in by_conversation.items():
        first = first_failing_turn(turns)
        if first != "not_measured":
            out[conversation] = 1.0 if first is None else 0.0
    return out


def all_turns_correct_change(
    base: Sequence[Row], new: Sequence[Row], *, n_boot: int, seed: int
) -> AllTurnsCorrectChange | None:
    """all_turns_correct in both runs over the conversations both measured, with the paired interval and
    McNemar's p; None when the runs share no conversation."""
    b, n = _all_correct(base), _all_correct(new)
    shared = [c for c in n if c in b]
    if not shared:
        return None
    bc = np.array([b[c] for c in shared])
    nc = np.array([n[c] for c in shared])
    change = paired_change(bc, nc, n_boot=n_boot, seed=seed)
    wins, ties, losses = win_tie_loss(bc, nc)
    bv, nv = float(bc.mean()), float(nc.mean())
    ci = None if change.ci is None else (float(change.ci[0]), float(change.ci[1]))
    return AllTurnsCorrectChange(bv, nv, nv - bv, ci, change.p_value, wins, ties, losses, change.n)


def format_conversation_changes(
    positions: Sequence[PositionChange], overall: AllTurnsCorrectChange | None, fmt: Mapping[str, Any]
) -> list[str]:
    """The compare lines for conversations (``fmt``: compare's number, signed, interval and p formatters)."""
    lines: list[str] = []
    if positions:
        lines.append("turns by position (baseline -> new; failing -> correct is better):")
        for p in positions:
            lines.append(
                f"  turn {p.position}: {p.better} better, {p.worse} worse, {p.other} other stage "
                f"changes, of {p.n_turns} turns"
            )
    if overall is not None:
        lines.append(
            f"all_turns_correct: {fmt['num'](overall.base)} -> {fmt['num'](overall.new)}, change "
            f"{fmt['signed'](overall.change)} {fmt['interval'](overall.ci)}, p {fmt['p'](overall.p_value)}, "
            f"W/T/L {overall.wins}/{overall.ties}/{overall.losses} over {overall.n_paired} conversations "
            "(paired by conversation; not in the Holm family)"
        )
    return lines + ([""] if lines else [])
