"""Conversation metrics (docs/design.md section 4.6), from a summary's entry rows: a turn of a conversation is
an entry with ``conversation`` (its conversation's id), ``turn`` (its position from 1) and ``needs_memory``;
single-question entries (``conversation`` null) are ignored here.

- every registered metric over the turns, by turn position (1, 2, 3+) and by ``needs_memory``;
- per conversation: all turns correct (every turn's failure stage ``ok`` or ``correct_refusal``) and the
  distribution of the first failing turn;
- the memory benefit (two replays of the same conversations: with the conversation's memory and with memory
  reset before each turn), the standalone ceiling (each needs_memory turn asked as its standalone rewrite,
  against the reset), memory recovery (benefit / ceiling) and the memory leak (isolated against
  ``--warm-memory``), paired by turn id.

Turns of one conversation are not independent, so every interval over turns takes whole conversations as its
units. A mean over turns: the cluster bootstrap (:func:`doceval.scoring.stats.cluster_bca_ci`); with fewer than
:data:`~doceval.scoring.intervals.MIN_N_BOOTSTRAP` conversations, or no spread between them, the Wilson
interval with n = the number of conversations (as if each conversation's turns were one observation:
conservative under any correlation within a conversation). A paired difference (memory benefit and leak):
the sign-flip interval over conversations (:func:`doceval.scoring.stats.sign_flip_interval`, each
conversation's summed turn differences and its turn count), or none, with why, when fewer than
:data:`~doceval.scoring.intervals.MIN_DIFFERING` conversations have a turn that differs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from doceval.scoring.intervals import MIN_DIFFERING, MIN_N_BOOTSTRAP, MIN_N_BREAKDOWN, interval, too_few
from doceval.scoring.proportions import wilson
from doceval.scoring.registry import METRIC_NAMES, names
from doceval.scoring.stats import cluster_bca_ci, sign_flip_interval
from doceval.summary import Summary, as_summary

__all__ = [
    "CORRECT_STAGES",
    "ClusterSettings",
    "cluster_interval",
    "cluster_paired_interval",
    "conversation_metrics",
    "first_failing_turn",
    "memory_benefit",
    "memory_leak",
    "memory_recovery",
    "not_measured_block",
    "position_label",
    "ratio_interval",
    "standalone_ceiling",
    "turn_rows",
]

Row = Mapping[str, Any]
CORRECT_STAGES = frozenset({"ok", "correct_refusal"})
# Stages that say nothing about right or wrong (the call failed, the answer could not be checked): a
# conversation whose only non-correct turns are these is not measured, never counted as failed.
UNMEASURED_STAGES = frozenset({"system_error", "answer_not_measured"})


@dataclass(frozen=True)
class ClusterSettings:
    """The interval settings of one summary (its ``metrics.intervals`` block)."""

    n_boot: int
    seed: int
    binary_method: str = "midp"

    @classmethod
    def of_summary(cls, summary: Summary | Mapping[str, Any]) -> ClusterSettings:
        block = as_summary(summary).metrics.intervals
        return cls(int(block["bootstrap"]), int(block["seed"]), str(block["binary"]))


def turn_rows(rows: Sequence[Row]) -> list[Row]:
    """The entries that are turns of a conversation, in their order."""
    return [r for r in rows if r.get("conversation") is not None]


def position_label(turn: int) -> str:
    return "3+" if turn >= 3 else str(turn)


def _score(row: Row, metric: str) -> float:
    value = (row.get("scores") or {}).get(metric)
    return math.nan if value is None else float(value)


def _of(metric: str) -> Callable[[Row], float]:
    return lambda row: _score(row, metric)


def _by_conversation(rows: Sequence[Row], value: Callable[[Row], float]) -> list[np.ndarray]:
    """Each conversation's non-NaN values (conversations in first-seen order; one with none is left out)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        v = value(r)
        if not math.isnan(v):
            groups.setdefault(str(r["conversation"]), []).append(v)
    return [np.array(g, dtype=np.float64) for g in groups.values()]


def cluster_interval(
    clusters: Sequence[np.ndarray], settings: ClusterSettings
) -> tuple[list[float] | None, str | None]:
    """The 95% interval of the mean over every value of ``clusters`` (one array per conversation, values in
    [0, 1]), resampling conversations, and its method: ``cluster-bca``, or ``cluster-wilson-bounded`` (the
    Wilson interval with n = the number of conversations) with few conversations or none differing from
    another. (None, None) with no value."""
    clusters = [c for c in clusters if c.size]
    if not clusters:
        return None, None
    sums = np.array([c.sum() for c in clusters])
    counts = np.array([c.size for c in clusters], dtype=np.float64)
    means = sums / counts
    if len(clusters) >= MIN_N_BOOTSTRAP and float(means.max()) > float(means.min()):
        ci = cluster_bca_ci(sums, counts, n_boot=settings.n_boot, seed=settings.seed)
        if ci is not None and ci[1] > ci[0]:
            return [ci[0], ci[1]], "cluster-bca"
    n = len(clusters)
    lo, hi = wilson(float(np.concatenate(clusters).mean()) * n, n)
    return [lo, hi], "cluster-wilson-bounded"


@dataclass(frozen=True)
class PairedInterval:
    ci: list[float] | None  # None: no difference, or too few conversations differ (``note`` says)
    method: str | None  # cluster-sign-flip, or None without an interval
    note: str | None = None


def cluster_paired_interval(
    diffs: Sequence[np.ndarray], settings: ClusterSettings, anchors: Sequence[float] = ()
) -> PairedInterval:
    """The 95% interval of the mean of paired turn differences (one array per conversation, values in
    [-1, 1]): the sign-flip interval with conversations as the units (each its summed differences over its turn
    count), ``settings.n_boot`` seeded flips (every sign vector up to 12 conversations). Fewer than
    MIN_DIFFERING conversations with a differing turn: no interval, ``note`` says so. ``anchors``: extra units
    of one turn each, flipped with the others but never counted as differing (:func:`ratio_interval`'s)."""
    clusters = [c for c in diffs if c.size]
    if not clusters:
        return PairedInterval(None, None)
    differing = sum(bool(np.any(c != 0.0)) for c in clusters)
    if differing < MIN_DIFFERING:
        return PairedInterval(None, None, too_few(differing, "conversations"))
    sums = np.array([*(c.sum() for c in clusters), *anchors])
    counts = np.array([*(c.size for c in clusters), *(1 for _ in anchors)], dtype=np.float64)
    lo, hi = sign_flip_interval(sums, counts, n_flips=settings.n_boot, seed=settings.seed)[0]
    return PairedInterval([max(-1.0, float(lo)), min(1.0, float(hi))], "cluster-sign-flip")


def _mean(clusters: Sequence[np.ndarray]) -> float | None:
    values = [c for c in clusters if c.size]
    return float(np.concatenate(values).mean()) if values else None


def _turn_block(rows: Sequence[Row], settings: ClusterSettings, *, breakdown: bool) -> dict[str, Any]:
    """Every metric's mean over ``rows`` (turns) with its cluster interval; in a breakdown, a metric
    measured on fewer than MIN_N_BREAKDOWN turns gets no interval and is listed in ``too_few``."""
    block: dict[str, Any] = {
        "n_turns": len(rows),
        "n_conversations": len({r["conversation"] for r in rows}),
    }
    counts: dict[str, int] = {}
    ci95: dict[str, list[float] | None] = {}
    ci_method: dict[str, str | None] = {}
    too_few: list[str] = []
    for metric in METRIC_NAMES:
        clusters = _by_conversation(rows, _of(metric))
        block[metric] = _mean(clusters)
        counts[f"n_{metric}"] = n = sum(c.size for c in clusters)
        if breakdown and 0 < n < MIN_N_BREAKDOWN:
            ci95[metric], ci_method[metric] = None, None
            too_few.append(metric)
        else:
            ci95[metric], ci_method[metric] = cluster_interval(clusters, settings)
    block.update(counts=counts, ci95=ci95, ci_method=ci_method)
    if breakdown:
        block["too_few"] = too_few
    return block


def first_failing_turn(turns: Sequence[Row]) -> int | None | str:
    """The position of the first failed turn of one conversation (its turns in order); None when every turn
    was correct; ``"not_measured"`` when none failed but one could not be scored (a system error)."""
    unmeasured = False
    for r in sorted(turns, key=lambda t: int(t["turn"])):
        stage = r.get("stage")
        if stage in UNMEASURED_STAGES:
            unmeasured = True
        elif stage not in CORRECT_STAGES:
            return int(r["turn"])
    return "not_measured" if unmeasured else None


def _per_conversation(rows: Sequence[Row], settings: ClusterSettings) -> dict[str, Any]:
    """all_turns_correct (a mean over the measured conversations, which are independent: the summary's
    binary interval) and how many conversations first failed at each turn (``none``: all correct)."""
    conversations: dict[str, list[Row]] = {}
    for r in rows:
        conversations.setdefault(str(r["conversation"]), []).append(r)
    firsts = [first_failing_turn(turns) for turns in conversations.values()]
    measured = np.array([1.0 if f is None else 0.0 for f in firsts if f != "not_measured"])
    ci = interval(measured, binary_method=settings.binary_method, n_boot=settings.n_boot, seed=settings.seed)
    failed_at = sorted(f for f in firsts if isinstance(f, int))
    distribution = {str(t): failed_at.count(t) for t in sorted(set(failed_at))}
    return {
        "n_conversations": len(conversations),
        "n_measured": int(measured.size),
        "n_not_measured": len(firsts) - int(measured.size),
        "all_turns_correct": float(measured.mean()) if measured.size else None,
        "ci95": None if ci is None else [ci.lo, ci.hi],
        "ci_method": None if ci is None else ci.method,
        "first_failing_turn": {**distribution, "none": sum(f is None for f in firsts)},
    }


def conversation_metrics(rows: Sequence[Row], settings: ClusterSettings) -> dict[str, Any] | None:
    """The summary's ``metrics.conversations`` block from its entry rows; None when no row is a turn (a
    single-question run gains no key)."""
    turns = turn_rows(rows)
    if not turns:
        return None
    by_position: dict[str, list[Row]] = {}
    by_memory: dict[str, list[Row]] = {}
    for r in turns:
        by_position.setdefault(position_label(int(r["turn"])), []).append(r)
        by_memory.setdefault("true" if r["needs_memory"] else "false", []).append(r)
    return {
        "n_conversations": len({r["conversation"] for r in turns}),
        "n_turns": len(turns),
        "n_needs_memory": len(by_memory.get("true", [])),
        "turns": _turn_block(turns, settings, breakdown=False),
        "by_position": {p: _turn_block(g, settings, breakdown=True) for p, g in sorted(by_position.items())},
        "by_needs_memory": {
            k: _turn_block(g, settings, breakdown=True) for k, g in sorted(by_memory.items())
        },
        "per_conversation": _per_conversation(turns, settings),
        "intervals": {
            "unit": "conversation",
            "method": "cluster-bca",
            "fallback": "cluster-wilson-bounded",
            "paired": "cluster-sign-flip",
            "bootstrap": settings.n_boot,
            "seed": settings.seed,
        },
    }


def _paired_change(
    first: Sequence[Row],
    second: Sequence[Row],
    needs_memory: bool,
    labels: tuple[str, str, str],
    settings: ClusterSettings,
) -> dict[str, Any]:
    """Per metric of the ``memory`` tag, over the turns of ``first`` whose needs_memory is ``needs_memory``
    and that ``second`` scored too (paired by id): both means and their difference first - second, with its
    interval over conversations (:func:`cluster_paired_interval`; ``ci_note`` says why when there is none)."""
    chosen = [r for r in turn_rows(first) if bool(r["needs_memory"]) == needs_memory]
    other = {r["id"]: r for r in turn_rows(second)}
    first_label, second_label, change_label = labels
    out: dict[str, Any] = {}
    for metric in names("memory"):
        pairs = [(r, other[r["id"]]) for r in chosen if r["id"] in other]
        pairs = [
            (a, b) for a, b in pairs if not (math.isnan(_score(a, metric)) or math.isnan(_score(b, metric)))
        ]
        diffs = _by_conversation(
            [a for a, _ in pairs], _difference(dict((a["id"], b) for a, b in pairs), metric)
        )
        paired = cluster_paired_interval(diffs, settings)
        out[metric] = {
            first_label: _mean(_by_conversation([a for a, _ in pairs], _of(metric))),
            second_label: _mean(_by_conversation([b for _, b in pairs], _of(metric))),
            change_label: _mean(diffs),
            "ci95": paired.ci,
            "ci_method": paired.method,
            "ci_note": paired.note,
            "n_turns": len(pairs),
            "n_conversations": len({a["conversation"] for a, _ in pairs}),
        }
    return out


def _difference(partner: Mapping[str, Row], metric: str) -> Callable[[Row], float]:
    return lambda r: _score(r, metric) - _score(partner[r["id"]], metric)


def memory_benefit(
    with_memory: Sequence[Row], memory_reset: Sequence[Row], settings: ClusterSettings
) -> dict[str, Any]:
    """On needs_memory turns: the metric with the conversation's memory minus the metric with memory reset
    before that turn (two replays of the same conversations, paired by turn id). A metric no turn scored in
    both replays (answer_accuracy without a judge) is null: not measured."""
    return _paired_change(
        with_memory, memory_reset, True, ("with_memory", "memory_reset", "benefit"), settings
    )


def memory_leak(isolated: Sequence[Row], warm: Sequence[Row], settings: ClusterSettings) -> dict[str, Any]:
    """On turns that do not need memory: the metric isolated minus the metric under ``--warm-memory`` (memory
    from other conversations), paired by turn id; positive = memory from elsewhere made it worse."""
    return _paired_change(isolated, warm, False, ("isolated", "warm_memory", "leak"), settings)


def standalone_ceiling(
    standalone: Sequence[Row], memory_reset: Sequence[Row], settings: ClusterSettings
) -> dict[str, Any]:
    """On needs_memory turns: the metric when the turn is asked as its standalone rewrite (a question of its own,
    at its own pin) minus the metric with memory reset (the bare follow-up alone), paired by turn id: how much a
    perfect memory could recover. Null where no turn scored in both replays."""
    return _paired_change(standalone, memory_reset, True, ("standalone", "memory_reset", "ceiling"), settings)


RECOVERY_METHOD = "cluster-ratio-inversion"
# Bounds further out than this are taken as unbounded (the ceiling's interval already excludes 0 by then).
_RATIO_LIMIT = 1e6


def _rows_by_id(rows: Sequence[Row]) -> dict[str, Row]:
    return {r["id"]: r for r in turn_rows(rows)}


class _Untestable(Exception):
    """The paired interval gives no interval for some ratio (its method says why): nothing to invert."""


def _anchors(ceiling: Sequence[np.ndarray], ratio: float, scale: float) -> tuple[float, float]:
    """Two one-turn pseudo-conversations for the test at ``ratio``: a turn memory recovers in full (benefit =
    ceiling = 1, the ceiling's sign) and one it does not recover at all (benefit 0, ceiling 1), residuals
    (1 - ratio) and -ratio, scaled as the real ones. Near a recovery of 1 (or 0) the residuals at the true
    ratio are many small ones and a few large ones of the other sign; a sample holding few of those few
    gives the sign flips too little spread and rejects the truth (coverage 0.88 at 48 conversations). The
    anchors hold one of each side, as Agresti and Coull add successes and failures to Wald's interval
    (docs/design.md 4.6, "Recovery's interval")."""
    sign = 1.0 if float(sum(c.sum() for c in ceiling)) >= 0.0 else -1.0
    return sign * (1.0 - ratio) / scale, -sign * ratio / scale


def _accepts(
    benefit: Sequence[np.ndarray], ceiling: Sequence[np.ndarray], ratio: float, settings: ClusterSettings
) -> bool:
    """Whether the paired interval of benefit - ratio x ceiling (per turn, by conversation; scaled into [-1, 1])
    holds 0: ratio is a value of benefit / ceiling the data do not reject. :class:`_Untestable` when the paired
    interval has none."""
    scale = 1.0 + abs(ratio)
    diffs = [(b - ratio * c) / scale for b, c in zip(benefit, ceiling, strict=True)]
    paired = cluster_paired_interval(diffs, settings, _anchors(ceiling, ratio, scale))
    if paired.ci is None:
        raise _Untestable(paired.note or "no turn differs")
    return paired.ci[0] <= 0.0 <= paired.ci[1]


def _bound(
    benefit: Sequence[np.ndarray],
    ceiling: Sequence[np.ndarray],
    start: float,
    sign: float,
    settings: ClusterSettings,
) -> float | None:
    """The last ratio on one side of ``start`` (an accepted ratio) that the test accepts: doubling steps out to a
    rejected one, then bisection to 1e-4. None when none is rejected before :data:`_RATIO_LIMIT`."""
    inside, step = start, max(1.0, abs(start))
    while True:
        outside = start + sign * step
        if abs(outside) > _RATIO_LIMIT:
            return None
        if not _accepts(benefit, ceiling, outside, settings):
            break
        inside, step = outside, step * 2
    while abs(outside - inside) > 1e-4:
        middle = (inside + outside) / 2
        if _accepts(benefit, ceiling, middle, settings):
            inside = middle
        else:
            outside = middle
    return inside


def ratio_interval(
    benefit: Sequence[np.ndarray], ceiling: Sequence[np.ndarray], estimate: float, settings: ClusterSettings
) -> tuple[list[float] | None, str]:
    """The 95% interval of mean(benefit) / mean(ceiling) over the same turns (one array per conversation, paired
    by position), by inverting the paired cluster interval (:func:`cluster_paired_interval`): the ratios R for
    which the interval of benefit - R x ceiling holds 0 (Fieller's construction with the conversation-resampling
    interval in place of the normal one). At the true ratio that difference has mean 0, so the ratio interval
    covers exactly when the difference's interval covers its true mean: it keeps the coverage of the paired
    interval it inverts. Unbounded when the ceiling's own interval holds 0: (None, why)."""
    ceiling_paired = cluster_paired_interval(ceiling, settings)
    ceiling_ci = ceiling_paired.ci
    if ceiling_ci is None:
        return (
            None,
            f"no interval: the standalone ceiling has none ({ceiling_paired.note or 'no turn differs'})",
        )
    if ceiling_ci[0] <= 0.0 <= ceiling_ci[1]:
        return None, "unbounded: the standalone ceiling's interval includes 0"
    try:
        if not _accepts(benefit, ceiling, estimate, settings):
            return None, "not bounded: the interval of benefit - recovery x ceiling excludes its own estimate"
        lo = _bound(benefit, ceiling, estimate, -1.0, settings)
        hi = _bound(benefit, ceiling, estimate, 1.0, settings)
    except _Untestable as exc:
        return None, f"no interval: the paired interval of benefit - recovery x ceiling has none ({exc})"
    if lo is None or hi is None:
        return None, "unbounded: no ratio far from the estimate is rejected"
    return [float(lo), float(hi)], RECOVERY_METHOD


def _recovery_row(
    triples: Sequence[tuple[Row, Row, Row]], metric: str, settings: ClusterSettings
) -> dict[str, Any]:
    """One metric's recovery over the turns all three replays scored: benefit / ceiling, with its interval."""
    benefit = _by_conversation(
        [m for m, _, _ in triples], _difference({m["id"]: r for m, r, _ in triples}, metric)
    )
    ceiling = _by_conversation(
        [s for _, _, s in triples], _difference({s["id"]: r for _, r, s in triples}, metric)
    )
    row: dict[str, Any] = {
        "recovery": None,
        "benefit": _mean(benefit),
        "ceiling": _mean(ceiling),
        "ci95": None,
        "ci_method": None,
        "n_turns": len(triples),
        "n_conversations": len({m["conversation"] for m, _, _ in triples}),
    }
    if not triples:
        return {**row, "not_measured": "no needs_memory turn was scored in all three replays"}
    if row["ceiling"] == 0.0:
        return {
            **row,
            "not_measured": "the standalone ceiling is 0 on these turns: nothing for memory to recover",
        }
    row["recovery"] = row["benefit"] / row["ceiling"]
    ci, method = ratio_interval(benefit, ceiling, row["recovery"], settings)
    return {
        **row,
        "ci95": ci,
        "ci_method": method if ci is not None else None,
        **({"interval_note": method} if ci is None else {}),
    }


def memory_recovery(
    with_memory: Sequence[Row],
    memory_reset: Sequence[Row],
    standalone: Sequence[Row],
    settings: ClusterSettings,
) -> dict[str, Any]:
    """On needs_memory turns: memory benefit / standalone ceiling, (with memory - reset) / (standalone - reset)
    over the turns all three replays scored: the share of what a self-contained question gains over the bare
    follow-up that the system's memory recovers (1: as good as the standalone question; 0: no better than
    asking without context). Per metric of the ``memory`` tag, with :func:`ratio_interval`."""
    reset, alone = _rows_by_id(memory_reset), _rows_by_id(standalone)
    out: dict[str, Any] = {}
    for metric in names("memory"):
        triples = [
            (r, reset[r["id"]], alone[r["id"]])
            for r in turn_rows(with_memory)
            if r["needs_memory"] and r["id"] in reset and r["id"] in alone
        ]
        triples = [t for t in triples if not any(math.isnan(_score(x, metric)) for x in t)]
        out[metric] = _recovery_row(triples, metric, settings)
    return out


def not_measured_block(change: str, reason: str) -> dict[str, Any]:
    """A memory figure's block where its replay did not run (``change``: "ceiling", "recovery"): every metric
    null, saying why."""
    return {
        metric: {change: None, "ci95": None, "ci_method": None, "n_turns": 0, "not_measured": reason}
        for metric in names("memory")
    }
